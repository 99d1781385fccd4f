"""Deduplication on `event_id` within the watermark (`dropDuplicatesWithinWatermark`).

The generator's `workload.duplicates.share` re-sends events (same id, same event time)
a little later, as a producer retry would; each event must come out once. Output rows
are emitted in the batch that first reads an event.
"""

from __future__ import annotations

from workloads.pipelines.params import WATERMARK

NAME = "dedup"
PARAMS = (WATERMARK,)
COLUMNS = {"event_id": "LONG", "key": "STRING", "event_time_ms": "LONG", "amount": "LONG"}


def build(events, params: dict):
    return (events.withWatermark("event_time", f"{params['watermark_ms']} milliseconds")
            .dropDuplicatesWithinWatermark(["event_id"])
            .select(*COLUMNS))
