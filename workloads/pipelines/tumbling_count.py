"""Tumbling (or sliding) window count and sum per key, with a watermark.

Output rows are final (append mode): one per (key, window) once the watermark has
passed the window's end.
"""

from __future__ import annotations

from workloads.errors import SpecError
from workloads.pipelines.params import SLIDE, WATERMARK, WINDOW, show_ms

NAME = "tumbling_count"
PARAMS = (WINDOW, SLIDE, WATERMARK)
COLUMNS = {"key": "STRING", "window_start_ms": "LONG", "window_end_ms": "LONG", "count": "LONG",
           "sum_amount": "LONG"}


def check_params(params: dict) -> None:
    """A window of whole slides, at least one long."""
    window, slide = params["window_ms"], params["slide_ms"]
    both = f"pipeline.window ({show_ms(window)})", f"pipeline.slide ({show_ms(slide)})"
    if window < slide:
        raise SpecError(f"{both[0]} is shorter than {both[1]}",
                        "make the window at least as long as the slide, or drop slide for tumbling windows")
    if window % slide:
        raise SpecError(f"{both[0]} is not a multiple of {both[1]}",
                        "choose a slide that divides the window, e.g. window 10s with slide 5s")


def windowed_counts(events, params: dict):
    """Count and sum per (window, key) behind the watermark: a `window` struct column, `key`,
    `count`, `sum_amount` (shared with sliding_top_n)."""
    from pyspark.sql import functions as F

    window_ms, slide_ms = params["window_ms"], params["slide_ms"]
    return (
        events.withWatermark("event_time", f"{params['watermark_ms']} milliseconds")
        .groupBy(F.window("event_time", f"{window_ms} milliseconds", f"{slide_ms} milliseconds"),
                 F.col("key"))
        .agg(F.count(F.lit(1)).alias("count"), F.sum("amount").alias("sum_amount"))
    )


def build(events, params: dict):
    """The windowed aggregation over `window_ms` windows every `slide_ms`, late rows dropped
    behind a `watermark_ms` watermark; columns as COLUMNS."""
    from pyspark.sql import functions as F

    return windowed_counts(events, params).select(
        "key",
        F.unix_millis(F.col("window.start")).alias("window_start_ms"),
        F.unix_millis(F.col("window.end")).alias("window_end_ms"),
        "count",
        "sum_amount",
    )
