"""Upserts: the PostgreSQL upsert sink against the real server, and the check that no row
went back to an older batch's value.

Steps: upsert batches of running totals, apply an older batch again (Spark ran it again, or a planted
sink's late write), read the final table and its history back as the oracle does.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

from harness.check.upserts import problem, went_backwards
from workloads.sinks import SinkContext
from workloads.sinks.upsert import PostgresUpsertSink, history_of

COLUMNS = {"user": "STRING", "total": "LONG"}


def _batch(rows: dict[str, int]) -> pa.Table:
    return pa.table({"user": list(rows), "total": list(rows.values())})


def _sink(postgres, name: str, guarded: bool = True) -> PostgresUpsertSink:
    ctx = SinkContext(name=f"upsert_{name}", guarantee="exactly-once", columns=COLUMNS,
                      workdir="/nonexistent", postgres_url=postgres.url, options={"key": ["user"]})
    sink = PostgresUpsertSink(ctx)
    sink.guarded = guarded
    sink.setup()
    return sink


@pytest.mark.integration
class TestPostgresUpsert:
    def test_the_newest_batch_s_row_wins_and_a_batch_run_again_changes_nothing(self, postgres):
        """Batch 1 then 2 upsert totals; batch 2 again (run again) and batch 1 late are no change:
        the guard keeps each key at its newest batch, and history holds only real writes."""
        sink = _sink(postgres, "guarded")
        sink.write_rows(_batch({"a": 1, "b": 5}), 1)
        sink.write_rows(_batch({"a": 3}), 2)
        sink.write_rows(_batch({"a": 3}), 2)
        sink.write_rows(_batch({"a": 1, "b": 5}), 1)
        final = sink.read().sort_values("user")
        assert final[["user", "total", "batch_id"]].values.tolist() == [["a", 3, 2], ["b", 5, 1]]
        history = history_of(final)
        assert history["batch_id"].tolist() == [1, 1, 2, 2, 1]   # late batch 1 rewrote b, its own row, not a
        assert history["user"].tolist()[-1] == "b"
        assert went_backwards(history, ["user"]).empty

    def test_an_unguarded_upsert_goes_backwards_and_says_which_batch(self, postgres):
        """Without the guard, batch 1 applied after batch 2 writes a = 1 over a = 3: the check
        names batch 1 over batch 2 and both values."""
        sink = _sink(postgres, "unguarded", guarded=False)
        sink.write_rows(_batch({"a": 1, "b": 5}), 1)
        sink.write_rows(_batch({"a": 3}), 2)
        sink.write_rows(_batch({"a": 1, "b": 5}), 1)
        back = went_backwards(history_of(sink.read()), ["user"])
        got = back[["user", "batch_id", "over_batch", "total", "was_total"]].values.tolist()
        assert got == [["a", 1, 2, 1, 3]]
        assert "batch 1 over batch 2" in problem(back, ["user"])


@pytest.mark.unit
class TestWentBackwards:
    def test_a_key_s_batch_ids_must_not_fall_in_the_order_applied(self):
        """Per key, a write of an older batch after a newer one went back; other keys and equal
        batch ids (a batch run again) did not."""
        history = pd.DataFrame({"seq": range(6), "user": ["a", "b", "a", "a", "b", "a"],
                                "total": [1, 5, 3, 3, 6, 1], "batch_id": [1, 1, 2, 2, 3, 1],
                                "committed_ms": [10, 10, 20, 21, 30, 40]})
        back = went_backwards(history, ["user"])
        assert back[["user", "batch_id", "over_batch", "was_total", "was_committed_ms"]].values.tolist() == [
            ["a", 1, 2, 3, 21]]

    def test_no_history_no_finding(self):
        """An empty history (an append-mode job) has nothing that went back."""
        assert went_backwards(pd.DataFrame(), ["user"]).empty
