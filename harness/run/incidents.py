"""Incidents: what happened to a case's processes that nobody scheduled.

Two sources, both written while the case runs and read after it:
- the driver's own view of its executors (workloads/pipelines/executors.py): each executor
  added or removed, with Spark's reason for a lost one from the driver's log ("Command
  exited with code 137");
- the process registry's (`Watch`, below): each service process (the driver, Kafka,
  PostgreSQL, Toxiproxy) that exited while the case ran, with its exit code or signal.
A change that a fault of the schedule explains is kept too, marked `scheduled`; the rest
is what a user looking at a lag spike needs to know about.
"""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

from faults import registry
from harness.results.model import FaultRecord, Incident
from harness.results.rundir import CaseDir
from harness.run.poller import Poller
from workloads.pipelines import executors as executor_log

POLL_S = 0.5
_LOST = re.compile(r"Lost executor (\d+) on [^:]+: (.*)$")
# how long after a fault ends its effects may show
_SETTLE_S = 60.0


def _explains(family: str, fault: FaultRecord) -> bool:
    """Whether `fault` can cause an incident of `family`, as its kind says (faults/registry.py;
    a user's kind not loaded here, as its record's traits say): a kind that restarts the driver,
    or whose error may end the query (a storage fault), explains the driver's exit and its
    executors coming and going; a kind aimed at executors, their loss; one that restarts a
    service, its exit."""
    kind = registry.kind_of(fault.kind, fault.traits)
    if kind is None:
        return False
    if family == "executor":
        return (kind.kills_driver or kind.may_end_query or "executor" in kind.targets
                or "worker" in kind.targets)
    if family == "driver":
        return kind.kills_driver or kind.may_end_query
    return kind.restarts and not kind.kills_driver and not kind.may_end_query


class Watch(Poller):
    """Polls the registry's services every POLL_S in a thread; each exit goes to
    processes.jsonl. start() with the case, stop() before its result is built."""

    def __init__(self, registry, files: CaseDir):
        super().__init__(POLL_S, "incident-watch")
        self.registry, self.path = registry, files.processes
        self._running: dict[int, str] = {}   # pid -> service name, as last seen running

    def start(self) -> Watch:
        self.poll()
        return super().start()

    def stop(self, join_s: float = 5.0) -> None:
        super().stop(join_s)

    def poll(self) -> None:
        now_ms = time.time_ns() // 1_000_000
        seen: dict[int, tuple[str, object]] = {}
        for service in list(self.registry.services):
            if service.process is not None:
                seen[service.process.pid] = (service.name, service)
        lines = []
        for pid, (name, service) in seen.items():
            if getattr(service, "running", False):
                self._running[pid] = name
            elif pid in self._running:
                del self._running[pid]
                lines.append({"at_ms": now_ms, "service": name, "pid": pid,
                              "returncode": getattr(service, "returncode", None)})
        if lines:
            with self.path.open("a") as out:
                out.write("".join(json.dumps(line) + "\n" for line in lines))


def collect(files: CaseDir, t0: float | None, since_ms: float, until_ms: float,
            faults: list[FaultRecord]) -> list[Incident]:
    """The case's incidents between `since_ms` (its first batch, after the warm-up) and
    `until_ms` (when it asked its driver to stop), in time order; `t0` the first event sent."""
    origin_ms = (t0 or since_ms / 1000) * 1000
    causes = _lost_causes(files.driver_log)
    found: list[tuple[float, str, str, str, str]] = []
    for e in executor_log.read(files.executors):
        if since_ms <= e["at_ms"] <= until_ms and not e.get("startup"):
            kind = "executor-lost" if e["event"] == "removed" else "executor-added"
            cause = causes.get(e["id"], "removed from the driver's list") if kind == "executor-lost" else (
                "registered with the driver")
            found.append((e["at_ms"], kind, f"executor {e['id']}", cause, "spark"))
    for p in executor_log.read(files.processes):
        if since_ms <= p["at_ms"] <= until_ms:
            driver = p["service"].startswith("spark-driver")
            found.append((p["at_ms"], "driver-exit" if driver else "service-exit",
                          f"{p['service']} (pid {p['pid']})", _exit(p.get("returncode")), "process"))
    return [Incident(at_s=round((at - origin_ms) / 1000, 3), kind=kind, target=target, cause=cause,
                     source=source, scheduled=_scheduled(kind, (at - origin_ms) / 1000, faults))
            for at, kind, target, cause, source in sorted(found)]


def _lost_causes(log: Path) -> dict[str, str]:
    """Executor id -> Spark's reason for losing it, from the driver's log (its first mention)."""
    causes: dict[str, str] = {}
    if log.exists():
        for line in log.read_text(errors="replace").splitlines():
            match = _LOST.search(line)
            if match:
                causes.setdefault(match[1], match[2].strip())
    return causes


def _exit(code: int | None) -> str:
    if code is None:
        return "exited"
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


def _scheduled(kind: str, at_s: float, faults: list[FaultRecord]) -> bool:
    """Whether a fault of the schedule explains the incident: one whose kind can cause it,
    in effect at the time or ended less than _SETTLE_S before."""
    family = "executor" if kind.startswith("executor") else "driver" if kind == "driver-exit" else "service"
    for f in faults:
        if _explains(family, f) and f.started_s is not None:
            ended = f.ended_s if f.ended_s is not None else f.started_s
            if f.started_s - 1 <= at_s <= ended + _SETTLE_S:
                return True
    return False
