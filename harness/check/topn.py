"""The oracle of `sliding_top_n`: the exact counts of the windows oracle, ranked.

The counts per (window, key) are those of `tumbling_count` (late rows dropped with the
previous batch's watermark); each window's keys are ranked by (count, key) descending
and the first N kept. The second aggregation drops nothing: a window's counts reach it
in the batch whose watermark finalises them. Windows a control event falls in are the
harness's own and are set aside on both sides.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.check import rows
from harness.check.batch_reads import assign_batches, last_watermark, late_watermarks
from harness.check.checkpoint import Batch
from harness.check.result import CheckResult
from harness.check.windows import assign_windows

SPAN = ["window_start_ms", "window_end_ms"]
KEY = [*SPAN, "rank"]


def ranking(truth: pd.DataFrame, batches: list[Batch], params: dict):
    """(every window's top N rows, late (event, window) pairs, Spark's count of late groups)."""
    recs = truth.assign(batch=assign_batches(truth, batches))
    pairs = assign_windows(recs[recs["batch"] >= 0], params["window_ms"], params["slide_ms"])
    marks = late_watermarks(batches)
    late = pairs["window_end_ms"].to_numpy() <= pairs["batch"].map(marks).to_numpy()
    kept = pairs[~late]
    counts = kept.groupby([*SPAN, "key"], sort=False).size().rename("count").reset_index()
    counts = counts.sort_values([*SPAN, "count", "key"], ascending=[True, True, False, False], kind="stable")
    counts["rank"] = counts.groupby(SPAN, sort=False).cumcount() + 1
    top = counts[counts["rank"] <= params["n"]]
    spark_dropped = len(pairs[late].drop_duplicates(["batch", "key", *SPAN]))
    return top, pairs[late], spark_dropped


def check(truth: pd.DataFrame, sink: pd.DataFrame, batches: list[Batch], params: dict) -> CheckResult:
    top, late, spark_dropped = ranking(truth, batches, params)
    control = assign_windows(truth[truth["control"]], params["window_ms"], params["slide_ms"])
    own = pd.MultiIndex.from_frame(control[SPAN].drop_duplicates())
    theirs = ~pd.MultiIndex.from_frame(top[SPAN]).isin(own) if len(top) else np.ones(0, bool)
    top = top[theirs]
    mine = pd.MultiIndex.from_frame(sink[SPAN]).isin(own) if len(sink) else np.zeros(0, bool)
    sink = sink[~mine]
    emitted = pd.MultiIndex.from_frame(top[SPAN]).isin(pd.MultiIndex.from_frame(sink[SPAN])) \
        if len(sink) and len(top) else np.zeros(len(top), bool)
    still_open = (top["window_end_ms"].to_numpy() > last_watermark(batches)) & ~emitted
    expected = top[~still_open][["window_start_ms", "window_end_ms", "rank", "key", "count"]]
    produced = int((~truth["control"]).sum())
    dropped = int(late.loc[~late["control"], "event_id"].nunique())
    result = rows.check(expected, sink, KEY, produced, dropped, top[still_open], time_col="window_end_ms")
    result.counts["dropped_late_spark"] = spark_dropped
    return result


def final_watermark_ms(max_event_time_ms: int, params: dict) -> int:
    window_ms, slide_ms = params["window_ms"], params["slide_ms"]
    return max_event_time_ms - max_event_time_ms % slide_ms + window_ms
