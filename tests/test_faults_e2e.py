"""Faults against the real stack, through the CLI: each one lands, is observed, is healed,
and the output is checked event by event afterwards.

Setup: nothing; every run starts its own Kafka, PostgreSQL and a Spark local-cluster.
"""

import json
import os
import signal
import subprocess

import psutil
import pytest

from harness.wait import wait_until
from tests.helpers import REPO, assert_nothing_left, harness_cmd, run_cli

pytestmark = pytest.mark.integration

SCENARIOS = REPO / "harness" / "scenario" / "scenarios"


def _summary(run_dir) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


class TestEveryFault:
    def test_each_kind_lands_is_observed_and_leaves_nothing_behind(self, tmp_path):
        """every_fault.toml --quick, one at-least-once case: kill-executor, pause of the broker,
        stall-sink, fail-task, network latency on Spark's Kafka path, kafka-partitions,
        kafka-retention (skipped: fail_on_data_loss = false) and fail-batch. Each is observed
        and lands in the window it aims at, the verdict holds with the deleted records counted
        apart, and no process is left running or stopped. (The full file, every kind, runs in
        tox -e bench: benchmarks/test_every_fault.py.)"""
        run_dir = tmp_path / "run"
        proc = run_cli("run", str(REPO / "tests" / "scenarios" / "every_fault.toml"), "--quick",
                       "--out", str(run_dir))
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        (case,) = _summary(run_dir)["cases"]
        missed = [f"{f['kind']}: {f.get('landed_detail') or f['detail']}" for f in case["faults"]
                  if not (f["observed"] and f["landed"])]
        assert not missed, missed
        assert len(case["faults"]) == 8 and all(f["started_s"] is not None for f in case["faults"])
        by_kind = {f["kind"]: f for f in case["faults"]}
        assert by_kind["fail-batch"]["outcome"] == "accepted"
        assert by_kind["fail-task"]["recovery"]["tasks_retried"] >= 1
        assert case["events"]["deleted_before_read"] > 0 and case["events"]["lost"] == 0, case["events"]
        assert case["verdict"]["holds"], case["verdict"]
        assert_nothing_left(run_dir)


PAUSED_BROKER = """
name = "paused"
[workload]
duration = "60s"
[workload.rate]
eps = 100
[pipeline]
window = "2s"
watermark = "1s"
[[cases]]
name = "c"
guarantee = "exactly-once"
[[faults]]
kind = "pause"
at = "1s"
target = "broker"
duration = "50s"
"""


class TestInterruptedWhilePaused:
    def test_sigint_while_the_broker_is_paused_resumes_and_stops_it(self, tmp_path):
        """Steps: pause the broker for 50 s, SIGINT the harness while it is stopped (Ctrl-C in
        the middle of a run, with the driver running). The run ends at once with 130, its
        summary says aborted and its report is written, the driver's status is not left
        'running', and no process is left, stopped or otherwise. (SIGTERM, and SIGINT without a
        paused broker: benchmarks/test_e2e_variations.py.)"""
        scenario = tmp_path / "paused.toml"
        scenario.write_text(PAUSED_BROKER)
        run_dir = tmp_path / "run"
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen(harness_cmd("run", str(scenario), "--out", str(run_dir)), env=env, cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def broker_stopped():
            assert proc.poll() is None, proc.communicate()
            pids = json.loads((run_dir / "pids.json").read_text()) if (run_dir / "pids.json").exists() else {}
            broker = [p for name, ps in pids.items() if name.startswith("kafka") for p in ps]
            return broker and all(_status(p) == psutil.STATUS_STOPPED for p in broker)

        wait_until(broker_stopped, 300, 0.2, err_msg="the broker was never paused")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=90)
        assert proc.returncode == 130, err[-3000:]
        assert _summary(run_dir)["status"] == "aborted"
        assert (run_dir / "report.html").exists(), "an aborted run gets its report too"
        status = json.loads(next(run_dir.glob("cases/*/status.json")).read_text())
        assert status["state"] != "running", "status.json still says running"
        assert_nothing_left(run_dir)


def _status(pid: int):
    try:
        return psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        return None
