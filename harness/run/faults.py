"""Run a case's fault schedule: each fault in a thread of its own, timed from the first
event sent, recorded for summary.json with what was observed.

A fault is injected at `at`, healed `duration` (or `downtime`) after its injection, then
observed. Faults overlap freely: a kill-driver at 10 s lands inside a delay-commit from
8 s. On an interrupted run `stop(aborted=True)` undoes what can be undone at once
(SIGCONT, the lock, the commit hold) and starts nothing new (no driver restart).
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
import weakref
from collections.abc import Callable

from faults import registry
from faults.base import Fault, Observation
from faults.spec import FaultSpec
from faults.targets import Targets

log = logging.getLogger(__name__)


class FaultRun:
    """One fault of the schedule, from its injection to its observation."""

    def __init__(self, spec: FaultSpec, targets: Targets, t0: float, say: Callable[[str], None]):
        self.spec, self.targets, self.t0, self.say = spec, targets, t0, say
        self.fault: Fault | None = None
        self.observation: Observation | None = None
        self.error: str | None = None

    def run(self, stopping: threading.Event) -> None:
        if stopping.wait(max(0.0, self.t0 + self.spec.at_s - time.time())):
            return
        try:
            self.fault = registry.make(self.spec, self.targets)
            self.fault.inject()
            self.say(f"fault {self.spec.kind}: injected into {self.fault.target}")
            # a downtime counts from the kill, not from the end of the injection: a killed
            # driver's process tree takes a moment to be reaped, and that moment is downtime.
            # Other faults' durations count from the end of their injection, which may first
            # wait for a batch to reach the commit window.
            since = getattr(self.fault, "killed_at", None) or time.time()
            stopping.wait(max(0.0, since + self.spec.lasts_s - time.time()))
            if not stopping.is_set():
                self.fault.heal()
                self.observation = self.fault.observe()
                seen = "seen" if self.observation.observed else "NOT SEEN"
                self.say(f"fault {self.spec.kind}: {seen}: {self.observation.detail}")
        except Exception as exc:  # noqa: BLE001 - recorded, and the case fails its run check
            self.error = f"{type(exc).__name__}: {exc}"
            log.error("fault %s failed: %s\n%s", self.spec.kind, exc, traceback.format_exc())
            self.say(f"fault {self.spec.kind}: FAILED: {self.error}")
            self.release()

    def release(self) -> None:
        """Undo what lasts (SIGCONT, the lock, the commit hold), whatever happened."""
        if self.fault is not None and self.fault.injected_at is not None:
            try:
                self.fault.heal()
            except Exception as exc:  # noqa: BLE001 - one failing heal must not stop the others
                log.error("healing %s failed: %s", self.spec.kind, exc)

    def restore(self) -> None:
        """Put back a node the fault left down for the rest of the case (Fault.restore)."""
        if self.fault is not None and self.fault.injected_at is not None:
            try:
                if self.fault.restore():
                    self.say(f"fault {self.spec.kind}: {self.fault.target} started again for the next case")
            except Exception as exc:  # noqa: BLE001 - the next case says what is missing
                log.error("restoring after %s failed: %s", self.spec.kind, exc)

    def record(self) -> dict:
        """The fault as summary.json's cases[].faults[] holds it."""
        f, seen = self.fault, self.observation
        started = None if f is None or f.injected_at is None else round(f.injected_at - self.t0, 3)
        ended = None if f is None or f.healed_at is None else round(f.healed_at - self.t0, 3)
        if self.error is not None:
            observed, detail = False, f"the fault could not be carried out: {self.error}"
        elif seen is None:
            observed, detail = False, "not injected: the case ended first"
        else:
            observed, detail = seen.observed, seen.detail
        facts = seen.facts if seen else {}
        landed = observed if seen is None or seen.landed is None else (observed and seen.landed)
        record = {
            "kind": self.spec.kind, "at_s": self.spec.at_s, "started_s": started, "ended_s": ended,
            "target": f.target if f is not None else self.spec.target, "observed": observed,
            "landed": landed, "detail": detail, "spec": self.spec.describe(),
            "recovery": {key: facts.get(key) for key in registry.recovery_keys(self.spec.kind)},
        }
        if seen is not None and seen.proof:
            record["landed_detail"] = seen.proof
        if seen is not None and seen.outcome:
            record.update(outcome=seen.outcome, outcome_detail=seen.outcome_detail)
        if seen is not None:
            record.update(seen.more)
        return record


_LIVE: weakref.WeakSet[FaultRunner] = weakref.WeakSet()


def stop_every_schedule() -> None:
    """On Ctrl-C or SIGTERM, before the stack unwinds: no fault is injected from now on. (The
    unwinding can take a while, a producer flushing for one; a broker killed meanwhile was a
    fault injected after the user asked the run to stop.)"""
    for runner in list(_LIVE):
        runner.stopping.set()


class FaultRunner:
    """The schedule of one case: `start(t0)` when sending begins, `join()` after it."""

    def __init__(self, specs: tuple[FaultSpec, ...], targets: Targets,
                 say: Callable[[str], None] = log.info):
        _LIVE.add(self)
        self.runs: list[FaultRun] = []
        self.specs, self.targets, self.say = specs, targets, say
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.t0: float | None = None   # wall-clock seconds of the first event sent

    def start(self, t0: float) -> None:
        self.t0 = t0
        self.runs = [FaultRun(spec, self.targets, t0, self.say) for spec in self.specs]
        for run in self.runs:
            thread = threading.Thread(target=run.run, args=(self.stopping,), name=f"fault-{run.spec.kind}",
                                      daemon=True)
            thread.start()
            self.threads.append(thread)

    def join(self, timeout_s: float = 600.0) -> None:
        """Wait for every fault to be injected, healed and observed."""
        deadline = time.monotonic() + timeout_s
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def stop(self, aborted: bool = False) -> None:
        """End the schedule now. Everything that lasts is undone; on an aborted run a fault
        whose heal would start a process (a driver, the broker) is left as it is."""
        self.stopping.set()
        for thread in self.threads:
            thread.join(30)
        for run in self.runs:
            # a kind whose heal starts a process (a driver, the broker) is left as it is
            if not (aborted and registry.kind(run.spec.kind).restarts):
                run.release()
        if not aborted:   # an aborted run's registry stops every node anyway
            for run in self.runs:
                run.restore()

    def records(self) -> list[dict]:
        return [run.record() for run in self.runs]

    def problems(self) -> list[str]:
        """A sentence for every fault whose effect was not observed, or that did not land in
        the window it aims at, and for every restart Spark refused: the case fails on each."""
        out = []
        for r in self.records():
            if not r["observed"]:
                out.append(f"fault {r['kind']} at {r['at_s']:g}s not observed: {r['detail']}")
            elif not r["landed"]:
                out.append(f"fault {r['kind']} at {r['at_s']:g}s did not land where it aims: "
                           f"{r.get('landed_detail') or r['detail']}")
            if r.get("outcome") == "refused":
                out.append(f"Spark refused to restart after {r['kind']} at {r['at_s']:g}s: "
                           f"{r['outcome_detail']}")
        return out
