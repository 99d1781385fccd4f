"""Session windows per key: count and sum of the events of each session, a session
closing after `gap` without an event of its key (Spark's `session_window`).

Output rows are final (append mode): one per (key, session) once the watermark has
passed the session's end (its last event's time + gap).
"""

from __future__ import annotations

from workloads.pipelines.params import GAP, WATERMARK

NAME = "session_count"
PARAMS = (GAP, WATERMARK)
COLUMNS = {"key": "STRING", "session_start_ms": "LONG", "session_end_ms": "LONG", "count": "LONG",
           "sum_amount": "LONG"}


def build(events, params: dict):
    from pyspark.sql import functions as F

    sessions = (
        events.withWatermark("event_time", f"{params['watermark_ms']} milliseconds")
        .groupBy(F.session_window("event_time", f"{params['gap_ms']} milliseconds"), F.col("key"))
        .agg(F.count(F.lit(1)).alias("count"), F.sum("amount").alias("sum_amount"))
    )
    return sessions.select(
        "key",
        F.unix_millis(F.col("session_window.start")).alias("session_start_ms"),
        F.unix_millis(F.col("session_window.end")).alias("session_end_ms"),
        "count",
        "sum_amount",
    )
