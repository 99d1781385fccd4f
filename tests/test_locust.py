"""workloads/generator/locustfile.py: the generator as a Locust load test, headless and distributed,
against a real Kafka broker (the session fixture `kafka`)."""

from __future__ import annotations

import csv
import importlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from harness import procs
from harness.net import free_port
from workloads import generator
from workloads.errors import Problem
from workloads.generator import plan as events
from workloads.generator import shapes
from workloads.generator.keys import KeyChooser

REPO = Path(__file__).resolve().parent.parent
LOCUSTFILE = "workloads/generator/locustfile.py"
EPS, DURATION_S, PARTITIONS = 2000, 3, 2
RUN_TIMEOUT_S = 45   # start (~1 s) + lead (3 s) + schedule + flush, with room for a slow machine


@pytest.fixture(scope="module")
def locustfile():
    """workloads.generator.locustfile imported without Locust's gevent monkey-patching of the test process."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LOCUST_SKIP_MONKEY_PATCH", "1")
        return importlib.import_module("workloads.generator.locustfile")


def _scenario(tmp_path: Path, topic: str) -> Path:
    path = tmp_path / "scenario.toml"
    path.write_text(f'[workload]\ntopic = "{topic}"\npartitions = {PARTITIONS}\nduration = "{DURATION_S}s"\n'
                    f"seed = 5\n\n[workload.rate]\neps = {EPS}\n")
    return path


class _Locusts:
    """The Locust processes of one test, each in its own session; on exit every one that
    still runs is killed with its process group, and reaped."""

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.procs: dict[str, psutil.Popen] = {}
        self.env = {k: v for k, v in os.environ.items() if k != "LOCUST_SKIP_MONKEY_PATCH"}
        self.env["PYTHONPATH"] = str(REPO)

    def start(self, name: str, *args: str) -> None:
        cmd = [sys.executable, "-m", "locust", "-f", LOCUSTFILE, *args]
        self.procs[name] = procs.spawn(cmd, self.log_dir / f"{name}.log", env=self.env, cwd=REPO)

    def wait(self, timeout_s: float) -> dict[str, int]:
        """Every process's exit code; fails naming those still running at the deadline."""
        deadline = time.monotonic() + timeout_s
        codes = {}
        for name, proc in self.procs.items():
            try:
                codes[name] = proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except psutil.TimeoutExpired:
                pytest.fail(f"locust {name} still runs after {timeout_s} s:\n{self.log(name)[-3000:]}")
        return codes

    def log(self, name: str) -> str:
        return (self.log_dir / f"{name}.log").read_text(errors="replace")

    def __enter__(self) -> _Locusts:
        return self

    def __exit__(self, *exc) -> None:
        for proc in reversed(self.procs.values()):
            procs.kill_group(proc.pid)   # the group leader's pid is the group id (start_new_session)
            try:
                proc.wait(timeout=10)
            except psutil.TimeoutExpired:
                pass
        alive = [name for name, proc in self.procs.items() if procs.alive(proc.pid, proc.create_time())]
        assert not alive, f"locust processes left alive: {alive}"


def _common(kafka, scenario: Path, truth_dir: Path, csv_prefix: Path) -> list[str]:
    return ["--headless", "--scenario", str(scenario), "--bootstrap-servers", kafka.bootstrap_servers,
            "--truth-dir", str(truth_dir), "--csv", str(csv_prefix), "--loglevel", "INFO"]


def _stats_events(csv_prefix: Path) -> int:
    """Events in Locust's final stats: requests x average size of the kafka/produce row."""
    with open(f"{csv_prefix}_stats.csv") as f:
        row = next(r for r in csv.DictReader(f) if (r["Type"], r["Name"]) == ("kafka", "produce"))
    return round(int(row["Request Count"]) * float(row["Average Content Size"]))


