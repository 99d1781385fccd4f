"""The recording of a job's records (workloads/records.py) and what the batch oracle takes of it
(harness/check/batch_oracle/spark_run.py): the committed batches' ranges, each record once, and
no verdict when the recording lacks one of them. Files only: the recorder against a real broker
is tests/test_recorder.py."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.check.batch_oracle import spark_run
from workloads import records


def _chunk(directory, index: int, rows: list[tuple[int, int]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    n = len(rows)
    table = pa.table({
        "key": pa.array([None] * n, pa.binary()),
        "value": pa.array([b"v%d" % o for _, o in rows], pa.binary()),
        "topic": pa.array(["t"] * n), "partition": pa.array([p for p, _ in rows], pa.int32()),
        "offset": pa.array([o for _, o in rows], pa.int64()),
        "timestamp": pa.array([o * 1000 for _, o in rows], pa.timestamp("us", tz="UTC")),
        "timestampType": pa.array([0] * n, pa.int32()),
        "headers": pa.array([None] * n, records.HEADERS)}, schema=records.SCHEMA)
    pq.write_table(table, directory / records.CHUNK.format(index))


def _account(directory, **more) -> None:
    (directory / records.STATE).write_text(json.dumps({"status": "stopped", "caught_up": True, **more}))


class TestSelect:
    def test_keeps_the_ranges_records_each_once_across_chunks(self, tmp_path):
        """A record served twice (a reconnect) counts once; records outside the ranges are left."""
        _chunk(tmp_path, 0, [(0, o) for o in range(10)] + [(1, o) for o in range(5)])
        _chunk(tmp_path, 1, [(0, o) for o in range(8, 20)] + [(1, o) for o in range(5, 9)])
        table, missing = records.select(tmp_path, [(0, 2, 15), (1, 0, 9)])
        assert missing == []
        got = list(zip(table["partition"].to_pylist(), table["offset"].to_pylist(), strict=True))
        assert got == [(0, o) for o in range(2, 15)] + [(1, o) for o in range(9)]

    def test_names_the_offsets_the_recording_lacks(self, tmp_path):
        """Offsets in a range with no recorded record are runs (partition, from, until)."""
        _chunk(tmp_path, 0, [(0, o) for o in range(3)] + [(0, 6), (1, 0)])
        _, missing = records.select(tmp_path, [(0, 0, 8), (1, 0, 2), (2, 0, 1)])
        assert missing == [(0, 3, 6), (0, 7, 8), (1, 1, 2), (2, 0, 1)]
        assert records.describe(missing[:1]) == "3 records: partition 0 offsets 3-5"


class TestRecorded:
    def test_a_record_the_batches_read_but_not_recorded_leaves_no_verdict(self, tmp_path):
        """RecordsMissing, naming the offsets, before any Spark starts: the case's check makes it
        UNKNOWN, never a verdict over other records."""
        _chunk(tmp_path / "records", 0, [(0, o) for o in range(100, 200)])
        _account(tmp_path / "records", caught_up=False, behind={"0": 5})
        with pytest.raises(spark_run.RecordsMissing, match=r"lacks 100 records: partition 0 offsets 0-99.*"
                                                              r"did not catch up"):
            spark_run.recorded(tmp_path, [(0, 0, 200)], tmp_path)

    def test_a_run_without_a_recording_is_said_so(self, tmp_path):
        with pytest.raises(spark_run.RecordsMissing, match="no recording"):
            spark_run.recorded(tmp_path, [(0, 0, 1)], tmp_path)

    def test_the_ranges_records_go_to_the_oracles_directory(self, tmp_path):
        _chunk(tmp_path / "records", 0, [(0, o) for o in range(5)])
        _account(tmp_path / "records")
        assert spark_run.recorded(tmp_path, [(0, 1, 4)], tmp_path) == 3
        assert pq.read_table(tmp_path / spark_run.RECORDS)["offset"].to_pylist() == [1, 2, 3]


class TestRecheckDirectory:
    def test_a_recheck_writes_each_oracle_under_its_own_directory(self, tmp_path):
        """Under `rechecking`, a case's oracle directory is the re-check's, not the run's."""
        case = tmp_path / "run" / "cases" / "eo"
        assert spark_run.oracle_dir(case) == case / "oracle"
        with spark_run.rechecking(tmp_path / "check" / "cases"):
            assert spark_run.oracle_dir(case) == tmp_path / "check" / "cases" / "eo" / "oracle"
        assert spark_run.oracle_dir(case) == case / "oracle"
