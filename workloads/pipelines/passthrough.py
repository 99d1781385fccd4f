"""Parse, filter and enrich: the stateless ETL step, one output row per kept event.

Kept: events with an amount of at least MIN_AMOUNT (so the harness's control events,
amount 0, never reach the sink). Enriched with the amount's tier and Kafka's partition
and offset. Every row carries `event_id`, so the checker accounts for every event one
by one (lost, duplicated, unexpected).
"""

from __future__ import annotations

NAME = "passthrough"
PARAMS = ()
STATELESS = True     # no state: Spark's real-time mode can run it
COLUMNS = {"event_id": "LONG", "key": "STRING", "event_time_ms": "LONG", "amount": "LONG",
           "tier": "STRING", "partition": "INT", "offset": "LONG"}
MIN_AMOUNT = 10      # the filter: an event with a smaller amount is not passed on
HIGH_AMOUNT = 50     # the enrichment: tier "high" from this amount up, else "low"


def build(events, params: dict):
    from pyspark.sql import functions as F

    return (events.where(F.col("amount") >= MIN_AMOUNT)
            .withColumn("tier", F.when(F.col("amount") >= HIGH_AMOUNT, "high").otherwise("low"))
            .select(*COLUMNS))
