"""A Delta source's offsets mapped back to the topic's (workloads/delta_source.py), and the
appender's table as Delta's protocol lays it out: no Spark, no Kafka (the end-to-end run is
tests/scenarios/delta_source.toml's, in tox -e bench)."""

from __future__ import annotations

import json
from collections import namedtuple

import pyarrow.parquet as pq
import pytest

from workloads import delta_source
from workloads.delta_source import Appender, Manifest, kafka_offsets, translate_progress

pytestmark = pytest.mark.unit

Record = namedtuple("Record", "key value topic partition offset timestamp timestamp_type")


def _manifest(tmp_path) -> Manifest:
    path = tmp_path / "m.jsonl"
    lines = [{"version": 0, "file": "", "records": 0, "ends": {}},
             {"version": 1, "file": "a.parquet", "records": 5, "ends": {"0": 3, "1": 2}},
             {"version": 2, "file": "b.parquet", "records": 4, "ends": {"0": 5, "1": 4}},
             {"version": 3, "file": "c.parquet", "records": 3, "ends": {"0": 7, "1": 5}}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"version": 4, "fi')   # a cut line
    return Manifest(path)


class TestOffsets:
    """The offsets Delta 4.4's source wrote in a run (workloads/delta_source.py's docstring)."""

    def test_a_version_s_base_index_has_read_the_versions_before_it(self, tmp_path):
        m = _manifest(tmp_path)
        after = {"isStartingVersion": False}
        assert kafka_offsets({**after, "reservoirVersion": 3, "index": -1}, m) == {0: 5, 1: 4}
        assert kafka_offsets({**after, "reservoirVersion": 2, "index": 0}, m) == {0: 5, 1: 4}
        assert kafka_offsets({**after, "reservoirVersion": 1, "index": -1}, m) == {}

    def test_an_initial_snapshot_s_files_are_the_versions_in_order(self, tmp_path):
        m = _manifest(tmp_path)
        snap = {"reservoirVersion": 3, "isStartingVersion": True}
        assert kafka_offsets({**snap, "index": -1}, m) == {}
        assert kafka_offsets({**snap, "index": 0}, m) == {0: 3, 1: 2}
        assert kafka_offsets({**snap, "index": 1}, m) == {0: 5, 1: 4}
        assert kafka_offsets({**snap, "index": delta_source.END_INDEX}, m) == {0: 7, 1: 5}

    def test_a_progress_record_carries_both_forms(self, tmp_path):
        _manifest(tmp_path)
        m = tmp_path / "m.jsonl"
        end = {"sourceVersion": 1, "reservoirVersion": 3, "index": -1, "isStartingVersion": False}
        record = {"batchId": 4, "sources": [{"description": "DeltaSource[...]", "startOffset": None,
                                             "endOffset": json.dumps(end)}]}
        (source,) = translate_progress(record, "events", m)["sources"]
        assert source["endOffset"] == {"events": {"0": 5, "1": 4}} and source["deltaEndOffset"] == end
        assert source["startOffset"] is None


class TestAppender:
    def test_version_0_holds_the_schema_and_each_append_one_file_and_its_offsets(self, tmp_path):
        table = tmp_path / "case" / "source-table"
        appender = Appender("unused:9092", "events", table)
        appender.create()
        assert appender.append() == 0   # nothing read: no empty commit
        appender.add([Record(b"k", b"v%d" % i, "events", i % 2, i // 2, 1_700_000_000_000 + i, 0)
                      for i in range(5)])
        assert appender.append() == 5
        log = sorted((table / "_delta_log").iterdir())
        assert [p.name for p in log] == [f"{0:020d}.json", f"{1:020d}.json"]
        first = [json.loads(line) for line in log[0].read_text().splitlines()]
        schema = json.loads(next(a["metaData"]["schemaString"] for a in first if "metaData" in a))
        assert [f["name"] for f in schema["fields"]] == [c for c, _ in delta_source.COLUMNS]
        (add,) = [json.loads(line)["add"] for line in log[1].read_text().splitlines() if '"add"' in line]
        rows = pq.read_table(table / add["path"]).to_pylist()
        assert [(r["partition"], r["offset"]) for r in rows] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)]
        assert Manifest(delta_source.manifest_path(table)).through(1) == {0: 3, 1: 2}
        again = Appender("unused:9092", "events", table)   # a restarted appender resumes
        again.create()
        assert again.version == 1 and again.ends == {0: 3, 1: 2}


def test_hide_commit_aims_at_a_version_the_query_has_not_planned(tmp_path):
    """The newest offsets file planned through version 11: the version to hide is 12, the next
    commit, even when 11 is the newest there is (run 5573 hid 11, read already: nothing to skip)."""
    from faults.source import _planned_through

    offsets = tmp_path / "offsets"
    offsets.mkdir()
    assert _planned_through(tmp_path) == 0
    for batch, version in ((3, 9), (4, 12)):
        line = {"sourceVersion": 1, "reservoirId": "r", "reservoirVersion": version, "index": -1,
                "isStartingVersion": False}
        (offsets / str(batch)).write_text('v1\n{"batchWatermarkMs":0}\n' + json.dumps(line) + "\n")
    assert _planned_through(tmp_path) == 11


def test_copies_visible_at_one_time_are_named_once():
    from harness.findings.duplicated import _visible_at

    assert _visible_at([11.31] * 101) == ", all visible at 11.3 s"
    assert _visible_at([11.3, 11.3, 14.0]) == ", visible at 11.3 s (2 times) and 14.0 s"
    assert _visible_at([2.4, 16.1]) == ", visible at 2.4 s and 16.1 s"
    assert _visible_at([]) == ""
