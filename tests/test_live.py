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


class TestAReaderThatWentAway:
    """A run's progress and table go to pipes a test runner holds; killed by hand, it leaves
    them broken. The run goes on to its results (it crashed as an error, its first cases lost)."""

    class _Broken:
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

        def isatty(self):
            return False

    def test_progress_goes_quiet_on_a_broken_pipe(self):
        from workloads.progress import Progress

        progress = Progress(self._Broken())
        progress.step("case c: starting")
        progress.update("sent 10")
        progress.step("results: here")
        assert progress.gone

    def test_the_table_on_a_broken_stdout_does_not_raise(self, monkeypatch, tmp_path):
        import os
        import sys

        from harness import cli

        class Out(self._Broken):
            def fileno(self):
                return fd

        fd = os.open(tmp_path / "stdout", os.O_WRONLY | os.O_CREAT)
        monkeypatch.setattr(sys, "stdout", Out())
        cli._out("case  verdict")   # no exception
        os.close(fd)
