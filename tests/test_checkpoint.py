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
        """An offsets entry without a commits entry is a batch that will be replayed."""
        _write_batch(tmp_path, 0, 0, {0: 1})
        _write_batch(tmp_path, 1, 900, {0: 2}, committed=False)
        assert [b.committed for b in read_batches(tmp_path, "t")] == [True, False]
        assert committed_watermark(tmp_path, "t") == 0

    def test_a_missing_checkpoint_has_no_batches(self, tmp_path):
        """Before the first batch there is nothing to read, and no committed watermark."""
        assert read_batches(tmp_path / "nope", "t") == []
        assert committed_watermark(tmp_path / "nope", "t") == -1
