"""Faults on the driver: kill it and start another, or make Spark replay one batch.

A new driver starts on the same checkpoint (at-least-once, exactly-once), so Spark
re-executes a batch that is in the offset log but not in the commit log; or on a fresh
checkpoint at the latest offsets (at-most-once), so whatever was in flight is skipped.
Which one is the harness's business (Targets.restart_driver).
"""

from __future__ import annotations

import time

from faults.base import Fault, Observation
from faults.kinds import DOWNTIME, FaultKind
from faults.targets import end_s as _end_s
from faults.targets import wait_for
from workloads.pipelines.control import DELAY_COMMIT, HOLD_COMMIT, held_batches, holding, request, withdraw

HOLD_TIMEOUT_S = 60.0
FIRST_BATCH_TIMEOUT_S = 120.0


class KillDriver(Fault):
    """SIGKILL the driver's process tree; heal starts a new driver after `downtime`.

    When a delay-commit is switched on, the kill waits until a batch is held in the
    commit window, so that it lands there: the deterministic replay."""

    held: dict | None = None

    def _inject(self) -> None:
        control = self.targets.control_dir
        self.held = holding(control)
        if self.held is None and (control / DELAY_COMMIT).exists():
            self.held = wait_for(lambda: holding(control), HOLD_TIMEOUT_S)
        self._kill()

    def _kill(self) -> None:
        driver = self.targets.driver()
        self.targets.process(driver.pid)           # refuses a pid this run did not start
        # what a restart on this checkpoint runs again: batches in the offset log but not yet
        # in the commit log when the driver dies (the one in flight), and a held one
        self.inflight = _uncommitted(self.targets.checkpoint())
        self.query_id, self.run_id = _ids(self.targets.progress())
        self.target = f"driver (pid {driver.pid})"
        self.targets.expect_down(True)
        self.killed_at = time.time()
        driver.kill()

    def _heal(self) -> None:
        if not hasattr(self, "killed_at"):
            return   # the kill never happened: a restart would start a second driver
        try:
            self.targets.restart_driver()
            self.restarted_at = time.time()
        finally:
            self.targets.expect_down(False)

    def observe(self) -> Observation:
        if not hasattr(self, "restarted_at"):
            return Observation(False, f"{self.target} was killed but no new driver started")

        def new_run() -> list[dict]:   # the new driver's batches: another run id than the killed one's
            return [p for p in self.targets.progress()
                    if p.get("runId") != self.run_id and _end_s(p) > self.killed_at]

        after = wait_for(new_run, FIRST_BATCH_TIMEOUT_S, 0.5)
        if not after:
            return Observation(False, f"{self.target} was killed and restarted, but no batch completed "
                                      f"within {FIRST_BATCH_TIMEOUT_S:.0f}s")
        first = after[0]
        again = self.inflight | ({self.held["batch_id"]} if self.held else set())
        rerun = [p for p in after if p.get("id") == self.query_id and p["batchId"] in again]
        facts = {"downtime_s": round(self.restarted_at - self.killed_at, 3),
                 "first_batch_after_s": round(_end_s(first) - self.killed_at, 3),
                 "batches_reexecuted": len({p["batchId"] for p in rerun}),
                 "events_reread": sum(p.get("numInputRows", 0) for p in rerun)}
        fresh = first.get("id") != self.query_id
        how = ("on a fresh checkpoint at the latest offsets" if fresh
               else f"on the same checkpoint, first batch {first['batchId']}")
        held = f" while batch {self.held['batch_id']} was held in the commit window" if self.held else ""
        return Observation(True, f"{self.target} killed{held}; a new driver ran {how} after "
                                 f"{facts['downtime_s']:.1f}s down", facts)


class ReplayBatch(KillDriver):
    """Hold the next batch that wrote rows after the sink's write, kill the driver there,
    and start again: the offset log holds the batch and the commit log does not, so Spark
    re-executes it with its original id. No timing is involved."""

    def _inject(self) -> None:
        control = self.targets.control_dir
        seen = len(held_batches(control))
        request(control, HOLD_COMMIT)
        if not wait_for(lambda: len(held_batches(control)) > seen, HOLD_TIMEOUT_S):
            raise TimeoutError("no batch that wrote rows reached the commit window "
                               f"within {HOLD_TIMEOUT_S:.0f}s")
        self.held = held_batches(control)[-1]
        self._kill()

    def _heal(self) -> None:
        withdraw(self.targets.control_dir, HOLD_COMMIT)   # unused when no batch was ever held
        super()._heal()

    def observe(self) -> Observation:
        seen = super().observe()
        if not seen.observed or self.held is None:
            return seen
        again = seen.facts.get("batches_reexecuted", 0) > 0
        fresh = "fresh checkpoint" in seen.detail
        if not again and not fresh:
            return Observation(False, f"batch {self.held['batch_id']} was held and the driver restarted, "
                                      f"but the batch did not run again", seen.facts)
        what = "skipped (at-most-once restarts fresh)" if fresh else "ran again"
        return Observation(True, f"batch {self.held['batch_id']} ({self.held['rows']} rows) was written, "
                                 f"the driver killed before its commit, and the batch {what}", seen.facts)



_DRIVER_RECOVERY = ("downtime_s", "first_batch_after_s", "batches_reexecuted", "events_reread")

KILL_DRIVER_FAULT = FaultKind(
    "kill-driver", KillDriver,
    about="SIGKILL the driver's process tree and start a new driver after `downtime`; a batch must complete "
          "after it. Inside a `delay-commit` it waits for the held batch, so that it kills there",
    models="a driver crash: its node lost, its container killed",
    keys=(DOWNTIME,), targets=("driver",), default_target="driver", restarts=True,
    recovery_keys=_DRIVER_RECOVERY)

REPLAY_BATCH_FAULT = FaultKind(
    "replay-batch", ReplayBatch,
    about="hold the next batch that wrote rows after the sink's write, kill the driver there and start "
          "again: the batch is in the offset log and not in the commit log, so Spark must run it again "
          "with its id",
    models="a crash between a sink's commit and Spark's commit log (the Paimon double commit, "
           "apache/paimon#9666)",
    keys=(DOWNTIME,), targets=("driver",), default_target="driver", restarts=True,
    needs_commit_gate=True, recovery_keys=_DRIVER_RECOVERY)


def _uncommitted(checkpoint) -> set[int]:
    """Batch ids in the checkpoint's offset log and not in its commit log."""
    def ids(sub: str) -> set[int]:
        folder = checkpoint / sub
        return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.is_dir() else set()
    return ids("offsets") - ids("commits")


def _ids(progress: list[dict]) -> tuple[str | None, str | None]:
    """The query id (kept across restarts on one checkpoint) and the run id (new each start)."""
    return (progress[-1].get("id"), progress[-1].get("runId")) if progress else (None, None)

