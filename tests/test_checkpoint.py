"""Reading Spark's offset and commit logs (files written here in Spark's format)."""

import json

from harness.check.checkpoint import committed_watermark, read_batches


def _write_batch(cp, batch_id, watermark, ends, committed=True, topic="t"):
    (cp / "offsets").mkdir(parents=True, exist_ok=True)
    (cp / "commits").mkdir(parents=True, exist_ok=True)
    meta = {"batchWatermarkMs": watermark, "batchTimestampMs": 0, "conf": {}}
    source = {topic: {str(p): o for p, o in ends.items()}}
    (cp / "offsets" / str(batch_id)).write_text(f"v1\n{json.dumps(meta)}\n{json.dumps(source)}")
    if committed:
        (cp / "commits" / str(batch_id)).write_text('v1\n{"nextBatchWatermarkMs":0}')


class TestReadBatches:
    def test_batches_come_in_id_order_with_offsets_and_watermarks(self, tmp_path):
        """Batch 10 sorts after batch 2 (numeric, not lexical) and carries its end offsets."""
        _write_batch(tmp_path, 10, 500, {0: 9, 1: 7})
        _write_batch(tmp_path, 2, 100, {0: 3, 1: 1})
        batches = read_batches(tmp_path, "t")
        assert [b.batch_id for b in batches] == [2, 10]
        assert batches[1].end_offsets == {0: 9, 1: 7} and batches[1].watermark_ms == 500

    def test_a_batch_without_commit_file_is_not_committed(self, tmp_path):
        """An offsets entry without a commits entry is a batch that will run again."""
        _write_batch(tmp_path, 0, 0, {0: 1})
        _write_batch(tmp_path, 1, 900, {0: 2}, committed=False)
        assert [b.committed for b in read_batches(tmp_path, "t")] == [True, False]
        assert committed_watermark(tmp_path, "t") == 0

    def test_a_damaged_offsets_file_is_no_batch(self, tmp_path):
        """corrupt-checkpoint's garbage, truncation or emptying of offsets/N: the checker reads
        the batches around it (it stopped the whole check with a UnicodeDecodeError, exit 3)."""
        for n in range(4):
            _write_batch(tmp_path, n, 0, {0: n + 1})
        (tmp_path / "offsets" / "1").write_bytes(bytes([0x96, 0xff, 0x00, 0x41]) * 16)
        (tmp_path / "offsets" / "2").write_text("v1\n{\"batchWat")
        (tmp_path / "offsets" / "3").write_bytes(b"")
        assert [b.batch_id for b in read_batches(tmp_path, "t")] == [0]

    def test_a_missing_checkpoint_has_no_batches(self, tmp_path):
        """Before the first batch there is nothing to read, and no committed watermark."""
        assert read_batches(tmp_path / "nope", "t") == []
        assert committed_watermark(tmp_path / "nope", "t") == -1


class TestCommittedThroughput:
    def test_rows_and_commit_times_give_the_rate_without_progress_reports(self, tmp_path):
        """Each committed batch's rows (end minus start offsets over partitions) and its commit
        file's time: the rate over a window counts the batches committed inside it only."""
        import os

        from harness.metrics.flow import committed_eps

        (tmp_path / "sources" / "0").mkdir(parents=True)
        (tmp_path / "sources" / "0" / "0").write_text('v1\n{"t":{"0":0,"1":0}}')
        start_ms = 1_700_000_000_000
        for batch_id, ends, at_s in [(0, {0: 100, 1: 50}, 0.5), (1, {0: 400, 1: 350}, 1.5),
                                     (2, {0: 900, 1: 850}, 2.5), (3, {0: 1000, 1: 900}, 9.0)]:
            _write_batch(tmp_path, batch_id, 0, ends)
            at_ns = int((start_ms + at_s * 1000) * 1_000_000)
            os.utime(tmp_path / "commits" / str(batch_id), ns=(at_ns, at_ns))
        _write_batch(tmp_path, 4, 0, {0: 5000, 1: 5000}, committed=False)
        batches = read_batches(tmp_path, "t")
        assert [b.rows for b in batches[:4]] == [150, 600, 1000, 150]
        assert batches[1].committed_ms == start_ms + 1500 and batches[4].committed_ms is None
        # the window [1 s, 3 s): batches 1 and 2, 1,600 records over 2 s
        assert committed_eps(batches, start_ms, [1, 3]) == 800.0
        assert committed_eps(batches, start_ms, [4, 8]) is None


    def test_a_partition_added_since_the_previous_batch_is_read_from_zero(self, tmp_path):
        """kafka-partitions adds partition 2 after batch 0: batch 1 reads it from offset 0, its
        earliest, as Spark does; its rows count those records too (check/batch_reads.py's rule)."""
        (tmp_path / "sources" / "0").mkdir(parents=True)
        (tmp_path / "sources" / "0" / "0").write_text('v1\n{"t":{"0":0,"1":0}}')
        _write_batch(tmp_path, 0, 0, {0: 100, 1: 50})
        _write_batch(tmp_path, 1, 0, {0: 200, 1: 90, 2: 48})
        batches = read_batches(tmp_path, "t")
        assert batches[1].start_offsets == {0: 100, 1: 50}
        assert batches[1].rows == 100 + 40 + 48


class TestJournal:
    """Spark keeps the last 100 batches of its logs; the harness's journal keeps the rest."""

    def test_the_batches_spark_purged_come_from_the_journal(self, tmp_path):
        import os
        import shutil

        from harness.check.checkpoint import journal_of, read_queries
        from harness.run.journal import Journal

        cp = tmp_path / "checkpoint"
        for n in range(5):
            _write_batch(cp, n, n * 100, {0: (n + 1) * 10})
        os.utime(cp / "commits" / "1", ns=(1_700_000_000_000_000_000,) * 2)
        kept = Journal(lambda: [cp])
        kept.poll()
        for n in range(3):   # Spark's purge of everything before batch 3
            (cp / "offsets" / str(n)).unlink()
            (cp / "commits" / str(n)).unlink()
        _write_batch(cp, 5, 500, {0: 60})
        kept.poll()
        whole = read_queries([cp], "t")
        assert [b.batch_id for b in whole] == [0, 1, 2, 3, 4, 5]
        assert whole[3].start_offsets == {0: 30} and whole[3].rows == 10   # after batch 2, not the start
        assert whole[1].committed_ms == 1_700_000_000_000   # the commit's time kept with its copy
        assert (journal_of(cp) / "offsets" / "5").exists()
        # where the query is now reads only what Spark keeps
        assert [b.batch_id for b in read_batches(cp, "t")] == [3, 4, 5]
        # a batch Spark still keeps is its own, not the journal's (a commit deleted by a fault)
        (cp / "commits" / "4").unlink()
        assert not read_queries([cp], "t")[4].committed
        shutil.rmtree(journal_of(cp))
        assert [b.batch_id for b in read_queries([cp], "t")] == [3, 4, 5]
