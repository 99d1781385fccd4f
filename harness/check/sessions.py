"""The oracle of `session_count`: Spark's session windows mirrored batch by batch.

Spark 4.2's rules (SessionWindowStateStoreRestoreExec, MergingSessionsExec,
SessionWindowStateStoreSaveExec), applied to the events each committed batch read:
  - each event starts a session [t, t + gap);
  - it is dropped as late when t + gap <= the previous batch's watermark (before any merge);
  - the survivors merge with the stored sessions of their key, sorted by start: a session
    starting at or before the current one's end joins it (touching sessions merge);
  - at the end of the batch every stored session ending at or before the batch's own
    watermark is emitted and forgotten.
Spark counts a dropped row per (input partition, key, t): rows are partially aggregated
by (key, session) within each partition before the late filter.
A fresh checkpoint (an at-most-once restart) starts with no stored sessions.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.check import rows
from harness.check.batch_reads import assign_batches, last_watermark, late_watermarks
from harness.check.checkpoint import Batch
from harness.check.result import CheckResult
from workloads.wire import CONTROL_KEY

KEY = ["key", "session_start_ms", "session_end_ms"]
_STATE = ["key", "session_start_ms", "session_end_ms", "count", "sum_amount"]
_INTS = {c: "int64" for c in _STATE[1:]}


def _no_sessions() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object if c == "key" else "int64") for c in _STATE})


def merge(sessions: pd.DataFrame) -> pd.DataFrame:
    """Merge overlapping or touching sessions of each key."""
    if sessions.empty:
        return sessions[_STATE]
    s = sessions.astype(_INTS).sort_values(["key", "session_start_ms"], kind="stable", ignore_index=True)
    reach = s.groupby("key", sort=False)["session_end_ms"].cummax()
    before = reach.groupby(s["key"], sort=False).shift(1)
    starts = before.isna().to_numpy() | (s["session_start_ms"].to_numpy() > before.fillna(0).to_numpy())
    s["sid"] = np.cumsum(starts)
    return (s.groupby("sid", sort=False)
            .agg(key=("key", "first"), session_start_ms=("session_start_ms", "min"),
                 session_end_ms=("session_end_ms", "max"), count=("count", "sum"),
                 sum_amount=("sum_amount", "sum"))
            .reset_index(drop=True)[_STATE])


def _steps(events: pd.DataFrame, batches: list[Batch], gap_ms: int):
    """Per committed batch, by the rules above: (the batch, the events it dropped as late,
    Spark's count of late rows in it, the sessions it emitted, the sessions stored after it)."""
    late_mark = late_watermarks(batches)
    by_batch = dict(tuple(events[events["batch"] >= 0].groupby("batch", sort=False)))
    state, query = _no_sessions(), None
    for batch in batches:
        if not batch.committed:
            continue
        if batch.query != query:
            state, query = _no_sessions(), batch.query
        read = by_batch.get(batch.batch_id)
        late_rows, dropped = events.iloc[:0], 0
        if read is not None:
            late = read["event_time_ms"].to_numpy() + gap_ms <= late_mark[batch.batch_id]
            late_rows = read[late]
            dropped = len(late_rows.drop_duplicates(["partition", "key", "event_time_ms"]))
            kept = read[~late]
            new = pd.DataFrame({"key": kept["key"].to_numpy(),
                                "session_start_ms": kept["event_time_ms"].to_numpy(),
                                "session_end_ms": kept["event_time_ms"].to_numpy() + gap_ms,
                                "count": 1, "sum_amount": kept["amount"].to_numpy()})
            state = merge(pd.concat([state, new], ignore_index=True)) if len(new) else state
        done = state["session_end_ms"].to_numpy() <= batch.watermark_ms
        emitted = state[done].assign(batch=batch.batch_id)
        state = state[~done]
        yield batch, late_rows, dropped, emitted, state


def _events(truth: pd.DataFrame, batches: list[Batch]) -> pd.DataFrame:
    events = truth[["key", "event_time_ms", "amount", "partition", "offset"]].copy()
    events["batch"] = assign_batches(events, batches)
    return events


def mirror(truth: pd.DataFrame, batches: list[Batch], gap_ms: int):
    """(emitted sessions with the batch that emitted them, sessions still stored at the end,
    late events, Spark's count of late rows, events read by each batch)."""
    events = _events(truth, batches)
    state = _no_sessions()
    emitted, late_parts = [], []
    spark_dropped = 0
    for _batch, late_rows, dropped, out, after in _steps(events, batches, gap_ms):
        late_parts.append(late_rows)
        spark_dropped += dropped
        if len(out):
            emitted.append(out)
        state = after
    late = pd.concat(late_parts, ignore_index=True) if late_parts else events.iloc[:0]
    none = _no_sessions().assign(batch=pd.Series(dtype="int64"))
    out = pd.concat(emitted, ignore_index=True) if emitted else none
    return out, state, late, spark_dropped


def state_after(truth: pd.DataFrame, batches: list[Batch], gap_ms: int, batch_id: int) -> pd.DataFrame:
    """The sessions Spark's state holds after committed batch `batch_id`, by the same rules:
    per (key, session_start_ms), its session_end_ms, count and sum_amount, for the sessions the
    batches up to it opened or merged and its watermark has not closed (SessionWindowStateStoreSaveExec
    emits and evicts a session once its end is at or before the batch's watermark). The
    harness's control events are in it too: the query reads them."""
    for batch, _late, _dropped, _out, state in _steps(_events(truth, batches), batches, gap_ms):
        if batch.batch_id == batch_id:
            return state.reset_index(drop=True).astype(_INTS)
    return _no_sessions()


def check(truth: pd.DataFrame, sink: pd.DataFrame, batches: list[Batch], params: dict) -> CheckResult:
    emitted, stored, late, spark_dropped = mirror(truth, batches, params["gap_ms"])
    ours = emitted["key"] == CONTROL_KEY
    own = pd.MultiIndex.from_frame(emitted.loc[ours, KEY].astype({"session_start_ms": "int64",
                                                                   "session_end_ms": "int64"}))
    mine = (pd.MultiIndex.from_frame(sink[KEY]).isin(own) if len(sink) and len(own)
            else np.zeros(len(sink), bool))
    expected = emitted[~ours].drop(columns="batch").astype({"count": "int64", "sum_amount": "int64"})
    open_rows = stored[stored["key"] != CONTROL_KEY]
    # the last query's stored sessions are open only if its watermark never passed them
    open_rows = open_rows[open_rows["session_end_ms"] > last_watermark(batches)]
    produced = int((~truth["control"]).sum())
    dropped = int((late["key"] != CONTROL_KEY).sum())
    result = rows.check(expected, sink[~mine], KEY, produced, dropped, open_rows, time_col="session_end_ms")
    result.counts["dropped_late_spark"] = spark_dropped
    return result


def final_watermark_ms(max_event_time_ms: int, params: dict) -> int:
    """Every session holding an event up to max_event_time_ms ends by then + gap."""
    return max_event_time_ms + params["gap_ms"]
