"""Upserts, as teams write an update-mode job's output: each batch's rows replace the rows of
their key. PostgreSQL's `INSERT ... ON CONFLICT DO UPDATE` and Delta's `MERGE INTO`.

Both keep the batch id of the row's last write beside it, and replace a row only with a
row of a batch at least as new (`WHERE t.batch_id <= s.batch_id`): a batch Spark runs again
after a restart writes the same values, and an older batch applied late never overwrites a
newer value. That guard is what makes an upsert idempotent when a batch runs again; without it (the
planted bug of tests/scenarios/job_planted.py) a row can go backwards.

`read()` is the final table (one row per key), with `attrs["history"]` (history_of): every row each batch
actually wrote, in the order it was applied (`seq`), with its batch id and commit time, from
which the batch oracle checks that no row ever went back to an older batch's value
(harness/check/upserts.py). The key is the pipeline's (`ctx.options["key"]`).
"""

from __future__ import annotations

import json
from typing import Any

from workloads.sinks import SinkContext
from workloads.sinks.delta import _DeltaTable, _file, commits
from workloads.sinks.postgres import _SQL_TYPES, PostgresSink, _csv


def with_history(final, history):
    """The final table, its history of writes in attrs["history"] as plain lists (pandas keeps
    attrs in a Parquet file's metadata as JSON: the harness writes the sink to sink.parquet)."""
    final.attrs["history"] = history.to_dict("list")
    return final


def history_of(sink):
    """The history of writes an upsert sink's read() carried (None: not an upsert sink's)."""
    import pandas as pd

    raw = sink.attrs.get("history")
    return None if raw is None else pd.DataFrame(raw)


def key_of(ctx: SinkContext) -> list[str]:
    key = list(ctx.options.get("key") or [])
    if not key:
        raise ValueError(f"an upsert sink writes by the pipeline's key, and {ctx.name} has none: "
                         "add key = [...] to the [pipeline]")
    return key


class PostgresUpsertSink(PostgresSink):
    """`INSERT ... ON CONFLICT (key) DO UPDATE`, guarded by the batch id; every written row also
    goes to `<table>_history` in the same transaction."""

    guarantees: tuple[str, ...] = ("exactly-once", "at-least-once")
    guarded = True     # False: a newer row may be overwritten by an older batch's (a planted bug)

    def __init__(self, ctx: SinkContext):
        super().__init__(ctx)
        self.key = key_of(ctx)

    def setup(self) -> None:
        cols = ", ".join(f'"{c}" {_SQL_TYPES[t.upper()]}' for c, t in self.ctx.columns.items())
        keys = ", ".join(f'"{k}"' for k in self.key)
        conn = self._connection()
        with conn.transaction():
            conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table} (batch_id bigint NOT NULL, {cols}, "
                         f"PRIMARY KEY ({keys}))")
            conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table}_history (seq bigserial PRIMARY KEY, "
                         f"batch_id bigint NOT NULL, {cols}, applied_ms bigint NOT NULL DEFAULT "
                         "((extract(epoch from clock_timestamp()) * 1000)::bigint))")
            conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table}_batches (batch_id bigint NOT NULL, "
                         "committed_ms bigint NOT NULL, rows integer NOT NULL)")

    def write_rows(self, rows, batch_id: int) -> None:
        """Upsert one batch's rows (a pyarrow Table of the output columns)."""
        self.upsert(rows, batch_id)

    def upsert(self, rows, batch_id: int) -> None:
        conn = self._connection()
        names = ", ".join(f'"{c}"' for c in ["batch_id", *self.columns])
        keys = ", ".join(f'"{k}"' for k in self.key)
        values = [c for c in self.columns if c not in self.key]
        sets = ", ".join(f'"{c}" = EXCLUDED."{c}"' for c in ["batch_id", *values])
        guard = f" WHERE {self.table}.batch_id <= EXCLUDED.batch_id" if self.guarded else ""
        with conn.transaction():
            conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS incoming (LIKE {self.table}) "
                         "ON COMMIT DELETE ROWS")
            with conn.cursor().copy(f"COPY incoming ({names}) FROM STDIN (FORMAT csv)") as copy:
                copy.write(_csv(rows, batch_id))
            conn.execute(f"WITH written AS (INSERT INTO {self.table} ({names}) "
                         f"SELECT DISTINCT ON ({keys}) {names} FROM incoming "
                         f"ON CONFLICT ({keys}) DO UPDATE SET {sets}{guard} RETURNING {names}) "
                         f"INSERT INTO {self.table}_history ({names}) SELECT {names} FROM written")
            conn.execute(f"INSERT INTO {self.table}_batches (batch_id, committed_ms, rows) "
                         "VALUES (%s, (extract(epoch from clock_timestamp()) * 1000)::bigint, %s)",
                         (batch_id, rows.num_rows))

    def read(self):
        """The final table, each row with its batch's commit time; attrs["history"]: every row
        written, in order."""
        import pandas as pd
        import psycopg

        cols = ", ".join(f'"{c}"' for c in self.columns)
        last = (f"(SELECT batch_id, max(committed_ms) AS committed_ms FROM {self.table}_batches "
                "GROUP BY batch_id) b")
        with psycopg.connect(self.url) as conn:
            final = conn.execute(f"SELECT {cols}, batch_id, b.committed_ms FROM {self.table} "
                                 f"JOIN {last} USING (batch_id)").fetchall()
            # each write's own time: a batch applied again (Spark ran it again, a recovery) has two
            history = conn.execute(f"SELECT seq, {cols}, batch_id, applied_ms FROM {self.table}_history "
                                   "ORDER BY seq").fetchall()
        out = pd.DataFrame(final, columns=[*self.columns, "batch_id", "committed_ms"])
        return with_history(out, pd.DataFrame(history,
                                              columns=["seq", *self.columns, "batch_id", "committed_ms"]))


