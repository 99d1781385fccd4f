"""What to fix, for each cause a story tells: the sentence a finding ends with.

A story says how the anomaly came about; its last sentence says what would have prevented
it, chosen by the cause the evidence showed (a batch id run again, a write applied twice in
one run, a batch planned again over other offsets...), never one sentence per class. The
sentences are those of the fixes in examples/known-bugs/ (each entry's `fixed` case does what
its sentence says).

    advice("duplicated", ["run-again"]) -> "To fix: record Spark's batch id with the rows in one
                                           transaction, and skip a batch id the sink already holds..."
"""

from __future__ import annotations

from collections.abc import Iterable

# (class, cause) -> what to fix; a cause of None is the class's own (Spark's anomalies)
FIXES: dict[tuple[str, str | None], str] = {
    # duplicated
    ("duplicated", "run-again"):
        "record Spark's batch id with the rows in one transaction, and skip a batch id the sink already "
        "holds: after a restart Spark runs a batch again with the same id and offsets",
    ("duplicated", "no-batch-id"):
        "record Spark's batch id with the rows in one transaction, and skip a batch id the sink already "
        "holds: this sink keeps no batch id, so it cannot know a batch Spark runs again after a restart",
    ("duplicated", "own-ids"):
        "commit under Spark's batch id (foreachBatch's second argument) in the same transaction as the rows, "
        "not under an id of the sink's own (a time, a counter), and skip a batch id already committed",
    ("duplicated", "applied-twice"):
        "write each batch's rows once: one run of the batch put a row in the sink more than once with no "
        "restart, so look for a write applied twice (two statements, a retried request that had gone "
        "through) or a source that returns a record more than once",
    ("duplicated", "replanned"):
        "record the offsets a batch read with its id, and for a batch id already recorded write only what "
        "its new range adds: a batch id planned again over a range that overlaps the first is written twice "
        "where they overlap",
    ("duplicated", "several"):
        "key the rows by what identifies them and upsert on that key, so that a row a later batch writes "
        "again replaces the first copy",
    ("duplicated", "unknown"):
        "record Spark's batch id with each write, in one transaction with the rows: the sink can then skip a "
        "batch it already wrote, and a finding can tell which batch wrote each copy",
    # lost
    ("lost", "fresh-restart"):
        "restart the query on its own checkpoint: a query on a fresh checkpoint starts where it is told "
        "(the latest offsets, empty state), so what the old query had read and not committed, or held "
        "in its state, is read by nobody",
    ("lost", "ended"):
        "let the query run until it has read and committed everything sent, and see why it stopped (the "
        "driver's deaths above): a batch never committed is run again only by a driver on the same "
        "checkpoint",
    ("lost", "unwritten"):
        "make the sink hold a batch's rows before foreachBatch returns (Spark writes commits/N when it "
        "returns, and never runs that batch again), and compare the rows written for the batch with its "
        "offset range: a sink that returned early, or a source that returned fewer records than its "
        "offsets span, loses them the same way",
    ("lost", "replanned"):
        "record the offsets a batch read with its id, and skip a batch id only when its offsets are the ones "
        "recorded: a batch id planned again over another range is new data under an old id",
    # unexpected, wrong-value
    ("unexpected", "too-many"):
        "make the update idempotent per batch: an upsert that adds a batch's counts to the table's must "
        "skip a batch it already applied (Delta's txnAppId and txnVersion, or a table of applied batch ids "
        "written in the same transaction)",
    ("unexpected", "late"):
        "compare the query's watermark with Spark's rule: Spark drops a late row with the previous batch's "
        "watermark, and a window every event of which came after it should not be written",
    ("unexpected", "never-sent"):
        "check what the sink writes against what was read: no event sent explains this row (a stale row "
        "of an earlier run in the same table, or a key the query makes up)",
    ("unexpected", "no-event-in-window"):
        "check the query's window bounds against Spark's (left-closed, right-open, aligned to the epoch): "
        "no event of the key falls in this window",
    ("unexpected", "not-expected"):
        "check the query's filter against the oracle's: the event was sent, and the query should not "
        "write it",
    ("wrong-value", None):
        "look at how the sink writes a row it already holds: the row is the one expected and its values are "
        "not, as when an upsert merges a batch into a row that already counted it, or a column's type "
        "truncates the value",
    ("mismatch", None):
        "look at where the differing column gets its value, as the rows are the ones expected and their "
        "values are not: a column type that truncates it, or a value kept outside Spark's state (a Python "
        "variable or dict in the worker, a counter in the driver), which a task retried or a query restarted "
        "loses or counts again; keep such a value in the operator's state (applyInPandasWithState, "
        "transformWithState), which Spark restores with the batch",
    ("went-backwards", None):
        "apply a batch only over rows of older batches: keep the batch id in the row and guard the upsert "
        "with it (ON CONFLICT ... DO UPDATE ... WHERE t.batch_id <= excluded.batch_id; in a MERGE, WHEN "
        "MATCHED AND t.batch_id <= s.batch_id), so that a replayed or late older batch leaves the newer "
        "value",
    # Spark's anomalies
    ("dropped-late-wrongly", None):
        "nothing in the sink: report it to Spark with the batch, its watermark and the on-time events above; "
        "a longer watermark delay keeps such rows meanwhile",
    ("deleted-before-read", "kafka"):
        "keep the topic's records until the query has read them: a retention (retention.ms, retention.bytes) "
        "longer than the query's worst lag and downtime; failOnDataLoss=true stops the query rather than "
        "skip them",
    ("deleted-before-read", "delta"):
        "keep the table's files until every reader has read past them: a VACUUM retention longer than the "
        "query's worst lag and downtime",
    ("refused-restart", None):
        "keep the checkpoint on storage that makes each write durable as it returns (HDFS, an object "
        "store, a sync mount), or restore it from a copy: Spark does not repair a damaged checkpoint itself",
    ("state-diverged", None):
        "keep the state store's files as Spark wrote them, on storage that makes each write durable as it "
        "returns, and restore a checkpoint only whole (its state with its offset and commit logs, from one "
        "moment): a state file of an older version under a newer name makes the query go on from a state "
        "that lost updates, and Spark does not notice",
    ("timer-fired-twice", None):
        "register a timer only from what the state says is still pending: a processor that registers "
        "its timers again on recovery (from a list of every timer it ever set) re-arms those that "
        "already fired, and Spark fires them again; prune that list in handleExpiredTimer, or keep no "
        "such list (Spark restores the registered timers with the state)",
    ("timer-never-fired", None):
        "report it to Spark with the key, the timer and the batches: a timer the watermark passed must "
        "fire in that batch (apache/spark#55474 reports a timer scan that could skip timers)",
    ("expired-early", None):
        "give the state its TTL where it is created (getValueState(name, schema, ttlDurationMs)) from the "
        "same setting the job documents, and keep batches' timestamps as Spark wrote them (a checkpoint "
        "restored from another query, or a TTL shorter in one build than another, expires values early)",
    ("commit-without-offsets", None):
        "run with synchronous progress tracking (asyncProgressTrackingEnabled off) until your Spark has "
        "SPARK-56720's fix: asynchronous tracking can log a batch done whose offsets it never logged",
}


def advice(cls: str, causes: Iterable[str | None] = (None,)) -> str:
    """"To fix: ..." for each distinct cause the story told, in the order told ("" when none has
    a sentence)."""
    said = [FIXES[(cls, c)] for c in dict.fromkeys(causes) if (cls, c) in FIXES]
    if not said:
        return ""
    return "To fix: " + "; and ".join(said) + "."
