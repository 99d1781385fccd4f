"""Read a sink back the way a real consumer would, for the checker."""

from __future__ import annotations


def read_postgres_sink(url: str, table: str):
    """Committed rows of a Postgres sink with the commit time of their batch.

    Read at READ COMMITTED through an ordinary connection: what any client sees.
    """
    import pandas as pd
    import psycopg

    query = (f"SELECT s.key, s.window_start_ms, s.window_end_ms, s.count, s.sum_amount, "
             f"s.batch_id, b.committed_ms FROM {table} s "
             f"JOIN (SELECT batch_id, min(committed_ms) AS committed_ms FROM {table}_batches "
             f"GROUP BY batch_id) b USING (batch_id) ORDER BY s.batch_id")
    with psycopg.connect(url) as conn:
        rows = conn.execute(query).fetchall()
    columns = ["key", "window_start_ms", "window_end_ms", "count", "sum_amount", "batch_id", "committed_ms"]
    return pd.DataFrame(rows, columns=columns).astype(
        {c: "int64" for c in columns if c != "key"})
