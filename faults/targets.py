"""What the harness hands the injectors: its services, their pids, a few callables, and the
query's pace, which sets how long an injector waits for anything.

Injectors touch nothing else. Before any signal, `process()` checks the pid against
every pid the harness started and keeps a psutil handle, which refuses to signal a
pid that was reused by another process (psutil compares start times).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import psutil

from workloads.pipelines import progress_log
from workloads.wait import wait_until

T = TypeVar("T")


class Pace(Protocol):
    """How fast this case's query goes, as measured while it runs (harness/run/pace.py): what
    every wait that decides "not observed" is scaled by, instead of a constant tuned on one
    machine. `what` names the wait: "batch" (a batch with rows to reach a point of its run, or
    to complete), "restart" (a new driver's first batch), "executor" (a replacement executor),
    "signal" (a process to stop or die after a signal)."""

    def wait_s(self, what: str) -> float: ...

    def basis(self, what: str) -> str: ...


@dataclass(frozen=True)
class FixedPace:
    """A pace of given figures: batches of `batch_s`, a driver that starts in `start_s`."""

    batch_s: float = 1.0
    start_s: float = 15.0

    def wait_s(self, what: str) -> float:
        return pace_wait_s(what, self.batch_s, self.start_s)

    def basis(self, what: str) -> str:
        return pace_basis(what, self.batch_s, self.start_s)


# each wait: (floor, batches, start-ups): at least `floor` seconds, else that many of the
# query's measured batch times and driver start-ups
_WAITS = {"batch": (20.0, 6, 0), "restart": (45.0, 4, 3), "executor": (30.0, 4, 2), "signal": (10.0, 2, 0)}


def pace_wait_s(what: str, batch_s: float, start_s: float) -> float:
    floor, batches, starts = _WAITS[what]
    return round(max(floor, batches * batch_s + starts * start_s), 1)


def pace_basis(what: str, batch_s: float, start_s: float) -> str:
    """Why a wait is as long as it is: "6 of the query's batch times (3.1 s)"."""
    floor, batches, starts = _WAITS[what]
    parts = [f"{batches} of the query's batch times ({batch_s:.1f} s)" if batches else "",
             f"{starts} of its driver's start-ups ({start_s:.1f} s)" if starts else ""]
    scaled = " and ".join(p for p in parts if p)
    return f"{scaled}, at least {floor:g} s" if scaled else f"at least {floor:g} s"


class RefusedTarget(Exception):
    """A target that the harness did not start, or that is gone: no signal is sent."""


class RunStopping(RefusedTarget):
    """The run is stopping (Ctrl-C): a fault in the middle of its injection goes no further (a
    replay-batch whose hold came during the unwinding killed the driver 4 s after a Ctrl-C)."""


@dataclass
class Targets:
    """The processes and hooks of one case under way."""

    driver: Callable[[], Any]             # the case's current driver service (it changes on restart)
    # start a new driver (same checkpoint, or fresh for at-most-once), with changed settings if given
    restart_driver: Callable[..., None]
    expect_down: Callable[[bool], None]   # say that the driver's death is intended (or no longer)
    control_dir: Path                     # the driver's control channel (workloads.pipelines.control)
    executors_log: Path                   # the driver's own list of its executors (pipelines/executors.py)
    progress: Callable[[], list[dict]]    # the driver's progress records so far, in order
    checkpoint: Callable[[], Path]        # the current query's checkpoint
    started_pids: Callable[[], set[int]]  # every pid the harness started in this run
    # the case's newest driver at once, even while a fault has it down or restarting (driver()
    # waits for it to be up: what other faults must do meanwhile)
    driver_now: Callable[[], Any] = lambda: None
    services: dict[str, Any] = field(default_factory=dict)   # "broker", "postgres": service objects
    postgres_url: str | None = None
    sink_table: str | None = None
    seed: int = 0
    topic: str = ""                       # the case's topic
    bootstrap_servers: str = ""           # Kafka, as the harness reaches it (not through a proxy)
    # path ("kafka", "postgres", "broker:N") -> (Toxiproxy server, its proxies' names, a probe through them)
    network: dict[str, tuple[Any, list[str], Callable[[], float]]] = field(default_factory=dict)
    # Kafka ports: (the proxies Spark must use, the brokers' own ports Spark must not use)
    spark_ports: Callable[[], tuple[set[int], set[int]]] | None = None
    pace: Pace = field(default_factory=FixedPace)   # the query's measured pace: every wait's scale
    # whether the query cannot run a batch now: its driver dead (another fault killed it) or a
    # new one being started; a wait for a batch does not count that time
    query_paused: Callable[[], bool] = lambda: False
    driver_clock: Path | None = None       # the driver JVM's clock file, when it runs on one
    storage_control: Path | None = None    # the case's FUSE file system's control and record files
    storage_stats: Path | None = None
    source_table: Path | None = None       # a Delta source's table, as the appender writes it
    source_control: Path | None = None     # ... and its FUSE file system's control and record files
    source_stats: Path | None = None
    # whether the run is stopping (Ctrl-C, SIGTERM: harness/run/schedule.py sets it): a fault in
    # the middle of its injection then sends no signal and waits for nothing more
    stopping: Callable[[], bool] = lambda: False

    def rng(self, salt: str) -> random.Random:
        """A generator seeded by the scenario's seed and `salt`: the same plan every run."""
        return random.Random(f"{self.seed}:{salt}")

    def process(self, pid: int) -> psutil.Process:
        """A handle on `pid`, refused unless the harness started it and it still runs, and
        refused while the run is stopping."""
        self._not_stopping()
        if pid not in self.started_pids():
            raise RefusedTarget(f"pid {pid} was not started by this run: no signal sent")
        try:
            proc = psutil.Process(pid)
        except psutil.NoSuchProcess:
            raise RefusedTarget(f"pid {pid} is gone") from None
        return proc

    def processes(self, pids: list[int]) -> list[psutil.Process]:
        """Handles on those of `pids` this run started and that still run; one that ended
        between the listing and now (a short-lived PostgreSQL backend) is left out."""
        self._not_stopping()
        started = self.started_pids()
        refused = [pid for pid in pids if pid not in started]
        if refused:
            raise RefusedTarget(f"pids {refused} were not started by this run: no signal sent")
        handles = []
        for pid in pids:
            try:
                handles.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                continue
        return handles

    def executors(self) -> list[psutil.Process]:
        """The driver's executor processes, oldest first (executor:0 is the oldest)."""
        procs = self.processes(self.driver().executor_pids())
        return sorted(procs, key=lambda p: p.create_time())

    def service(self, name: str) -> Any:
        if name == "driver":
            return self.driver()
        if name not in self.services:
            raise RefusedTarget(f"this run has no {name} of its own (an external one is never touched)")
        return self.services[name]

    def brokers(self) -> dict[int, Any]:
        """Node id -> broker service, for every broker of this run's own Kafka."""
        nodes = {int(k.partition(":")[2]): v for k, v in self.services.items() if k.startswith("broker:")}
        return nodes or ({1: self.services["broker"]} if "broker" in self.services else {})

    def broker(self, target: str, salt: str) -> tuple[Any, str]:
        """The broker `target` names ("broker", "broker:N", "leader": the leader of a partition
        of the case's topic chosen from the seed, "controller": the active controller), with a
        sentence saying how it was chosen."""
        nodes = self.brokers()
        if not nodes:
            raise RefusedTarget("this run has no Kafka of its own (an external one is never touched)")
        kind, _, index = target.partition(":")
        if kind == "broker":
            node = int(index) if index else min(nodes)
            if node not in nodes:
                raise RefusedTarget(f"there is no broker {node} (brokers {sorted(nodes)})")
            return nodes[node], f"broker:{node}"
        from workloads import kafka_admin

        if kind == "controller":
            node = kafka_admin.controller(self.bootstrap_servers)
            return nodes[node], f"controller (broker:{node})"
        leaders = kafka_admin.leaders(self.bootstrap_servers, self.topic)
        partition = self.rng(salt).choice(sorted(leaders))
        return nodes[leaders[partition]], f"leader of partition {partition} (broker:{leaders[partition]})"

    def wait(self, condition: Callable[[], T], what: str, message: str, every_s: float = 0.2) -> T:
        """Poll `condition` until it is truthy and return its value; WaitTimeout after the
        case's pace says a `what` may take, with `message` and that wait's basis. A wait for a
        batch counts only the time the query could run one: while another fault has the driver
        down or restarting it stands still (nexmark-faults' q7: a fail-task armed just before a
        kill-driver timed out while no driver ran), and while another fault holds a batch in the
        commit gate (issue 43: a fail-task's wait ran out under a replay-batch's hold), for at
        most a restart's wait."""
        timeout_s = self.pace.wait_s(what)
        batch = what == "batch"

        def met():
            self._not_stopping()
            return condition()
        return wait_until(met, timeout_s, every_s,
                          lambda: f"{message} within {timeout_s:g} s ({self.pace.basis(what)})",
                          paused=self.batch_stalled if batch else None,
                          most_paused_s=self.pace.wait_s("restart") if batch else 0.0,
                          paused_means="the driver was down or restarting, or another fault held a batch")

    def _not_stopping(self) -> None:
        if self.stopping():
            raise RunStopping("the run is stopping: no signal sent, nothing more waited for")

    def batch_stalled(self) -> bool:
        """Whether no batch can end now: the driver down or restarting, or a batch held in the
        commit gate (a delay-commit's hold, a hold until a kill, a batch held before its read),
        which no later batch passes. A hold is over once a batch ended after it began: a killed
        driver never closes its hold's record."""
        return self.query_paused() or self.live_hold() is not None

    def live_hold(self) -> dict | None:
        """The batch the commit gate holds now, if any: a hold no batch has ended after (a driver
        killed under its hold never closes the hold's record, which then reads as held for up
        to its ceiling)."""
        from workloads.pipelines.control import holding

        held = holding(self.control_dir)
        if held is None or any(end_s(p) * 1000 > held["at_ms"] for p in self.progress()):
            return None
        return held

    def batches_after(self, at: float) -> list[dict]:
        """Progress records of batches that ended after wall-clock time `at`."""
        return [p for p in self.progress() if end_s(p) > at]


def end_s(progress: dict) -> float:
    """When a batch ended, in epoch seconds."""
    return progress_log.end_ms(progress) / 1000


