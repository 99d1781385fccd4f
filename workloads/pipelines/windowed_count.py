"""Tumbling (or sliding) window count and sum per key, with a watermark.

Output rows are final (append mode): one per (key, window) once the watermark has
passed the window's end.
"""

from __future__ import annotations

EVENT_SCHEMA = "event_id LONG, key STRING, event_time_ms LONG, amount LONG"


def parse_events(kafka_df):
    """Kafka records (JSON values) -> typed events with an `event_time` timestamp column."""
    from pyspark.sql import functions as F

    events = kafka_df.select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
    return events.select("e.*").withColumn("event_time", F.timestamp_millis("event_time_ms"))


def build(events, window_ms: int, slide_ms: int, watermark_ms: int):
    """The windowed aggregation; columns key, window_start_ms, window_end_ms, count, sum_amount."""
    from pyspark.sql import functions as F

    windowed = (
        events.withWatermark("event_time", f"{watermark_ms} milliseconds")
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
