"""A `foreachBatch` sink into PostgreSQL, exactly-once or at-least-once, and its reader.

exactly-once: the batch's rows and its batch id are written in one transaction, and a
batch id that is already committed is skipped, so a batch Spark runs again after a
restart changes nothing. at-least-once: plain INSERTs, so a batch run again lands twice.
at-most-once: plain INSERTs too; the driver is restarted on a fresh checkpoint at the
latest offsets, so no batch is run again and whatever was in flight is skipped.
Each batch's commit time is recorded: it is when its rows became visible to readers.
"""

from __future__ import annotations

from typing import Any

from workloads.sinks import SinkContext

_SQL_TYPES = {"STRING": "text", "LONG": "bigint", "INT": "integer", "DOUBLE": "double precision",
              "BOOLEAN": "boolean"}
_BATCHES_DDL = """CREATE TABLE IF NOT EXISTS {t}_batches (
  batch_id bigint NOT NULL {pk}, committed_ms bigint NOT NULL, rows integer NOT NULL)"""


class PostgresSink:
    """One table of the pipeline's columns plus `batch_id`, and `<table>_batches` with the
    commit time of every batch. One connection, reused across batches."""

    guarantees: tuple[str, ...] = ("exactly-once", "at-least-once", "at-most-once")
    # exactly-once: a batch id is committed once (the batches table's primary key), and a
    # committed one run again is skipped; a subclass may drop both (examples/known-bugs/)
    skips_committed = True

    def __init__(self, ctx: SinkContext):
        if ctx.guarantee not in self.guarantees:
            raise ValueError(f"PostgresSink gives one of {self.guarantees}, not {ctx.guarantee!r}")
        if ctx.postgres_url is None:
            raise ValueError("PostgresSink needs ctx.postgres_url")
        self.ctx, self.url, self.table = ctx, ctx.postgres_url, ctx.name
        self.columns = list(ctx.columns)
        self._conn: Any = None
        self.last_rows: int | None = None    # rows of the last batch written (the commit gate reads it)

    def setup(self) -> None:
        cols = ", ".join(f'"{c}" {_SQL_TYPES[t.upper()]}' for c, t in self.ctx.columns.items())
        pk = "PRIMARY KEY" if self.ctx.guarantee == "exactly-once" and self.skips_committed else ""
        conn = self._connection()
        with conn.transaction():
            conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table} (batch_id bigint NOT NULL, {cols})")
            conn.execute(_BATCHES_DDL.format(t=self.table, pk=pk))

    def write(self, batch_df, batch_id: int) -> None:
        # the batch comes to the driver as Arrow and goes to PostgreSQL as CSV, both in C: a
        # Row object and a write_row call per row cost Nexmark's q0 28 µs a row of batch time
        # (docs/performance.md, "Nexmark throughput per core")
        table = batch_df.select(*self.columns).toArrow()
        self.write_rows(table, batch_id)
        self.last_rows = table.num_rows

    __call__ = write   # foreachBatch(sink)

    def write_rows(self, rows, batch_id: int) -> None:
        """Write one micro-batch's rows: a list of tuples (values in the order of the output
        columns), or a pyarrow Table of those columns."""
        conn = self._connection()
        with conn.transaction():
            if self.ctx.guarantee == "exactly-once" and self.skips_committed and self._committed(batch_id):
                return  # committed before a restart: Spark is running it again
            names = ", ".join(["batch_id", *(f'"{c}"' for c in self.columns)])
            if isinstance(rows, list):
                with conn.cursor().copy(f"COPY {self.table} ({names}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row((batch_id, *row))
            else:
                with conn.cursor().copy(f"COPY {self.table} ({names}) FROM STDIN (FORMAT csv)") as copy:
                    copy.write(_csv(rows, batch_id))
            # last statement before COMMIT: the rows become visible at about this time, on
            # the server's clock (a clock fault may move this process's, never PostgreSQL's);
            # in exactly-once mode the primary key also rejects a concurrent double commit
            conn.execute(f"INSERT INTO {self.table}_batches (batch_id, committed_ms, rows) "
                         "VALUES (%s, (extract(epoch from clock_timestamp()) * 1000)::bigint, %s)",
                         (batch_id, len(rows)))

    def read(self):
        """Committed rows with the commit time of their batch, read at READ COMMITTED through
        an ordinary connection: what any client sees."""
        import pandas as pd
        import psycopg

        cols = ", ".join(f's."{c}"' for c in self.columns)   # quoted: offset is a keyword
        query = (f"SELECT {cols}, s.batch_id, b.committed_ms FROM {self.table} s "
                 f"JOIN (SELECT batch_id, min(committed_ms) AS committed_ms FROM {self.table}_batches "
                 f"GROUP BY batch_id) b USING (batch_id) ORDER BY s.batch_id")
        with psycopg.connect(self.url) as conn:
            rows = conn.execute(query).fetchall()
        names = [*self.columns, "batch_id", "committed_ms"]
        out = pd.DataFrame(rows, columns=names)
        # a column with nulls (an outer join's missing side) stays nullable
        ints = {c: "Int64" if out[c].isna().any() else "int64"
                for c, t in self.ctx.columns.items() if t.upper() in ("LONG", "INT")}
        ints.update(batch_id="int64", committed_ms="int64")
        return out.astype(ints)

    def _committed(self, batch_id: int) -> bool:
        cur = self._connection().execute(f"SELECT 1 FROM {self.table}_batches WHERE batch_id = %s",
                                         (batch_id,))
        return cur.fetchone() is not None

    def _connection(self):
        import psycopg

        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.url, autocommit=True)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()



def _csv(table, batch_id: int) -> bytes:
    """The table's rows as PostgreSQL's CSV, `batch_id` first: pyarrow quotes every string
    (an empty one as ""), leaves a null empty and unquoted (COPY's NULL in CSV), and writes
    a double's shortest form that reads back to the same double."""
    import io

    import pyarrow as pa
    import pyarrow.csv as pacsv

    table = table.add_column(0, "batch_id", pa.array([batch_id] * table.num_rows, pa.int64()))
    out = io.BytesIO()
    pacsv.write_csv(table, out, pacsv.WriteOptions(include_header=False))
    return out.getvalue()
