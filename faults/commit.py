"""delay-commit: hold a batch between the sink's write and Spark's commit log."""

from __future__ import annotations

from faults.base import Fault, Observation, held_text
from faults.kinds import DURATION, FaultKind
from workloads.pipelines.control import DELAY_COMMIT, held_batches, request, withdraw


class DelayCommit(Fault):
    """Asks the driver's commit gate to hold the next batch that wrote rows for `duration`."""

    def _inject(self) -> None:
        self.seen = len(held_batches(self.targets.control_dir))
        request(self.targets.control_dir, DELAY_COMMIT, str(round(self.spec.duration_s * 1000)))
        self.target = "driver (commit window)"

    def _heal(self) -> None:
        withdraw(self.targets.control_dir, DELAY_COMMIT)

    def observe(self) -> Observation:
        held = held_batches(self.targets.control_dir)[self.seen:]
        if not held:
            return Observation(False, f"no batch that wrote rows reached the commit window within "
                                      f"{self.spec.duration_s:g}s")
        first = held[0]
        return Observation(True, f"{held_text(first)} was written and held "
                                 f"up to {self.spec.duration_s:g}s before its commit",
                           {"held_batch": first["batch_id"]})


DELAY_COMMIT_FAULT = FaultKind(
    "delay-commit", DelayCommit,
    about="the driver's commit gate holds the next batch that wrote rows between the sink's write and "
          "Spark's commit log (`checkpoint/commits/N`) for `duration`; it goes around any "
          "`foreachBatch` sink",
    models="a slow commit: the window in which a crash makes Spark replay a batch the sink already has",
    keys=(DURATION,), targets=("driver",), default_target="driver", needs_commit_gate=True,
    recovery_keys=("held_batch",))
