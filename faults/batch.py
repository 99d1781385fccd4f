"""fail-batch: the commit gate raises inside foreachBatch, and the query fails with it, as a
user's code would make it fail; a new driver then starts on the same checkpoint after
`downtime`, as a job scheduler restarts a failed job (at-most-once: a fresh checkpoint)."""

from __future__ import annotations

import json
import time

from faults.base import Observation
from faults.driver import DriverRestart, landed_at, query_and_run_ids, sentence, uncommitted
from faults.kinds import FaultKind, Key
from workloads.pipelines.control import (
    AFTER_WRITE,
    BEFORE_WRITE,
    FAIL_BATCH,
    failed_batches,
    request,
    withdraw,
)


class FailBatch(DriverRestart):
    """`times` failures: each one ends the driver, and heal starts the next driver."""

    def _inject(self) -> None:
        control = self.targets.control_dir
        self.seen = len(failed_batches(control))
        self.checkpoint = self.targets.checkpoint()
        self.query_id, self.run_id = query_and_run_ids(self.targets.progress())
        self.driver = self.targets.driver()
        self.target = f"driver (pid {self.driver.pid}), inside foreachBatch"
        self.targets.expect_down(True)
        request(control, FAIL_BATCH, json.dumps({"point": self.point, "times": self.times}))
        self._wait_failure(0)

    @property
    def point(self) -> str:
        return self.spec.get("point", AFTER_WRITE)

    @property
    def times(self) -> int:
        return int(self.spec.get("times", 1))

    def _wait_failure(self, i: int) -> None:
        """Wait for the gate's i-th failure of this fault, and for the driver it failed to exit."""
        control = self.targets.control_dir
        self.targets.wait(lambda: len(failed_batches(control)) > self.seen + i, "batch",
                          "no batch with rows reached foreachBatch")
        self.failed = failed_batches(control)[self.seen + i]
        driver = self.targets.driver_now()
        self.targets.wait(lambda: not driver.running, "batch",
                          f"the query did not fail after the exception in batch {self.failed['batch_id']}")
        self.error = driver.status().get("error") or driver.how_it_ended()
        self.inflight = uncommitted(self.checkpoint)
        self.killed_at = time.time()
        if i == 0:   # read now: the new driver will run the batch again and commit it
            self.landed = landed_at(self.point, self.checkpoint, self.failed, self.killed_at)

    def _heal(self) -> None:
        if self.killed_at is None:
            # no failure came: the driver was never down, and this fault said it would be
            self.targets.expect_down(False)
            withdraw(self.targets.control_dir, FAIL_BATCH)
            return
        try:
            for i in range(self.times):
                if i:   # the next failure comes from the driver just started
                    self.targets.expect_down(True)
                    self._wait_failure(i)
                    time.sleep(self.spec.downtime_s)
                super()._heal()
                if self.refused is not None:
                    return
                if i + 1 < self.times:
                    self.targets.expect_down(True)
        finally:
            withdraw(self.targets.control_dir, FAIL_BATCH)

    def observe(self) -> Observation:
        seen = super().observe()
        if not seen.observed or seen.outcome == "refused":
            return seen
        batch = self.failed["batch_id"]
        again = seen.facts.get("batches_reexecuted", 0) > 0 or self._fresh()
        if not again:
            return Observation(False, f"batch {batch} failed and the driver restarted, but the batch did not "
                                      "run again", seen.facts)
        if self.landed is not None:
            seen.landed, seen.proof = self.landed
        times = f" ({self.times} times)" if self.times > 1 else ""
        seen.detail = (f"the query failed{times} with \"{self.failed['message']}\" "
                       f"(the driver said: {sentence(self.error, 200)}); " + seen.detail)
        return seen


FAIL_BATCH_FAULT = FaultKind(
    "fail-batch", FailBatch,
    about="the commit gate raises an exception inside `foreachBatch` for the next batch with rows, at "
          "`point` (`before-write` or `after-write`), and the query fails with it; after `downtime` the "
          "harness starts a new driver on the same checkpoint (at-most-once: a fresh one), `times` times",
    models="a step of foreachBatch that fails after the sink's write (apache/iceberg#8809), and a job "
           "scheduler restarting the failed job",
    keys=(Key("point", "choice", "where in the batch the exception comes", default=AFTER_WRITE,
              choices=(BEFORE_WRITE, AFTER_WRITE), cover=(BEFORE_WRITE, AFTER_WRITE)),
          Key("times", "integer", "how many batches fail, one driver each", default=1, ge=1),
          Key("downtime", "duration", "how long the failed job stays down before it is started again",
              default="3s", draw="short")),
    targets=("driver",), default_target="driver", restarts=True, kills_driver=True, needs_commit_gate=True,
    recovery_keys=("downtime_s", "first_batch_after_s", "batches_reexecuted", "events_reread"))
