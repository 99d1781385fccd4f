"""What the batch oracle runs the job on: exactly the records the stream read, and which of them
Spark was entitled to drop as late.

    Input.of(truth, batches, plan) -> Input

Read: every record in the offset range of a committed batch (checkpoint.py's batches, the
journal's purged ones included), each once however often a batch run again read it; a
record only a batch that never committed read was never part of any output. As Spark's
own Kafka batch reader takes them: `ranges`, [partition, from, until) per run of offsets.

Late: a record whose event time is at or below the watermark its batch filtered late rows
with (the previous batch's, batch_reads.late_watermarks: Spark 3.4's rule) may have been dropped
by a stateful operator. Whether it was depends on the operator (the plan: job.plan_facts):
  none        no record is late, or the query keeps no state (nothing drops a record):
              the comparison is whole, over every record read
  exact       every stateful operator drops a late record whole and only then: a
              dedupe (dropDuplicates, dropDuplicatesWithinWatermark) on the event-time
              watermark; the batch runs without the late records, and the comparison is whole
  partial     any other (windows, whose fate depends on the window's end; sessions, which a
              late record can merge; state with event-time timeouts; joins): the batch runs
              with and without the late records, and only outputs no late record could touch
              are compared (batch_oracle.untouched), the rest counted as left out
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.check.batch_reads import assign_batches, late_watermarks
from harness.check.checkpoint import Batch

WHOLE, EXACT, PARTIAL = "whole", "exact", "partial"
DROPS_WHOLE_RECORDS = {"dedupe", "dedupeWithinWatermark"}
NO_TIMEOUT_KEEPS = {"flatMapGroupsWithState", "applyInPandasWithState"}   # never_drop


@dataclass(frozen=True)
class Input:
    read: pd.DataFrame                    # the records read: truth's rows with `batch`
    late: np.ndarray                      # bool per row of `read`: at or below its batch's late watermark
    ranges: list[tuple[int, int, int]]    # (partition, from, until) covering `read`
    mode: str                             # WHOLE, EXACT or PARTIAL
    why: str                              # the mode in a sentence, for the verdict

    @classmethod
    def of(cls, truth: pd.DataFrame, batches: list[Batch], plan: dict | None) -> Input:
        batch = assign_batches(truth, batches).to_numpy()
        read = truth[batch >= 0].assign(batch=batch[batch >= 0])
        read = read.drop_duplicates(["partition", "offset"])
        marks = late_watermarks(batches)
        mark = read["batch"].map(marks).to_numpy(dtype=np.int64)
        late = read["event_time_ms"].to_numpy(dtype=np.int64) <= mark
        mode, why = decide(int(late.sum()), plan)
        return cls(read.reset_index(drop=True), late, ranges(read), mode, why)

    @property
    def late_records(self) -> pd.DataFrame:
        return self.read[self.late]

    @property
    def flush_records(self) -> pd.DataFrame:
        """The harness's end-of-run flush (its control records after the workload's: ids from the
        workload's count on; the warm-up's are negative and count as the job's input)."""
        if "control" not in self.read:
            return self.read.iloc[:0]
        return self.read[self.read["control"].to_numpy(bool) & (self.read["event_id"].to_numpy() >= 0)]


def decide(late: int, plan: dict | None) -> tuple[str, str]:
    """The comparison's mode for `late` late records and the query's plan facts."""
    operators = set((plan or {}).get("operators") or [])
    if not late:
        return WHOLE, "no record came later than its batch's watermark: the comparison is whole"
    if plan is not None and not operators:
        return WHOLE, (f"{late:,} records came later than their batch's watermark, but the query keeps no "
                       "state, so nothing dropped them: the comparison is whole")
    keep = never_drop(plan)
    if keep and operators <= keep:
        names = ", ".join(sorted(keep))
        return WHOLE, (f"{late:,} records came later than their batch's watermark, but {names} without "
                       "an event-time timeout drops no record: the comparison is whole")
    if operators and operators <= DROPS_WHOLE_RECORDS:
        names = ", ".join(sorted(operators))
        return EXACT, (f"{late:,} records came later than their batch's watermark; {names} "
                       "drops each of them, and the batch ran without them: the comparison is whole")
    known = ", ".join(sorted(operators)) or "an unknown plan"
    return PARTIAL, (f"{late:,} records came later than their batch's watermark, and their fate in "
                     f"{known} depends on the operator's state")


def never_drop(plan: dict | None) -> set[str]:
    """The plan's operators that drop no late record: flatMapGroupsWithState and
    applyInPandasWithState filter late rows only with EventTimeTimeout (Spark's
    FlatMapGroupsWithStateExec: "if timeout is based on event time, then filter late data
    based on watermark"), so with any other timeout every record reaches the function."""
    ops = (plan or {}).get("stateful") or []
    by_name: dict[str, set[str]] = {}
    for op in ops:
        by_name.setdefault(op["operator"], set()).add(op.get("timeout", "EventTimeTimeout"))
    return {name for name, timeouts in by_name.items()
            if name in NO_TIMEOUT_KEEPS and "EventTimeTimeout" not in timeouts}


def ranges(read: pd.DataFrame) -> list[tuple[int, int, int]]:
    """Runs of consecutive offsets per partition, as (partition, from, until)."""
    out: list[tuple[int, int, int]] = []
    for partition, offsets in read.groupby("partition")["offset"]:
        values = np.sort(offsets.to_numpy(dtype=np.int64))
        breaks = np.flatnonzero(np.diff(values) != 1) + 1
        for run in np.split(values, breaks):
            out.append((int(partition), int(run[0]), int(run[-1]) + 1))
    return out
