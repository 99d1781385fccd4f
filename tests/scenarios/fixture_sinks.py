"""Sinks with known bugs, each failing for its own reason, for the tests of what the harness
says of them (docs/measurement.md, "Findings"): the story must name the right cause and batch.

  WritesTwice    writes every batch twice, keeping Spark's batch id: duplicates with no fault
  NaiveAppend    appends every batch, keeping no batch id: a batch run again lands twice, and only
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
    """Every batch's rows appended once, with no batch id: a batch Spark runs again lands twice."""

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


class GuardsFirstPartitions(_Table):
    """Idempotent per (batch, Kafka partition): a partition's rows of a batch already written are
    skipped, in the same transaction as the write. But the partitions it guards are those the
    topic had when the sink first started: rows of a partition added later are appended with no
    check. Each fault alone leaves it exact; partitions added, then any batch run again with
    rows of the new partition, duplicates them (issue 27's bug: it needs two faults, in order)."""

    def setup(self):
        super().setup()
        with self._connect() as conn:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table}_guarded (part integer PRIMARY KEY)")
            conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table}_done (batch_id bigint, part integer, "
                         "PRIMARY KEY (batch_id, part))")
            if conn.execute(f"SELECT count(*) FROM {self.table}_guarded").fetchone()[0] == 0:
                for part in range(_partitions(self.ctx.bootstrap_servers, self.ctx.topic)):
                    conn.execute(f"INSERT INTO {self.table}_guarded VALUES (%s)", (part,))

    def write(self, batch_df, batch_id):
        rows = [tuple(r) for r in batch_df.select(*self.columns).collect()]
        at = self.columns.index("partition")
        with self._connect() as conn, conn.transaction():
            guarded = {r[0] for r in conn.execute(f"SELECT part FROM {self.table}_guarded").fetchall()}
            for part in sorted({row[at] for row in rows}):
                mine = [row for row in rows if row[at] == part]
                if part in guarded:
                    done = conn.execute(f"SELECT 1 FROM {self.table}_done WHERE batch_id = %s AND part = %s",
                                        (batch_id, part)).fetchone()
                    if done:
                        continue
                    conn.execute(f"INSERT INTO {self.table}_done VALUES (%s, %s)", (batch_id, part))
                self._insert(conn, mine, batch_id)
        self.last_rows = len(rows)


def _partitions(bootstrap_servers: str, topic: str) -> int:
    """How many partitions the topic has now."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers)
    try:
        return len(consumer.partitions_for_topic(topic) or ())
    finally:
        consumer.close()
