"""delay-commit: hold a batch between the sink's write and Spark's commit log."""

from __future__ import annotations

from faults.base import Fault, Observation, held_text
from faults.kinds import DURATION, BatchView, FaultKind, RecordView
from workloads.pipelines.control import DELAY_COMMIT, held_files, held_since, request, withdraw
from workloads.wait import WaitTimeout


class DelayCommit(Fault):
    """Asks the driver's commit gate to hold the next batch that wrote rows for `duration`.

    The request stays until a batch takes it (the query's pace sets how long that may take):
    `duration` is how long that batch is held, counted from its hold, not how long a batch
    has to come."""

    mark: frozenset[str] = frozenset()
    held: dict | None = None

    def _inject(self) -> None:
        self.mark = held_files(self.targets.control_dir)
        request(self.targets.control_dir, DELAY_COMMIT, str(round(self.spec.duration_s * 1000)))
        self.target = "driver (commit window)"

    def land(self) -> None:
        control = self.targets.control_dir
        try:
            self.targets.wait(lambda: held_since(control, DELAY_COMMIT, self.mark), "batch",
                              "no batch that wrote rows reached the commit window")
        except WaitTimeout:
            withdraw(control, DELAY_COMMIT)
            raise
        self.held = held_since(control, DELAY_COMMIT, self.mark)[0]
        self.landed_at = self.held["at_ms"] / 1000

    def _heal(self) -> None:
        withdraw(self.targets.control_dir, DELAY_COMMIT)

    def observe(self) -> Observation:
        if self.held is None:
            return Observation(False, "no batch that wrote rows reached the commit window")
        return Observation(True, f"{held_text(self.held)} was written and held "
                                 f"up to {self.spec.duration_s:g}s before its commit",
                           {"held_batch": self.held["batch_id"]})


def explain(fault: RecordView, batch: BatchView) -> str | None:
    """The hold of a batch whose rows reached the sink while the fault was in effect."""
    if fault.started_s is None or batch.sink_s is None:
        return None
    ended = fault.ended_s if fault.ended_s is not None else fault.started_s
    if fault.started_s <= batch.sink_s <= ended:
        return (f"delay-commit (from {fault.started_s:.1f} s) held it there, between the sink's write and "
                f"commits/{batch.local}")
    return None


DELAY_COMMIT_FAULT = FaultKind(
    "delay-commit", DelayCommit,
    about="the driver's commit gate holds the next batch that wrote rows between the sink's write and "
          "Spark's commit log (`checkpoint/commits/N`) for `duration`, counted from the hold; it goes around "
          "any `foreachBatch` sink",
    models="a slow commit: the window in which a crash makes Spark replay a batch the sink already has",
    keys=(DURATION,), targets=("driver",), default_target="driver", needs_commit_gate=True,
    recovery_keys=("held_batch",), explain=explain)
