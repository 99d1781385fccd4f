"""The user's own sink, beside their test (docs/pytest.md): rows upserted into PostgreSQL by
their key, so that a batch Spark runs again after a crash changes nothing."""

from __future__ import annotations

import time


class UpsertSink:
    """One table keyed by (key, window_start_ms): a replayed batch's rows replace themselves."""

    def __init__(self, ctx):
        self.ctx, self.table = ctx, ctx.name
        self.columns = list(ctx.columns)
        self.last_rows = None

    def _connect(self):
        import psycopg

        return psycopg.connect(self.ctx.postgres_url, autocommit=True)

    def setup(self):
        with self._connect() as conn:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table} (key text, window_start_ms bigint, "
                         "window_end_ms bigint, count bigint, sum_amount bigint, batch_id bigint, "
                         "committed_ms bigint, PRIMARY KEY (key, window_start_ms))")

    def write(self, batch_df, batch_id):
        rows = [tuple(r) for r in batch_df.select(*self.columns).collect()]
        now = time.time_ns() // 1_000_000
        with self._connect() as conn, conn.transaction():
            for row in rows:
                conn.execute(self._upsert(), (*row, batch_id, now))
        self.last_rows = len(rows)

    def _upsert(self) -> str:
        return (f"INSERT INTO {self.table} VALUES (%s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (key, window_start_ms) DO UPDATE SET count = EXCLUDED.count, "
                "sum_amount = EXCLUDED.sum_amount")

    def read(self):
        import pandas as pd

        with self._connect() as conn:
            rows = conn.execute(f"SELECT {', '.join(self.columns)}, batch_id, committed_ms "
                                f"FROM {self.table}").fetchall()
        return pd.DataFrame(rows, columns=[*self.columns, "batch_id", "committed_ms"])

    def close(self):
        pass


class AddingSink(UpsertSink):
    """The same table, but a second write of a window adds to it: a replay doubles its counts."""

    def _upsert(self) -> str:
        return (f"INSERT INTO {self.table} VALUES (%s, %s, %s, %s, %s, %s, %s) "
                f"ON CONFLICT (key, window_start_ms) DO UPDATE SET "
                f"count = {self.table}.count + EXCLUDED.count, "
                f"sum_amount = {self.table}.sum_amount + EXCLUDED.sum_amount")
