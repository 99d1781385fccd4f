"""Tumbling (or sliding) window count and sum per key, with a watermark.

Output rows are final (append mode): one per (key, window) once the watermark has
passed the window's end.
"""

from __future__ import annotations

NAME = "tumbling_count"
PARAMS = ("window", "slide", "watermark")
COLUMNS = {"key": "STRING", "window_start_ms": "LONG", "window_end_ms": "LONG", "count": "LONG",
           "sum_amount": "LONG"}


def build(events, params: dict):
    """The windowed aggregation over `window_ms` windows every `slide_ms`, late rows dropped
    behind a `watermark_ms` watermark; columns as COLUMNS."""
    from pyspark.sql import functions as F

    window_ms, slide_ms = params["window_ms"], params["slide_ms"]
    windowed = (
        events.withWatermark("event_time", f"{params['watermark_ms']} milliseconds")
        .groupBy(F.window("event_time", f"{window_ms} milliseconds", f"{slide_ms} milliseconds"),
                 F.col("key"))
        .agg(F.count(F.lit(1)).alias("count"), F.sum("amount").alias("sum_amount"))
    )
    return windowed.select(
        "key",
        F.unix_millis(F.col("window.start")).alias("window_start_ms"),
        F.unix_millis(F.col("window.end")).alias("window_end_ms"),
        "count",
        "sum_amount",
    )
