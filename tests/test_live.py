"""The status line while sending: rate over the last second, lag from the last progress."""

import json

import pytest

from harness.run import live

pytestmark = pytest.mark.unit


def _record(batch_id, ends):
    return {"batchId": batch_id, "sources": [{"endOffset": json.dumps({"t": ends})}]}


def test_the_lag_is_what_was_sent_minus_what_the_last_batch_read(tmp_path):
    path = tmp_path / "progress.jsonl"
    status = live.LiveStatus(path, "t", before=2)
    assert status.line(10, 100).startswith("sent 10/100 at ") and "lag" not in status.line(10, 100)
    path.write_text(json.dumps(_record(3, {"0": 40, "1": 30})) + "\n"
                    + json.dumps(_record(4, {"0": 50, "1": 45})) + "\n" + '{"batchId": 5, "sour')
    status.read_at = float("-inf")   # as if a second had passed
    assert status.line(120, 1000).endswith(", lag 27 records (batch 4)")   # 120 + 2 - 95


def test_the_last_record_of_a_long_file_is_read_from_its_end(tmp_path):
    path = tmp_path / "progress.jsonl"
    path.write_text("".join(json.dumps(_record(i, {"0": i})) + "\n" for i in range(5000)))
    assert live.last_record(path)["batchId"] == 4999
    assert live.last_record(tmp_path / "missing.jsonl") is None