class TestWorkloadShape:
    def test_holds_one_user_per_generator_process_while_the_shape_runs(self, locustfile):
        """Two seconds into a five-second workload, three generator processes are three users."""
        shape = locustfile.WorkloadShape(shapes.Bounded(shapes.Constant(10), 5), users=3,
                                         start_ms=time.time_ns() // 1_000_000 - 2000)
        assert shape.tick() == (3, 3)

    def test_holds_the_users_before_the_schedule_starts(self, locustfile):
        """Before the origin, the run is starting: the users are held, not ended."""
        shape = locustfile.WorkloadShape(shapes.Bounded(shapes.Constant(10), 5), users=2,
                                         start_ms=time.time_ns() // 1_000_000 + 60_000)
        assert shape.tick() == (2, 2)

    def test_ends_the_locust_run_when_the_workload_ends(self, locustfile):
        """Past the duration, tick() is None, so Locust stops."""
        shape = locustfile.WorkloadShape(shapes.Bounded(shapes.Constant(10), 5), users=1,
                                         start_ms=time.time_ns() // 1_000_000 - 5000)
        assert shape.tick() is None


class TestMerge:
    def test_refuses_a_run_with_a_missing_share(self, locustfile, tmp_path):
        """A run whose worker 1 of 2 wrote no report is not one run's truth."""
        (tmp_path / "report-0000.json").write_text(json.dumps({"share": [0, 2]}))
        with pytest.raises(Problem, match=r"shares \[1\] of 2"):
            locustfile.merge(tmp_path)


class TestLocustRun:
    def test_headless_single_process_sends_every_planned_event_once(self, kafka, locustfile, tmp_path):
        """Setup: a 2-partition topic; 2,000 events/s for 3 s from an explicit --start-ms.
        Steps: one headless Locust process; then the truth directory.
        Every planned event is in the truth once, acknowledged, and counted in Locust's stats."""
        topic = "locust-single"
        generator.create_topic(kafka.bootstrap_servers, topic, PARTITIONS)
        scenario, truth_dir, csv_prefix = _scenario(tmp_path, topic), tmp_path / "truth", tmp_path / "stats"
        start_ms = time.time_ns() // 1_000_000 + 4000
        with _Locusts(tmp_path) as run:
            run.start("local", *_common(kafka, scenario, truth_dir, csv_prefix), "--start-ms", str(start_ms))
            codes = run.wait(RUN_TIMEOUT_S)
        assert codes == {"local": 0}, run.log("local")[-3000:]

        truth, report = locustfile.merge(truth_dir)
        planned = shapes.expected_count(locustfile.load_spec(scenario).shape)
        assert planned == EPS * DURATION_S
        assert np.array_equal(truth["event_id"], np.arange(planned)), \
            f"{len(truth):,} rows, {truth['event_id'].nunique():,} distinct ids for {planned:,} planned"
        assert (truth["offset"] >= 0).all(), f"{int((truth['offset'] < 0).sum())} events not acknowledged"
        assert not truth.duplicated(["partition", "offset"]).any(), "two events at one Kafka offset"
        assert (report["start_ms"], report["events"], report["failed"]) == (start_ms, planned, 0)
        assert _stats_events(csv_prefix) == planned

    @pytest.mark.long_e2e   # a master and two workers, about 12 s: tox -e e2e
    def test_master_and_two_workers_send_the_single_process_plan(self, kafka, locustfile, tmp_path):
        """Setup: a 2-partition topic; 2,000 events/s for 3 s.
        Steps: a headless master expecting 2 workers, 2 workers; then both shares merged.
        The merged truth is plan_all(spec, start_ms) in (event_id, key, event_time_ms, partition):
        the workers shared the master's start_ms and each sent its share, once."""
        topic = "locust-distributed"
        generator.create_topic(kafka.bootstrap_servers, topic, PARTITIONS)
        scenario, truth_dir, csv_prefix = _scenario(tmp_path, topic), tmp_path / "truth", tmp_path / "stats"
        port = str(free_port())
        with _Locusts(tmp_path) as run:
            run.start("master", *_common(kafka, scenario, truth_dir, csv_prefix), "--master",
                      "--expect-workers", "2", "--master-bind-host", "127.0.0.1", "--master-bind-port", port)
            for name in ("worker-a", "worker-b"):
                run.start(name, "--worker", "--master-host", "127.0.0.1", "--master-port", port)
            codes = run.wait(RUN_TIMEOUT_S)
        assert codes == {"master": 0, "worker-a": 0, "worker-b": 0}, run.log("master")[-3000:]

        reports = [json.loads(p.read_text()) for p in sorted(truth_dir.glob("report-*.json"))]
        assert [r["share"] for r in reports] == [[0, 2], [1, 2]]
        assert reports[0]["start_ms"] == reports[1]["start_ms"], "the workers followed different clocks"
        truth, report = locustfile.merge(truth_dir)
        spec = locustfile.load_spec(scenario)
        plan = events.plan_all(spec, report["start_ms"])
        assert len(truth) == len(plan) == EPS * DURATION_S, f"{len(truth):,} sent, {len(plan):,} planned"
        names = KeyChooser(spec.keys).names
        assert np.array_equal(truth["event_id"], plan.event_id)
        assert (truth["key"].to_numpy() == np.asarray(names)[plan.key]).all()
        assert np.array_equal(truth["event_time_ms"], plan.event_time_ms)
        assert np.array_equal(truth["partition"], plan.partition)
        assert (truth["offset"] >= 0).all()
        assert (report["processes"], report["events"], report["failed"]) == (2, len(plan), 0)
        assert _stats_events(csv_prefix) == len(plan), "the master's stats miss some workers' events"
