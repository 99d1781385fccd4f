"""Delta Lake read through its log, on hand-made tables (the end-to-end runs write real ones)."""

import json
import os

import pandas as pd
import pytest

from harness.errors import ScenarioError
from harness.scenario import load
from workloads.sinks import SINKS, SinkContext, sink_needs
from workloads.sinks.delta import DeltaBatchSink, DeltaStreamSink, commits

pytestmark = pytest.mark.unit

COLUMNS = {"event_id": "LONG", "key": "STRING"}


def _sink(tmp_path, cls=DeltaBatchSink, guarantee="exactly-once"):
    sink = cls(SinkContext(name="t", guarantee=guarantee, columns=COLUMNS, workdir=str(tmp_path)))
    (sink.path / "_delta_log").mkdir(parents=True)
    return sink


def _part(sink, name, ids):
    path = sink.path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"event_id": ids, "key": ["a"] * len(ids)}).to_parquet(path, index=False)
    return name


def _commit(sink, version, actions, mtime_s):
    entry = sink.path / "_delta_log" / f"{version:020d}.json"
    entry.write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    os.utime(entry, (mtime_s, mtime_s))


def _add(path):
    return {"add": {"path": path, "size": 1, "modificationTime": 0, "dataChange": True}}


def test_rows_come_from_committed_versions_with_their_batch_and_time(tmp_path):
    sink = _sink(tmp_path)
    _commit(sink, 0, [{"protocol": {}}, {"metaData": {}}, {"commitInfo": {"operation": "CREATE TABLE"}}], 500)
    a = _part(sink, "part-a.parquet", [1, 2])
    b = _part(sink, "part-b.parquet", [3])
    _part(sink, "part-stray.parquet", [1, 2])        # a batch that died before its commit
    (sink.path / "part-cut.parquet").write_bytes(b"")  # a file its writer did not finish
    # Delta's streaming sink: a txn action (appId = query id, version = batch id)
    _commit(sink, 1, [{"txn": {"appId": "q", "version": 4}}, _add(a)], 1_000)
    # a foreachBatch append: the batch id in the harness's userMetadata
    _commit(sink, 2, [{"commitInfo": {"userMetadata": json.dumps({"batch_id": 5})}}, _add(b)], 2_000)
    rows = sink.read()
    assert sorted(rows["event_id"]) == [1, 2, 3]
    assert dict(zip(rows["event_id"], rows["batch_id"], strict=True)) == {1: 4, 2: 4, 3: 5}
    assert dict(zip(rows["event_id"], rows["committed_ms"], strict=True)) == {1: 1_000_000, 2: 1_000_000,
                                                                              3: 2_000_000}
    assert sink.report() == {"versions": 3, "files_in_log": 2, "files_on_disk": 4, "files_outside_log": 2,
                             "rows_outside_log": 2, "files_unreadable": 1}


def test_a_removed_file_is_no_longer_read_and_encoded_paths_are_decoded(tmp_path):
    sink = _sink(tmp_path)
    a = _part(sink, "day=1 2/part-a.parquet", [1])
    b = _part(sink, "part-b.parquet", [2])
    _commit(sink, 0, [_add(a.replace(" ", "%20")), _add(b)], 1_000)
    _commit(sink, 1, [{"remove": {"path": b, "dataChange": True}}], 2_000)
    assert list(sink.read()["event_id"]) == [1]
    assert [c.version for c in commits(sink.path)] == [0, 1]


def test_a_table_without_commits_reads_empty_with_the_output_columns(tmp_path):
    sink = _sink(tmp_path, DeltaStreamSink)
    (sink.path / "_delta_log" / "00000000000000000000.crc").write_text("{}")   # not a commit
    rows = sink.read()
    assert rows.empty and list(rows.columns) == [*COLUMNS, "batch_id", "committed_ms"]


def test_each_way_gives_the_guarantees_it_can_and_needs_delta_on_the_driver():
    assert SINKS["delta"].guarantees == ("exactly-once",)
    assert set(SINKS["delta_batch"].guarantees) == {"at-most-once", "at-least-once", "exactly-once"}
    for name in ("delta", "delta_batch", "custom"):
        jvm, conf = sink_needs(name)
        assert jvm == ("delta",) and "DeltaSparkSessionExtension" in conf["spark.sql.extensions"]
    assert sink_needs("postgres") == ((), {})
    with pytest.raises(ValueError, match="exactly-once"):
        DeltaStreamSink(SinkContext(name="t", guarantee="at-least-once", columns=COLUMNS, workdir="."))


def test_the_streaming_sink_refuses_at_least_once_with_the_reason(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text('name = "s"\n[workload]\nduration = "1s"\n[workload.rate]\neps = 10\n'
                        '[pipeline]\nkind = "passthrough"\n'
                        '[[cases]]\nname = "d"\nguarantee = "at-least-once"\nsink = "delta"\n')
    with pytest.raises(ScenarioError, match=r'cases\[0\]\.guarantee.*delta_batch'):
        load(scenario)


def test_the_newest_txn_version_of_the_sink_s_app_id_is_found_newest_file_first(tmp_path):
    """What the exactly-once foreachBatch sink asks before writing: has Delta seen this batch?
    (A batch it has seen is run into `noop`, since Delta would skip it unread and Spark 4.1+
    fails a stateful query whose foreachBatch leaves partitions unread.)"""
    from workloads.sinks.delta import txn_version

    sink = _sink(tmp_path)
    assert txn_version(sink.path, "t") is None
    _commit(sink, 0, [{"commitInfo": {"operation": "CREATE TABLE"}}], 500)
    _commit(sink, 1, [{"txn": {"appId": "t", "version": 3}}, _add("a.parquet")], 1_000)
    _commit(sink, 2, [{"txn": {"appId": "other", "version": 9}}, _add("b.parquet")], 2_000)
    _commit(sink, 3, [{"txn": {"appId": "t", "version": 4}}, _add("c.parquet")], 3_000)
    assert txn_version(sink.path, "t") == 4 and txn_version(sink.path, "other") == 9
