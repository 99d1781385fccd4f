"""The oracle of `failed_logins`: its processor's rule mirrored batch by batch.

Spark 4.2 drops a row as late before the processor sees it when its event time <= the
previous batch's watermark (transformWithState in EventTime mode), and counts it in
numRowsDroppedByWatermark. The survivors of each committed batch, per user, go through
the same scan as the processor (workloads.pipelines.failed_logins.alerts), with the
failures kept from earlier batches. Forgetting a failure at its time + `within` changes
no output (a failure that is not late cannot join it), so the mirror keeps them all.
A fresh checkpoint (an at-most-once restart) starts with nothing kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from harness.check import rows
from harness.check.batch_reads import by_batch, committed_in_order, late_watermarks
from harness.check.checkpoint import Batch
from harness.check.result import CheckResult
from workloads.pipelines.failed_logins import COLUMNS, FAILED, alerts

KEY = ["user_id", "alert_seq"]


@dataclass
class Kept:
    """What the mirror holds after a batch: per user, the failures not consumed by an alert
    (the processor's list state before its timers forget them), every failure's first copy
    (event_id -> (user, event time): its map state before forgetting), and the alerts raised."""

    pending: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    seen: dict[int, tuple[int, int]] = field(default_factory=dict)
    raised: dict[int, int] = field(default_factory=dict)


def mirror(truth: pd.DataFrame, batches: list[Batch], attempts: int, within_ms: int,
           until: int | None = None):
    """(the alerts, with the batch that raised them; the late failures; what the mirror held after
    batch `until`, or after the last committed batch)."""
    fails = truth[(truth["event_type"] == FAILED) & ~truth["control"]]
    late_mark = late_watermarks(batches)
    read_by = by_batch(fails, batches)
    held = Kept()
    out, late_parts = [], []
    for batch, fresh in committed_in_order(batches, until):
        if fresh:
            held = Kept()
        read = read_by.get(batch.batch_id)
        if read is None:
            continue
        late = read["event_time_ms"].to_numpy() <= late_mark[batch.batch_id]
        late_parts.append(read[late])
        for user, group in read[~late].groupby("user", sort=False):
            new = []
            for t, event_id in zip(group["event_time_ms"], group["event_id"], strict=True):
                if event_id not in held.seen:
                    held.seen[int(event_id)] = (int(user), int(t))
                    new.append((int(t), int(event_id)))
            kept = held.pending.get(int(user), [])
            found, held.pending[int(user)] = alerts(kept + new, attempts, within_ms)
            for first, last, n in found:
                held.raised[int(user)] = held.raised.get(int(user), 0) + 1
                out.append((int(user), held.raised[int(user)], first, last, n, batch.batch_id))
    emitted = pd.DataFrame(out, columns=[*COLUMNS, "batch"]).astype({c: "int64" for c in COLUMNS})
    late = pd.concat(late_parts, ignore_index=True) if late_parts else fails.iloc[:0]
    return emitted, late, held


def state_after(truth: pd.DataFrame, batches: list[Batch], attempts: int, within_ms: int,
                batch: int) -> dict[str, pd.DataFrame]:
    """The processor's state after `batch` (the state check's model; harness/check/state_check.py),
    one frame per state variable as the state data source flattens it, with `copies` where a
    variable's rows are a multiset:

      pending            user_id, event_time_ms, event_id, copies   (the list state)
      seen               user_id, event_id, event_time_ms           (the map state)
      raised             user_id, n                                  (the value state)
      registered-timers  user_id, expiration_timestamp_ms, copies

    By the mirror's rules, each accepted failure at t registered a timer at t + within; Spark
    fires, in batch N, the timers at or below N's eviction watermark W (after the batch's input:
    a timer at exactly W fired in run 20261129T070119-timer-faults-b8a6's batch 5), and a
    firing forgets the failures at or before its time - within: so after N the timers, the map
    and the list hold exactly the failures with t + within > W (the highest watermark the
    query had reached by N)."""
    held = mirror(truth, batches, attempts, within_ms, until=batch)[2]
    ran = [b for b in batches if b.committed and b.batch_id <= batch]
    query = next((b.query for b in batches if b.batch_id == batch), None)
    marks = [b.watermark_ms for b in ran if b.query == query]
    w = max(marks) if marks else -1
    pending = [(u, t, i) for u, kept in held.pending.items() for t, i in kept if t + within_ms > w]
    seen = [(u, i, t) for i, (u, t) in held.seen.items() if t + within_ms > w]
    timers = {(u, t + within_ms) for u, i, t in seen}

    def frame(rows, columns):
        return pd.DataFrame(rows, columns=columns).astype("int64")

    counted = frame(pending, ["user_id", "event_time_ms", "event_id"])
    return {"pending": counted.groupby(["user_id", "event_time_ms", "event_id"]).size()
            .rename("copies").reset_index(),
            "seen": frame(seen, ["user_id", "event_id", "event_time_ms"]),
            "raised": frame(sorted(held.raised.items()), ["user_id", "n"]),
            "registered-timers": frame(sorted(timers), ["user_id", "expiration_timestamp_ms"])
            .assign(copies=1)}


def check(truth: pd.DataFrame, sink: pd.DataFrame, batches: list[Batch], params: dict) -> CheckResult:
    emitted, late, _ = mirror(truth, batches, params["attempts"], params["within_ms"])
    produced = int((~truth["control"]).sum())
    dropped = int(late["event_id"].nunique())
    result = rows.check(emitted.drop(columns="batch"), sink, KEY, produced, dropped,
                        time_col="last_failure_ms")
    result.counts["dropped_late_spark"] = int(len(late))
    return result


def final_watermark_ms(max_event_time_ms: int, params: dict) -> int:
    """Alerts leave as their last failure arrives; the last timers fire by then + within."""
    return max_event_time_ms + params["within_ms"]

