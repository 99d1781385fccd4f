"""The batch oracle's session kept across a run's cases (harness/check/batch_oracle/server.py,
workloads/pipelines/oracle_server.py): each request's answer is the one a process of its own gives,
however many ran before it in the same session; a setting the session cannot take starts another;
a failed job stops it. Real Spark (local[2]), no Kafka: the records are written here."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.check.batch_oracle import server
from workloads import records
from workloads.pipelines.config import DriverConfig
from workloads.sinks import SinkContext

pytestmark = [pytest.mark.integration, pytest.mark.long_e2e, pytest.mark.minutes(1.1)]

HERE = Path(__file__).parent / "oracle_server"
COLUMNS = {"user": "STRING", "clicks": "LONG", "builds": "LONG"}


def _request(at: Path, build: str, conf: dict | None = None) -> Path:
    """A job_batch request over 30 clicks of 3 users, in `at`."""
    at.mkdir(parents=True)
    values = [json.dumps({"user": f"u{i % 3}", "page": "p", "ts": i}).encode() for i in range(30)]
    table = pa.Table.from_pydict({
        "key": [None] * 30, "value": values, "topic": ["t"] * 30, "partition": [0] * 30,
        "offset": list(range(30)), "timestamp": [0] * 30, "timestampType": [0] * 30,
        "headers": [None] * 30}, schema=records.SCHEMA)
    pq.write_table(table, at / "records.parquet")
    config = DriverConfig(
        app_name="oracle-server-test", master="local[2]", spark_conf={"spark.sql.shuffle.partitions": "2",
                                                                      **(conf or {})},
        jars=[], bootstrap_servers="", topic="t", checkpoint="", pipeline="custom",
        params={"job": build, "reads": "parsed", "schema": "user STRING, page STRING, ts BIGINT",
                "columns": COLUMNS, "key": ["user"], "output_mode": "update", "oracle": "batch"},
        trigger_ms=1000, sink="postgres", build="workloads.pipelines.job:build",
        sink_context=SinkContext(name="t", guarantee="exactly-once", columns=COLUMNS, workdir=str(at)),
        import_paths=[str(HERE)])
    config.write(at / "driver.json")
    request = {"driver": "driver.json", "records": "records.parquet", "record_count": 30,
               "ranges": [[0, 0, 30]], "runs": [{"name": "all", "drop": None}], "out": ".",
               "imports": [str(HERE)], "jars": []}
    (at / "request.json").write_text(json.dumps(request))
    return at / "request.json"


def _answer(request: Path) -> pd.DataFrame:
    return pd.read_parquet(request.parent / "all.parquet").sort_values("user").reset_index(drop=True)


def _served(holder: server.Serving, request: Path) -> int:
    return holder.run(request, request.parent / "batch.log", [str(HERE)], True, 300)[0]


def test_each_request_answers_as_a_process_of_its_own_would(tmp_path):
    """In one run's session, in turn:
    - two requests of a job that keeps a running total in a Python worker's dict: each gives
      what a process of its own gives (10 clicks a user, the module built once since it was
      imported), in one session. Without fresh Python workers the second counted the first's
      clicks too (20); without a fresh import of the user's module it counted two builds;
    - a request with spark.sql.extensions, which is fixed when a session starts: run in a
      session started for it, with the same answer;
    - a job that fails: code 1, its reason in its log, the session stopped;
    and at the end nothing is left running."""
    import psutil

    # what a process of its own answers (job_batch.py alone: 30 clicks, 10 a user, one build)
    expected = pd.DataFrame({"user": ["u0", "u1", "u2"], "clicks": [10, 10, 10], "builds": [1, 1, 1]})
    pids: set[int] = set()
    with server.serving(None, tmp_path / "services") as holder:
        for name in ("first", "second"):
            request = _request(tmp_path / name, "counting_job:totals_in_a_dict")
            assert _served(holder, request) == 0, (request.parent / "batch.log").read_text()[-2000:]
            pd.testing.assert_frame_equal(_answer(request), expected)
            assert holder.server is not None
            pids |= set(holder.server.pids())
        assert holder.started == 1, "the two requests did not share one session"

        ext = _request(tmp_path / "ext", "counting_job:totals_in_a_dict",
                       {"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension"})
        assert _served(holder, ext) == 0, (ext.parent / "batch.log").read_text()[-2000:]
        assert holder.started == 2, "a static setting did not start another session"
        pd.testing.assert_frame_equal(_answer(ext), expected)
        assert holder.server is not None
        pids |= set(holder.server.pids())

        bad = _request(tmp_path / "bad", "counting_job:fails")
        assert _served(holder, bad) == 1
        assert "this job fails on purpose" in (bad.parent / "batch.log").read_text()
        assert holder.server is None, "a failed job left its session running"
    assert pids and not [p for p in pids if psutil.pid_exists(p)], "a server's process outlived the run"
