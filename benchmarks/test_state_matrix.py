"""Spark's state and checkpoint settings side by side (issue 49, docs/state.md): the session
pipeline under state faults, once per state store, changelog and checkpoint format Spark takes.

Setup: nothing; the run starts its own Kafka, PostgreSQL and Spark local-cluster (FUSE for the
maintenance kill). Steps: `python -m harness run benchmarks/scenarios/state_matrix.toml` (five
cases: hdfs, rocksdb, rocksdb with format 2, rocksdb with a changelog, and with both), each
under fail-task after the state commit, kill-driver and kill-executor in the maintenance thread.
Checks: every case ran with the settings its name says (summary.json's `state_settings`, and the
SparkConf its driver ran with), no case FAILed, and the table shows the settings side by side.
Records each case's verdict, faults seen and figures (extra_info), never asserting speed. A full
bench only (`tox -e bench`, not --quick): its [quick] runs took 25 and 36 minutes on 2 shared
cores (docs/state.md, "The bench's matrix"). The two checkpoint-format-2 cases are UNKNOWN
there: the maintenance kill does not see RocksDB's format-2 maintenance yet (docs/state.md).
"""

from __future__ import annotations

import json

import pytest

from tests.helpers import REPO, assert_nothing_left, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.e2e_variation]

SCENARIO = REPO / "benchmarks" / "scenarios" / "state_matrix.toml"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
FORMAT = "spark.sql.streaming.stateStore.checkpointFormatVersion"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"


@pytest.mark.benchmark(group="state-matrix")
def test_each_state_setting_runs_under_state_faults(benchmark, tmp_path):
    run_dir = tmp_path / "run"
    proc = benchmark.pedantic(lambda: run_cli("run", str(SCENARIO), "--out", str(run_dir), timeout=3600),
                              rounds=1, iterations=1)
    summary = json.loads((run_dir / "summary.json").read_text())
    cases = {c["name"]: c for c in summary["cases"]}
    assert len(cases) == 5, (list(cases), proc.stdout[-3000:] + proc.stderr[-3000:])
    for name, case in cases.items():
        settings = case["state_settings"]
        ran = json.loads((run_dir / "cases" / name / "spark-conf.json").read_text())
        assert ("rocksdb" in name) == ran.get(PROVIDER, "").endswith("RocksDBStateStoreProvider"), (name, ran)
        assert ("changelog" in name) == (ran.get(CHANGELOG) == "true") == settings["changelog"], (name, ran)
        assert ("ckpt2" in name) == (ran.get(FORMAT) == "2") == (settings["checkpoint_format"] == 2), name
        # a FAIL is a finding about Spark (or the harness): said, never hidden as a speed number
        assert case["verdict"]["status"] != "FAIL", (name, case["verdict"], case.get("findings"))
        benchmark.extra_info.update({
            f"{name}.verdict": case["verdict"]["status"],
            f"{name}.faults_seen": sum(f["observed"] for f in case["faults"]),
            f"{name}.processed_eps": case["throughput_eps"].get("processed"),
            f"{name}.recovery_s": [f.get("recovery", {}).get("first_batch_after_s") for f in case["faults"]]})
    assert "state" in proc.stdout and "rocksdb+changelog ckpt2" in proc.stdout, proc.stdout[-3000:]
    assert_nothing_left(run_dir)
