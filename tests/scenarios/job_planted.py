"""Bugs planted in a job or a sink, for the batch oracle to catch (benchmarks/test_jobs.py):

  AppendingSink           a sink that claims exactly-once and inserts a replayed batch again:
                          under a kill after its write, the batch lands twice (duplicated)
  RecoveringUpsertSink    an upsert sink that, on recovery, re-applies its last staged batches
                          without comparing batch ids: an older batch's row goes over a newer
                          one (went-backwards), though the final table may end up right
  totals_in_a_variable    an applyInPandasWithState job that keeps each user's running total in
                          a Python dict instead of its state: right as a batch, where each user
                          is seen once; wrong as a stream, whose Python workers restart and
                          split the users between them (mismatch)
and the correct jobs beside them (clicks_per_user, pages).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pyarrow as pa

from workloads.sinks.postgres import PostgresSink
from workloads.sinks.upsert import PostgresUpsertSink

RECOVERED_BATCHES = 3
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TOTALS: dict[str, int] = {}   # the bug: per Python worker, lost with it


def clicks(rows: int) -> list[dict]:
    """`rows` clicks of the sessions example's generator (examples/my-job/make_data.py)."""
    spec = importlib.util.spec_from_file_location("sessions_data", EXAMPLES / "my-job" / "make_data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.clicks(rows)


def pages(df):
    """A stateless job: each click's user and page."""
    return df.select("user", "page", "ts")


def clicks_per_user(df):
    """An update-mode job: each user's running count of clicks."""
    from pyspark.sql import functions as F

    return df.groupBy("user").agg(F.count("*").alias("clicks"))


def _count(key, frames, state):
    user = key[0]
    for frame in frames:
        TOTALS[user] = TOTALS.get(user, 0) + len(frame)
    yield pd.DataFrame({"user": [user], "clicks": [TOTALS[user]]})


def totals_in_a_variable(df):
    """Each user's running count of clicks, kept in a Python dict (the bug) instead of `state`."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    return df.groupBy("user").applyInPandasWithState(_count, "user STRING, clicks LONG", "n LONG", "update",
                                                     GroupStateTimeout.NoTimeout)


class AppendingSink(PostgresSink):
    """PostgreSQL INSERTs without the batch id check, though the case claims exactly-once."""

    skips_committed = False


class RecoveringUpsertSink(PostgresUpsertSink):
    """Stages each batch before upserting it, and on recovery (setup, in a new driver)
    re-applies the last RECOVERED_BATCHES staged batches, oldest first, with no guard."""

    guarded = False

    def setup(self) -> None:
        super().setup()
        cols = ", ".join(f'"{c}" {t}' for c, t in (("user", "text"), ("clicks", "bigint")))
        conn = self._connection()
        conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table}_staging (batch_id bigint, {cols})")
        staged = conn.execute(f"SELECT DISTINCT batch_id FROM {self.table}_staging ORDER BY batch_id DESC "
                              f"LIMIT {RECOVERED_BATCHES}").fetchall()
        for (batch_id,) in sorted(staged):
            rows = conn.execute(f'SELECT "user", clicks FROM {self.table}_staging WHERE batch_id = %s',
                                (batch_id,)).fetchall()
            self.upsert(pa.table({"user": [r[0] for r in rows], "clicks": [r[1] for r in rows]}), batch_id)

    def write_rows(self, rows, batch_id: int) -> None:
        conn = self._connection()
        with conn.transaction():
            users, clicks = rows.column("user").to_pylist(), rows.column("clicks").to_pylist()
            for user, n in zip(users, clicks, strict=True):
                conn.execute(f"INSERT INTO {self.table}_staging VALUES (%s, %s, %s)", (batch_id, user, n))
        self.upsert(rows, batch_id)
