"""The N hottest keys of every sliding window: the seeds' hot-items example.

Two chained aggregations in append mode: the count per (window, key) behind the
watermark, then, per window, the N largest (count, key) pairs (ties: the larger key
first), one output row per rank. A window's ranking comes out in the batch that
finalises its counts.
"""

from __future__ import annotations

from workloads.pipelines.params import SLIDE, WATERMARK, WINDOW, N
from workloads.pipelines.tumbling_count import check_params, windowed_counts

NAME = "sliding_top_n"
PARAMS = (WINDOW, SLIDE, WATERMARK, N)
COLUMNS = {"window_start_ms": "LONG", "window_end_ms": "LONG", "rank": "INT", "key": "STRING",
           "count": "LONG"}
__all__ = ["NAME", "PARAMS", "COLUMNS", "build", "check_params"]


def build(events, params: dict):
    from pyspark.sql import functions as F

    counts = windowed_counts(events, params)
    largest = F.sort_array(F.collect_list(F.struct("count", "key")), asc=False)
    ranked = counts.groupBy("window").agg(F.slice(largest, 1, params["n"]).alias("top"))
    return ranked.select(
        F.unix_millis(F.col("window.start")).alias("window_start_ms"),
        F.unix_millis(F.col("window.end")).alias("window_end_ms"),
        F.posexplode("top").alias("pos", "entry"),
    ).select("window_start_ms", "window_end_ms", (F.col("pos") + 1).cast("int").alias("rank"),
             F.col("entry.key").alias("key"), F.col("entry.count").alias("count"))
