"""Sinks with known bugs, each failing for its own reason, for the tests of what the harness
says of them (docs/measurement.md, "Findings"): the story must name the right cause and batch.

  WritesTwice    writes every batch twice, keeping Spark's batch id: duplicates with no fault
  NaiveAppend    appends every batch, keeping no batch id: a replayed batch lands twice, and only
                 the harness can tell which batch wrote which copy
  PerPartition   writes each partition from its own tasks (foreachPartition, one autocommitted
                 INSERT per row) and checks the batch id on the driver only: a task Spark retries
                 writes again the rows it had written

Each writes into the run's PostgreSQL, one table per case, with the time each row was written
(`committed_ms`), as a reader could first see it.
"""

from __future__ import annotations

import time

_TYPES = {"STRING": "text", "LONG": "bigint", "INT": "integer", "DOUBLE": "double precision",
          "BOOLEAN": "boolean"}


class _Table:
    """One table of the pipeline's columns, `committed_ms` and, when `keeps_batch_id`, `batch_id`."""

    keeps_batch_id = True

    def __init__(self, ctx):
        self.ctx, self.table, self.columns = ctx, ctx.name, list(ctx.columns)
        self.last_rows = None

    def _connect(self):
        import psycopg

        return psycopg.connect(self.ctx.postgres_url, autocommit=True)

    def setup(self):
        cols = ", ".join(f'"{c}" {_TYPES[t.upper()]}' for c, t in self.ctx.columns.items())
        with self._connect() as conn:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table} ({cols}, batch_id bigint, "
                         "committed_ms bigint)")
            conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table}_batches (batch_id bigint PRIMARY KEY)")

    def _insert(self, conn, rows, batch_id):
        names = ", ".join([*(f'"{c}"' for c in self.columns), "batch_id", "committed_ms"])
        marks = ", ".join(["%s"] * (len(self.columns) + 2))
        stamp = time.time_ns() // 1_000_000
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {self.table} ({names}) VALUES ({marks})",
                            [(*row, batch_id if self.keeps_batch_id else None, stamp) for row in rows])

    def read(self):
        import pandas as pd

        cols = ", ".join(f'"{c}"' for c in self.columns)
        with self._connect() as conn:
            rows = conn.execute(f"SELECT {cols}, batch_id, committed_ms FROM {self.table}").fetchall()
        out = pd.DataFrame(rows, columns=[*self.columns, "batch_id", "committed_ms"])
        ints = {c: "int64" for c, t in self.ctx.columns.items() if t.upper() in ("LONG", "INT")}
        out = out.astype({**ints, "committed_ms": "int64"})
        return out.astype({"batch_id": "int64"}) if self.keeps_batch_id else out.drop(columns="batch_id")

    def close(self):
        pass


class WritesTwice(_Table):
    """Every batch's rows appended twice, in two statements: a write applied twice."""

    def write(self, batch_df, batch_id):
        rows = [tuple(r) for r in batch_df.select(*self.columns).collect()]
        with self._connect() as conn:
            self._insert(conn, rows, batch_id)
            self._insert(conn, rows, batch_id)
        self.last_rows = len(rows)


class NaiveAppend(_Table):
    """Every batch's rows appended once, with no batch id: Spark's replay of a batch lands twice."""

    keeps_batch_id = False

    def write(self, batch_df, batch_id):
        rows = [tuple(r) for r in batch_df.select(*self.columns).collect()]
        with self._connect() as conn:
            self._insert(conn, rows, batch_id)
        self.last_rows = len(rows)


class PerPartition(_Table):
    """Each partition written from its own task, a row at a time (autocommitted), the batch id
    checked and recorded on the driver only: exactly-once as long as no task is retried."""

    def write(self, batch_df, batch_id):
        with self._connect() as conn:
            done = conn.execute(f"SELECT 1 FROM {self.table}_batches WHERE batch_id = %s", (batch_id,))
            if done.fetchone():
                return
        url, table, columns = self.ctx.postgres_url, self.table, self.columns

        def write_partition(rows):
            import time

            import psycopg

            names = ", ".join([*(f'"{c}"' for c in columns), "batch_id", "committed_ms"])
            marks = ", ".join(["%s"] * (len(columns) + 2))
            with psycopg.connect(url, autocommit=True) as conn:
                for row in rows:
                    conn.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})",
                                 (*(row[c] for c in columns), batch_id, time.time_ns() // 1_000_000))

        batch_df.select(*columns).foreachPartition(write_partition)
        with self._connect() as conn:
            conn.execute(f"INSERT INTO {self.table}_batches VALUES (%s)", (batch_id,))
