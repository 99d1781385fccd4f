"""Spark's Parquet file sink read through its _spark_metadata log, on hand-made files."""

import json
import os

import pandas as pd
import pytest

from workloads.sinks import SinkContext
from workloads.sinks.files import ParquetFileSink

pytestmark = pytest.mark.unit

COLUMNS = {"event_id": "LONG", "key": "STRING"}


def _sink(tmp_path):
    sink = ParquetFileSink(SinkContext(name="out", guarantee="exactly-once", columns=COLUMNS,
                                       workdir=str(tmp_path)))
    sink.setup()
    return sink


def _part(sink, name, ids):
    path = sink.path / name
    pd.DataFrame({"event_id": ids, "key": ["a"] * len(ids)}).to_parquet(path, index=False)
    return path


def _log(sink, name, paths, mtime_s):
    log = sink.path / "_spark_metadata"
    log.mkdir(exist_ok=True)
    lines = ["v1"] + [json.dumps({"path": f"file://{p}", "size": 1, "isDir": False, "modificationTime": 0,
                                  "blockReplication": 1, "blockSize": 1, "action": "add"}) for p in paths]
    (log / name).write_text("\n".join(lines))
    os.utime(log / name, (mtime_s, mtime_s))


def test_only_files_in_the_log_are_read_with_their_batch_and_commit_time(tmp_path):
    sink = _sink(tmp_path)
    a, b = _part(sink, "part-a.parquet", [1, 2]), _part(sink, "part-b.parquet", [3])
    _part(sink, "part-stray.parquet", [1, 2])      # a batch written again after a crash
    _log(sink, "0", [a], 1_000)
    _log(sink, "1", [b], 2_000)
    rows = sink.read()
    assert sorted(rows["event_id"]) == [1, 2, 3]
    assert dict(zip(rows["event_id"], rows["batch_id"], strict=True)) == {1: 0, 2: 0, 3: 1}
    assert set(rows["committed_ms"]) == {1_000_000, 2_000_000}
    assert sink.report() == {"files_in_log": 2, "files_on_disk": 3, "files_outside_log": 1,
                             "rows_outside_log": 2, "files_unreadable": 0}


def test_a_compacted_log_keeps_each_file_in_its_first_batch(tmp_path):
    sink = _sink(tmp_path)
    a, b = _part(sink, "part-a.parquet", [1]), _part(sink, "part-b.parquet", [2])
    _log(sink, "0", [a], 1_000)
    _log(sink, "9.compact", [a, b], 9_000)
    rows = sink.read()
    assert dict(zip(rows["event_id"], rows["batch_id"], strict=True)) == {1: 0, 2: 9}


def test_it_is_exactly_once_only(tmp_path):
    with pytest.raises(ValueError, match="exactly-once"):
        ParquetFileSink(SinkContext(name="out", guarantee="at-least-once", columns=COLUMNS,
                                    workdir=str(tmp_path)))
