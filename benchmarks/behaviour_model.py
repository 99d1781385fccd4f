"""A model of the behaviours a fault plan produces, for findability without services.

The hunt's feedback (harness/hunt/feedback.py) keeps the plans whose runs showed a behaviour not
seen before (harness/hunt/behaviour.py: the fault's choice, what Spark did next, what the sink
saw). benchmarks/findability.py measures how soon each strategy reaches a known bug from the
plans alone, with no run: for that it needs what a run of each plan would have shown. This
module is that stand-in, built from the mechanisms the gallery (examples/known-bugs/) and the
two-fault fixture (tests/scenarios/two_faults.toml) were shown to have in real runs. It is a
model: the feedback curves measured on it are as good as it is, no better.

What Spark did next, per fault (every fault lands):

  a batch run again: kill-driver before or after the write or with no point, replay-batch,
      fail-batch, disk-full, io-error on the whole checkpoint: "re-ran a batch with the same
      offsets" (the driver restarts, the offset log holds the batch, the commit log does not)
  kill-driver after the commit: nothing run again (the next batch is planned afresh)
  io-error on the offsets log alone: "re-planned a batch" (spark-56720: a commit without its
      offsets, the batch planned again over other offsets)
  a restart of a stateful query (tumbling_count: the sink entries, spark-38033): "reloaded a
      state version" as well
  fail-task, kill-executor: "retried a task"
  kafka-partitions: "found a new partition"
  kafka-retention under failOnDataLoss, lose-unsynced (spark-38033's torn log): "refused to
      start"; kafka-retention without it (spark-25214's scenario): nothing (Spark skips them)
  every other kind (pause, delay-commit, restart-broker, the clocks, hide-commit): nothing

What the sink saw, per fault: after a batch run again after its write (replay-batch,
kill-driver or fail-batch after the write), "a batch id again" when the sink skips a batch id
it has (the fixture's sink, the fixed sinks) and "the same rows again" when it appends it again
(the gallery's four buggy sinks, and the fixture's once partitions were added before: the bug);
nothing otherwise. After a fault Spark refuses to go on for, no later fault of the plan lands
(the query is gone). A Python worker's memory counted twice shows in values, not in the rows'
identity: its sink sees nothing either.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.hunt.behaviour import (
    BATCH_AGAIN,
    NEW_PARTITION,
    NOTHING,
    REFUSED,
    RELOADED,
    REPLANNED,
    RERAN,
    RETRIED,
    ROWS_AGAIN,
    Behaviour,
)
from harness.hunt.plan import Choice

AFTER_WRITE = {("replay-batch", None), ("kill-driver", "after-write"), ("fail-batch", "after-write")}
RUN_AGAIN = {("kill-driver", None), ("kill-driver", "before-write"), ("fail-batch", "before-write"),
             ("disk-full", None), ("io-error", None)} | AFTER_WRITE


@dataclass(frozen=True)
class Mechanism:
    """What a target's job does with a batch run again: its sink appends it again (`appends`),
    or only after partitions were added (`appends_after_partitions`: the fixture's guard), else
    skips its batch id; whether its query keeps state that a restart reloads; and whether
    Spark fails the query over offsets deleted before it read them (failOnDataLoss)."""

    appends: bool = False
    appends_after_partitions: bool = False
    stateful: bool = False
    fail_on_data_loss: bool = True


def spark_did(c: Choice, m: Mechanism) -> set[str]:
    """What Spark did after a fault of choice `c` (the module's table)."""
    key = (c.kind, c.value)
    if c.kind == "io-error" and c.value == "^/offsets/":
        did = {REPLANNED}
    elif key in RUN_AGAIN:
        did = {RERAN}
    elif c.kind in ("fail-task", "kill-executor"):
        did = {RETRIED}
    elif c.kind == "kafka-partitions":
        did = {NEW_PARTITION}
    elif c.kind == "lose-unsynced" or (c.kind == "kafka-retention" and m.fail_on_data_loss):
        did = {REFUSED}
    else:
        did = set()
    if m.stateful and (key in RUN_AGAIN or c.kind in ("kill-driver", "replay-batch", "fail-batch")):
        did.add(RELOADED)
    return did or {NOTHING}


def sink_saw(plan: list[Choice], i: int, m: Mechanism) -> str:
    """What the sink saw after fault `i` of the plan."""
    c = plan[i]
    if (c.kind, c.value) not in AFTER_WRITE:
        return NOTHING
    partitions_before = any(p.kind == "kafka-partitions" for p in plan[:i])
    appends = m.appends or (m.appends_after_partitions and partitions_before)
    return ROWS_AGAIN if appends else BATCH_AGAIN


def lands(plan: list[Choice], m: Mechanism) -> list[bool]:
    """Which of the plan's faults land: each up to the first after which Spark refuses to go on
    (the query is stopped for good: a later fault has none to act on, as a real run showed)."""
    out, stopped = [], False
    for c in plan:
        out.append(not stopped)
        stopped = stopped or REFUSED in spark_did(c, m)
    return out


def behaviours(plan: list[Choice], m: Mechanism) -> set[Behaviour]:
    """The behaviours a run of `plan` (its choices in order) shows, in this model: its faults
    that land."""
    landed = lands(plan, m)
    return {Behaviour(c.label, s, sink_saw(plan, i, m)) for i, c in enumerate(plan) if landed[i]
            for s in spark_did(c, m)}
