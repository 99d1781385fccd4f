"""Each user's running count of events, that starts again after the user has been quiet for
`ttl` of processing time: `transformWithState` with a state TTL (issue 49, part 2).

Per user, in each batch, the events (in event_id order) are numbered on from the user's count,
a value state with a TTL: Spark 4.2 keeps a value `ttl` after its last update, measured by each
batch's timestamp (the offset log's batchTimestampMs, which a batch run again keeps), and a
value whose time has come is gone for the batch's reads and removed by the batch. So a user
quiet for longer than `ttl`, or across a downtime longer than it, is numbered from 1 again; one
that is not keeps counting. Each event comes out once, as (event_id, user_id, n).

Spark takes a state TTL only in processing-time mode (STATEFUL_PROCESSOR_INCORRECT_TIME_MODE_
TO_ASSIGN_TTL in event time), so the query has no watermark and no timer: every event a batch
reads is counted, none is late. transformWithState runs on the RocksDB state store only.
harness/check/streaks.py mirrors the same rule from ground truth and the offset log.
"""

from __future__ import annotations

from workloads.pipelines.params import TTL

NAME = "streak_count"
PARAMS = (TTL,)
COLUMNS = {"event_id": "LONG", "user_id": "LONG", "n": "LONG"}
STATE_STORES = ("rocksdb", "rocksdb-changelog")
COUNT = "count"   # the state variable with the TTL
# in processing-time mode Spark asks for another batch after each one: an available-now query
# runs empty batches and never stops (found on PySpark 4.2: over 1,100 in a minute)
AVAILABLE_NOW_REFUSED = ("its transformWithState runs in processing-time mode (a state TTL takes no other), "
                         "where Spark asks for another batch after each one, so an available-now query "
                         "never stops")


def build(events, params: dict, processor=None):
    """The query; `processor` in place of Streak (a planted one: tests/scenarios/ttl_early.py)."""
    from pyspark.sql import functions as F

    users = events.where(F.col("user").isNotNull()).select(
        F.expr("cast(substring(user, 2) as long)").alias("user_id"), "event_id")
    schema = ", ".join(f"{name} {kind}" for name, kind in COLUMNS.items())
    return users.groupBy("user_id").transformWithState(
        processor or Streak(params["ttl_ms"]), outputStructType=schema, outputMode="Append",
        timeMode="ProcessingTime")


def _processor_base():
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    return StatefulProcessor


class Streak(_processor_base()):  # type: ignore[misc]
    def __init__(self, ttl_ms: int):
        self.ttl_ms = ttl_ms

    def init(self, handle) -> None:
        self.count = handle.getValueState(COUNT, "n LONG", self.ttl_ms)

    def handleInputRows(self, key, rows, timerValues):
        from pyspark.sql import Row

        n = self.count.get()[0] if self.count.exists() else 0
        for event_id in sorted(row.event_id for row in rows):
            n += 1
            yield Row(event_id=event_id, user_id=key[0], n=n)
        self.count.update((n,))

    def close(self) -> None:
        pass
