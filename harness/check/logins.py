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

import pandas as pd

from harness.check import rows
from harness.check.batch_reads import assign_batches, late_watermarks
from harness.check.checkpoint import Batch
from harness.check.result import CheckResult
from workloads.pipelines.failed_logins import COLUMNS, FAILED, alerts

KEY = ["user_id", "alert_seq"]


def mirror(truth: pd.DataFrame, batches: list[Batch], attempts: int, within_ms: int):
    """(the alerts, with the batch that raised them; the late failures)."""
    fails = truth[(truth["event_type"] == FAILED) & ~truth["control"]]
    fails = fails.assign(batch=assign_batches(fails, batches))
    late_mark = late_watermarks(batches)
    by_batch = dict(tuple(fails[fails["batch"] >= 0].groupby("batch", sort=False)))
    kept: dict[int, list[tuple[int, int]]] = {}
    seen: set[int] = set()
    raised: dict[int, int] = {}
    out, late_parts, query = [], [], None
    for batch in batches:
        if not batch.committed:
            continue
        if batch.query != query:
            kept, seen, raised, query = {}, set(), {}, batch.query
        read = by_batch.get(batch.batch_id)
        if read is None:
            continue
        late = read["event_time_ms"].to_numpy() <= late_mark[batch.batch_id]
        late_parts.append(read[late])
        for user, group in read[~late].groupby("user", sort=False):
            new = []
            for t, event_id in zip(group["event_time_ms"], group["event_id"], strict=True):
                if event_id not in seen:
                    seen.add(event_id)
                    new.append((int(t), int(event_id)))
            found, kept[user] = alerts(kept.get(user, []) + new, attempts, within_ms)
            for first, last, n in found:
                raised[user] = raised.get(user, 0) + 1
                out.append((int(user), raised[user], first, last, n, batch.batch_id))
    emitted = pd.DataFrame(out, columns=[*COLUMNS, "batch"]).astype({c: "int64" for c in COLUMNS})
    late = pd.concat(late_parts, ignore_index=True) if late_parts else fails.iloc[:0]
    return emitted, late


def check(truth: pd.DataFrame, sink: pd.DataFrame, batches: list[Batch], params: dict) -> CheckResult:
    emitted, late = mirror(truth, batches, params["attempts"], params["within_ms"])
    produced = int((~truth["control"]).sum())
    dropped = int(late["event_id"].nunique())
    result = rows.check(emitted.drop(columns="batch"), sink, KEY, produced, dropped,
                        time_col="last_failure_ms")
    result.counts["dropped_late_spark"] = int(len(late))
    return result


def final_watermark_ms(max_event_time_ms: int, params: dict) -> int:
    """Alerts leave as their last failure arrives; the last timers fire by then + within."""
    return max_event_time_ms + params["within_ms"]