class DeltaMergeSink(_DeltaTable):
    """`MERGE INTO` the table on the key, guarded by the batch id (a `batch_id` column beside
    the output's); each MERGE's commit names its batch in `userMetadata`."""

    guarantees = ("exactly-once", "at-least-once")

    def __init__(self, ctx: SinkContext):
        if ctx.guarantee not in self.guarantees:
            raise ValueError(f"DeltaMergeSink gives one of {self.guarantees}, not {ctx.guarantee!r}")
        super().__init__(ctx)
        self.key = key_of(ctx)
        self.last_rows: int | None = None

    def setup(self) -> None:
        from delta.tables import DeltaTable
        from pyspark.sql import SparkSession

        from workloads.sinks.delta import _SPARK_TYPES

        spark = SparkSession.getActiveSession()
        if spark is None:
            raise RuntimeError("a Delta sink's setup() runs in the driver, with a Spark session")
        builder = DeltaTable.createIfNotExists(spark).location(str(self.path)).addColumn("batch_id", "bigint")
        for name, kind in self.ctx.columns.items():
            builder = builder.addColumn(name, _SPARK_TYPES[kind.upper()])
        builder.execute()

    def write(self, batch_df, batch_id: int) -> None:
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        spark = batch_df.sparkSession
        rows = batch_df.withColumn("batch_id", F.lit(batch_id).cast("bigint"))
        on = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in self.key)
        spark.conf.set("spark.databricks.delta.commitInfo.userMetadata", json.dumps({"batch_id": batch_id}))
        try:
            (DeltaTable.forPath(spark, str(self.path)).alias("t").merge(rows.alias("s"), on)
             .whenMatchedUpdateAll(condition="t.batch_id <= s.batch_id").whenNotMatchedInsertAll().execute())
        finally:
            spark.conf.unset("spark.databricks.delta.commitInfo.userMetadata")

    __call__ = write

    def read(self):
        """The final table (the live files' rows, their stored batch id), with attrs["history"]:
        the rows each MERGE wrote (those of its own batch), version by version."""
        import pandas as pd
        import pyarrow.parquet as pq

        columns = [*self.ctx.columns, "batch_id"]
        parts: list[Any] = []
        for path, commit in sorted(self.live_files().items(), key=lambda f: f[1].version):
            parts.append(pq.read_table(path, columns=columns).to_pandas().assign(committed_ms=commit.at_ms))
        empty = pd.DataFrame(columns=[*columns, "committed_ms"])
        final = pd.concat(parts, ignore_index=True) if parts else empty
        written = []
        for commit in commits(self.path):
            for path in commit.adds:
                rows = pq.read_table(_file(self.path, path), columns=columns).to_pandas()
                rows = rows[rows["batch_id"] == commit.batch_id]
                written.append(rows.assign(seq=commit.version, committed_ms=commit.at_ms))
        return with_history(final, pd.concat(written, ignore_index=True) if written else empty.assign(seq=[]))
