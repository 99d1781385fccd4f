"""The oracle of `dedup`: Spark's dropDuplicatesWithinWatermark mirrored batch by batch.

Spark 4.2's rules (StreamingDeduplicateWithinWatermarkExec), on the records each
committed batch read:
  - a record is dropped as late when its event time <= the previous batch's watermark
    (counted per record in numRowsDroppedByWatermark);
  - a surviving record whose event_id is not in the state comes out, and its id is kept
    until the watermark reaches its event time + the delay; later copies are dropped.
So each event comes out once unless every copy of it came late.
A fresh checkpoint (an at-most-once restart) starts with an empty state.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.check import events
from harness.check.batch_reads import assign_batches, late_watermarks
from harness.check.checkpoint import Batch
from harness.check.result import CheckResult
from workloads.pipelines import dedup


def mirror(truth: pd.DataFrame, batches: list[Batch], delay_ms: int):
    """(the records that come out, with their batch; the number of late records)."""
    recs = truth.assign(batch=assign_batches(truth, batches))
    out, late_total = [], 0
    for _batch, first, late, _seen in _steps(recs, batches, delay_ms):
        late_total += late
        if first is not None:
            out.append(first)
    emitted = pd.concat(out, ignore_index=True) if out else recs.iloc[:0]
    return emitted, late_total


def state_after(truth: pd.DataFrame, batches: list[Batch], delay_ms: int, batch_id: int) -> pd.DataFrame:
    """The operator's state after committed batch `batch_id`, by the same rules: one row per
    event_id it keeps, with `expiresAtMicros` (the event time plus the delay, in microseconds,
    as Spark stores it; a row leaves once the batch's watermark is at or past it)."""
    recs = truth.assign(batch=assign_batches(truth, batches))
    for batch, _first, _late, seen in _steps(recs, batches, delay_ms):
        if batch.batch_id == batch_id:
            return pd.DataFrame({"event_id": seen.index.to_numpy(dtype=np.int64),
                                 "expiresAtMicros": seen.to_numpy(dtype=np.int64) * 1000})
    return pd.DataFrame({"event_id": pd.Series(dtype=np.int64), "expiresAtMicros": pd.Series(dtype=np.int64)})


def _steps(recs: pd.DataFrame, batches: list[Batch], delay_ms: int):
    """Per committed batch: (the batch, the records it let out or None, how many it dropped as
    late, the state after it: event_id -> expires at, in ms)."""
    late_mark = late_watermarks(batches)
    by_batch = dict(tuple(recs[recs["batch"] >= 0].groupby("batch", sort=False)))
    seen = pd.Series(dtype=np.int64)          # event_id -> expires at (ms)
    query = None
    for batch in batches:
        if not batch.committed:
            continue
        if batch.query != query:
            seen, query = pd.Series(dtype=np.int64), batch.query
        read = by_batch.get(batch.batch_id)
        first, late_count = None, 0
        if read is not None:
            late = read["event_time_ms"].to_numpy() <= late_mark[batch.batch_id]
            late_count = int(late.sum())
            fresh = read[~late & ~read["event_id"].isin(seen.index).to_numpy()]
            first = fresh.drop_duplicates("event_id")
            seen = pd.concat([seen, pd.Series(first["event_time_ms"].to_numpy() + delay_ms,
                                              index=first["event_id"].to_numpy())])
        # Spark (StreamingDeduplicateWithinWatermarkExec) removes an id once the batch's
        # eviction watermark >= its expiry
        seen = seen[seen > batch.watermark_ms]
        yield batch, first, late_count, seen


def check(truth: pd.DataFrame, sink: pd.DataFrame, batches: list[Batch], params: dict) -> CheckResult:
    emitted, spark_late = mirror(truth, batches, params["watermark_ms"])
    control_ids = truth.loc[truth["control"], "event_id"]
    ours = sink["event_id"].isin(control_ids) & sink["event_id"].isin(emitted["event_id"])
    real = truth[~truth["control"]].assign(batch=lambda t: assign_batches(t, batches))
    unique = real["event_id"].nunique()
    # an event no committed batch read (skipped by an at-most-once restart) is expected, and lost
    unread_ids = real.groupby("event_id")["batch"].max()
    unread = real[real["event_id"].isin(unread_ids[unread_ids < 0].index)].drop_duplicates("event_id")
    expected = pd.concat([emitted[~emitted["control"]], unread], ignore_index=True)
    # an event is dropped late when every copy of it that was read came late
    dropped = unique - len(expected)
    values = [c for c in dedup.COLUMNS if c != "event_id"]
    result = events.check(expected, sink[~ours], values, unique, dropped_late=int(dropped),
                          extra_counts={"resent": int(len(real) - unique)})
    result.counts["dropped_late_spark"] = spark_late
    return result


def final_watermark_ms(max_event_time_ms: int, params: dict) -> None:
    """An event comes out in the batch that reads it: final once every offset is read."""
    return None
