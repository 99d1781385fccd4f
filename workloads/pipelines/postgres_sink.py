"""A `foreachBatch` sink into PostgreSQL, exactly-once or at-least-once.

exactly-once: the batch's rows and its batch id are written in one transaction, and a
batch id that is already committed is skipped, so Spark's replay of a batch after a
restart changes nothing. at-least-once: plain INSERTs, so a replayed batch lands twice.
Each batch's commit time is recorded: it is when its rows became visible to readers.
"""

from __future__ import annotations

import time

DDL = """
CREATE TABLE IF NOT EXISTS {t} (
  batch_id bigint NOT NULL, key text NOT NULL, window_start_ms bigint NOT NULL,
  window_end_ms bigint NOT NULL, count bigint NOT NULL, sum_amount bigint NOT NULL);
CREATE TABLE IF NOT EXISTS {t}_batches (
  batch_id bigint NOT NULL {pk}, committed_ms bigint NOT NULL, rows integer NOT NULL);
"""

COLUMNS = ("batch_id", "key", "window_start_ms", "window_end_ms", "count", "sum_amount")


class PostgresSink:
    """Callable for `foreachBatch(sink)`; one connection reused across batches."""

    def __init__(self, url: str, table: str, mode: str):
        if mode not in ("exactly-once", "at-least-once"):
            raise ValueError(f"PostgresSink mode must be exactly-once or at-least-once, not {mode!r}")
        self.url, self.table, self.mode = url, table, mode
        self._conn = None

    def setup(self) -> None:
        pk = "PRIMARY KEY" if self.mode == "exactly-once" else ""
        with self._connection().transaction():
            self._conn.execute(DDL.format(t=self.table, pk=pk))

    def __call__(self, batch_df, batch_id: int) -> None:
        self.write_rows([tuple(r) for r in batch_df.select(*COLUMNS[1:]).collect()], batch_id)

    def write_rows(self, rows: list[tuple], batch_id: int) -> None:
        """Write one micro-batch's rows (key, window_start_ms, window_end_ms, count, sum_amount)."""
        conn = self._connection()
        with conn.transaction():
            if self.mode == "exactly-once" and self._committed(batch_id):
                return  # committed before a restart: Spark is replaying it
            with conn.cursor().copy(f"COPY {self.table} ({', '.join(COLUMNS)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row((batch_id, *row))
            # last statement before COMMIT: the rows become visible at about this time;
            # in exactly-once mode the primary key also rejects a concurrent double commit
            conn.execute(f"INSERT INTO {self.table}_batches (batch_id, committed_ms, rows) "
                         "VALUES (%s, %s, %s)", (batch_id, _now_ms(), len(rows)))

    def _committed(self, batch_id: int) -> bool:
        cur = self._conn.execute(f"SELECT 1 FROM {self.table}_batches WHERE batch_id = %s", (batch_id,))
        return cur.fetchone() is not None

    def _connection(self):
        import psycopg

        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.url, autocommit=True)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
