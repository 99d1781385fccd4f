"""Sinks with the shape of real, publicly reported sink bugs, and their fixes.

Each buggy sink claims exactly-once, as its authors did; the harness's verdict tests the
claim. They write into PostgreSQL (the harness's own server, ctx.postgres_url) or Delta
Lake, through the same plug-in contract as any user's sink (docs/pipelines-and-sinks.md,
"Your own pipeline and sink"), and read back what a consumer would see.
"""

from __future__ import annotations

import json
import time

from workloads.sinks.delta import DeltaBatchSink
from workloads.sinks.kafka import KafkaTopicSink
from workloads.sinks.postgres import PostgresSink


class _Plain(PostgresSink):
    """A PostgreSQL sink that commits every batch it is given: each batch's rows and a row of
    its batch id in one transaction, never asking whether that batch id is already there."""

    skips_committed = False


class ReplayCommitsTwice(_Plain):
    """apache/paimon#9666: the writer commits a micro-batch, the driver dies before Spark's
    commit log records it, and the replayed micro-batch is committed a second time."""


class ReplaySkipsCommitted(PostgresSink):
    """The fix: the batch id is committed with the rows, and a replay of a committed batch id
    is skipped (PostgresSink's exactly-once mode)."""


class WriteThenFailingStep(_Plain):
    """apache/iceberg#8809: foreachBatch writes the table, then a later step of the same
    batch fails; the job is restarted, and the batch's write runs again. The later step here
    is the harness's fail-batch, after the sink's write."""


class WriteOnceThenStep(PostgresSink):
    """The fix: the table write is keyed by the batch id and skipped when it is already there,
    so re-running the whole batch after a failed later step writes nothing twice."""


class InstantPerCommit(PostgresSink):
    """apache/hudi#6098 (HUDI-4389): the table commit succeeds under a commit time of its own,
    the checkpoint write fails, and the restarted batch commits again under a new commit
    time: nothing ties the table's commit to Spark's batch, so it is not found again."""

    def write_rows(self, rows: list[tuple], batch_id: int) -> None:
        # the commit's identity is the wall clock (in µs), not the batch: a replay is a new commit,
        # so the check for a committed batch never finds it
        super().write_rows(rows, time.time_ns() // 1_000)


class InstantFromBatch(PostgresSink):
    """The fix: the table's commit is identified by Spark's batch id, and a batch id already
    committed is skipped (Hudi's fix records the batch id in the commit metadata)."""


class MergeWithoutTxn(DeltaBatchSink):
    """delta-io/delta#1421: a MERGE in foreachBatch has no txnAppId/txnVersion, so Delta does
    not know a replayed batch: the merge runs again, and an upsert that adds the batch's counts
    to the table's doubles them."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self.keys = ("key", "window_start_ms", "window_end_ms")

    def write(self, batch_df, batch_id: int) -> None:
        if self._seen(batch_id):
            # still run the batch to its end: since Spark 4.1 a stateful query whose foreachBatch
            # leaves partitions unread fails (STATE_STORE_COMMIT_VALIDATION_FAILED)
            batch_df.write.format("noop").mode("overwrite").save()
            return
        self._merge(batch_df, batch_id)
        self._mark(batch_id)

    __call__ = write

    def _merge(self, batch_df, batch_id: int) -> None:
        from delta.tables import DeltaTable

        table = DeltaTable.forPath(batch_df.sparkSession, str(self.path))
        on = " AND ".join(f"t.{k} = s.{k}" for k in self.keys)
        (table.alias("t").merge(batch_df.alias("s"), on)
         .whenMatchedUpdate(set={"count": "t.count + s.count", "sum_amount": "t.sum_amount + s.sum_amount"})
         .whenNotMatchedInsertAll().execute())

    def _seen(self, batch_id: int) -> bool:
        return False

    def _mark(self, batch_id: int) -> None:
        pass


class MergeOncePerBatch(MergeWithoutTxn):
    """The fix: the sink's own batch-id table (a JSON file of committed batch ids beside the
    table, written after the merge): a replayed batch id is skipped."""

    def _ids_path(self):
        return self.path.with_name(self.path.name + "-batches.json")

    def _seen(self, batch_id: int) -> bool:
        path = self._ids_path()
        return path.exists() and batch_id in json.loads(path.read_text())

    def _mark(self, batch_id: int) -> None:
        path = self._ids_path()
        ids = json.loads(path.read_text()) if path.exists() else []
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps([*ids, batch_id]))
        tmp.replace(path)


class AsyncProgressKafkaSink(KafkaTopicSink):
    """SPARK-56720 (apache/spark PR 55676): Spark's Kafka sink with asynchronous progress
    tracking, which writes the offset and commit logs on a thread of their own: once one of
    those writes fails, the writes queued behind it still land, and can leave a commit-log entry
    with no offset-log entry. The fix (PR 55676: later writes fail with the first error) is not in
    Spark 4.2.0, so this reproduces it."""

    def start(self, df, configured):
        def asynchronous(records):
            return (configured(records).option("asyncProgressTrackingEnabled", "true")
                    .option("asyncProgressTrackingCheckpointIntervalMs", "0"))

        return super().start(df, asynchronous)


class SyncProgressKafkaSink(KafkaTopicSink):
    """The same sink with Spark's default, synchronous progress tracking: each batch's offsets
    are logged before it runs and its commit after, on the query's own thread."""
