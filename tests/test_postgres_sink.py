"""The foreachBatch sink's delivery modes, against the real PostgreSQL server.

Steps: write a batch, write the same batch id again (what Spark does when it runs a
batch again after a restart), read the table back as the checker does.
"""

import pytest

from workloads.pipelines import tumbling_count
from workloads.sinks import SinkContext
from workloads.sinks.postgres import PostgresSink

pytestmark = pytest.mark.integration

ROWS = [("k1", 0, 5000, 3, 30), ("k2", 0, 5000, 1, 7)]


def _ctx(postgres, mode, name):
    return SinkContext(name=f"sink_test_{name}", guarantee=mode, columns=tumbling_count.COLUMNS,
                       workdir="/nonexistent", postgres_url=postgres.url)


def _sink(postgres, mode, name):
    sink = PostgresSink(_ctx(postgres, mode, name))
    sink.setup()
    return sink


class TestPostgresSink:
    def test_exactly_once_skips_a_batch_run_again(self, postgres):
        """The batch id is committed with the rows, so batch 0 run again writes nothing."""
        sink = _sink(postgres, "exactly-once", "eo")
        sink.write_rows(ROWS, 0)
        sink.write_rows(ROWS, 0)
        rows = sink.read()
        assert sorted(rows["key"]) == ["k1", "k2"] and (rows["batch_id"] == 0).all()

    def test_at_least_once_writes_a_batch_run_again_twice(self, postgres):
        """Plain INSERTs: the batch run again lands twice, which the checker counts as duplicates."""
        sink = _sink(postgres, "at-least-once", "alo")
        sink.write_rows(ROWS, 0)
        sink.write_rows(ROWS, 0)
        rows = sink.read()
        assert sorted(rows["key"]) == ["k1", "k1", "k2", "k2"]

    def test_each_row_carries_the_commit_time_of_its_batch(self, postgres):
        """Commit time is what latency is measured to; empty batches are logged too."""
        sink = _sink(postgres, "exactly-once", "times")
        sink.write_rows([], 0)
        sink.write_rows(ROWS[:1], 1)
        rows = sink.read()
        assert len(rows) == 1 and rows["committed_ms"].iloc[0] > 1_700_000_000_000

    def test_an_unknown_guarantee_is_refused(self, postgres):
        """A guarantee this sink has no mode for: saying so beats silently writing."""
        with pytest.raises(ValueError, match="exactly-twice"):
            PostgresSink(_ctx(postgres, "exactly-twice", "t"))

    def test_read_gives_the_output_columns_then_batch_and_commit_time(self, postgres):
        """read() is what the checker sees: the pipeline's columns, batch_id, committed_ms."""
        sink = _sink(postgres, "at-least-once", "cols")
        sink.write_rows(ROWS, 3)
        assert list(sink.read().columns) == [*tumbling_count.COLUMNS, "batch_id", "committed_ms"]

    def test_an_arrow_batch_reads_back_as_the_same_rows_written_one_by_one(self, postgres):
        """write() sends the batch as Arrow through COPY's CSV: strings with commas, quotes and
        newlines, an empty string beside a null, a double's every bit, a boolean and a null
        long come back as the row-by-row COPY writes them."""
        import pyarrow as pa

        columns = {"s": "STRING", "n": "LONG", "d": "DOUBLE", "b": "BOOLEAN"}
        rows = [('a,"b"\nc', 1, 0.1 * 3, True), ("", None, 1e-320, False),
                (None, -5, 123456789.12345679, None)]
        read = []
        table = pa.table({c: list(v) for c, v in zip(columns, zip(*rows, strict=True), strict=True)})
        for name, batch in (("arrow", table), ("rows", rows)):
            ctx = SinkContext(name=f"sink_test_{name}", guarantee="exactly-once", columns=columns,
                              workdir="/nonexistent", postgres_url=postgres.url)
            sink = PostgresSink(ctx)
            sink.setup()
            sink.write_rows(batch, 0)
            read.append(sink.read()[list(columns)].astype(object).where(lambda f: f.notna(), None)
                        .itertuples(index=False, name=None))
        arrow, one_by_one = (sorted(map(tuple, r), key=repr) for r in read)
        assert arrow == one_by_one == sorted(rows, key=repr)
