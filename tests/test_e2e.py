"""End to end through the CLI, against the real stack it starts itself.

Setup: nothing; each run starts its own Kafka broker, PostgreSQL server and Spark
driver with a local-cluster of two executor processes. Steps: run (or interrupt) the
CLI, then read the run directory and the process table.
"""

import json

import pytest

from harness.results import summary
from harness.scenario import load
from tests.helpers import REPO, assert_nothing_left, run_cli

pytestmark = pytest.mark.integration

SMOKE = REPO / "workloads" / "scenarios" / "smoke.toml"   # the old path: a link that must keep working


_assert_nothing_left = assert_nothing_left


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("e2e") / "smoke"
    proc = run_cli("run", str(SMOKE), "--quick", "--out", str(run_dir))
    return proc, run_dir


@pytest.mark.minutes(1.5)
class TestSmokeScenario:
    def test_the_run_exits_0_and_prints_the_table(self, smoke_run):
        """Every verdict holds, so the exit code is 0; the table and run directory are shown."""
        proc, run_dir = smoke_run
        assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
        assert "PASS" in proc.stdout and str(run_dir) in proc.stderr

    def test_exactly_once_holds_with_nothing_lost_or_duplicated(self, smoke_run):
        """The exactly-once Postgres sink matches ground truth event for event."""
        _, run_dir = smoke_run
        case = json.loads((run_dir / "summary.json").read_text())["cases"][0]
        events = case["events"]
        assert case["guarantee"] == "exactly-once" and case["verdict"]["holds"], case["verdict"]
        assert events["lost"] == 0 and events["duplicated"] == 0 and events["unexpected"] == 0, events
        assert events["expected"] + events["dropped_late"] == events["produced"] > 0, events

    def test_the_summary_follows_the_schema(self, smoke_run):
        """summary.json validates against harness/schema/summary.schema.json."""
        _, run_dir = smoke_run
        summary.validate(json.loads((run_dir / "summary.json").read_text()))

    def test_the_run_directory_describes_the_run(self, smoke_run):
        """Scenario copy, ground truth, sink contents, progress and service logs are kept."""
        _, run_dir = smoke_run
        case = run_dir / "cases" / "exactly-once-postgres"
        for path in ["scenario.toml", "harness.log", "services/kafka/server.log",
                     "services/postgres/postgres.log"]:
            assert (run_dir / path).exists(), path
        for name in ["truth/part-0000.parquet", "truth/control.parquet", "generator.json", "sink.parquet",
                     "progress.jsonl", "spark-driver.log", "checkpoint", "spark-conf.json"]:
            assert (case / name).exists(), name
        # every value the run used: the --quick overrides applied
        effective = json.loads((run_dir / "scenario.effective.json").read_text())
        assert effective == json.loads(json.dumps(load(SMOKE, quick=True).to_dict()))
        assert effective["quick"] is True
        # the Spark configuration the driver actually ran with: the driver's, the harness's, the sink's
        conf = json.loads((case / "spark-conf.json").read_text())
        assert conf["spark.sql.shuffle.partitions"] == "2"
        assert conf["spark.master"].startswith("local-cluster")
        assert "-XX:TieredStopAtLevel=1" in conf["spark.executor.extraJavaOptions"]
        page = (run_dir / "report.html").read_text()
        assert '<table id="comparison">' in page and page.count("<svg ") >= 4

    def test_the_driver_and_two_executors_were_processes_of_their_own(self, smoke_run):
        """local-cluster[2,1,1024]: the summary names the driver's pid and two other executor pids."""
        _, run_dir = smoke_run
        pids = json.loads((run_dir / "summary.json").read_text())["cases"][0]["spark_pids"]
        assert len(set(pids["executors"])) == 2 and pids["driver"] not in pids["executors"]

    def test_the_console_and_the_log_carry_no_client_noise(self, smoke_run):
        """librdkafka's warm-up warnings stay off the console, and the broker's readiness
        probing is not logged as errors."""
        proc, run_dir = smoke_run
        assert "%4|" not in proc.stderr and "GETPID" not in proc.stderr, proc.stderr[-2000:]
        log = (run_dir / "harness.log").read_text()
        errors = [line for line in log.splitlines() if " ERROR " in line]
        assert not errors, "\n".join(errors[:5])
        assert "threads still running at exit" not in log, "a thread outlived the run"

    def test_no_process_is_left_after_a_normal_run(self, smoke_run):
        """Kafka, Postgres, the driver and its executors are all gone."""
        _assert_nothing_left(smoke_run[1])

    def test_check_on_a_copy_of_the_run_gives_its_verdicts(self, smoke_run, tmp_path):
        """`python -m harness check` on a copy of the run directory at another, deeper path, with
        every service of the run stopped: the built-in oracle again over the saved truth and sink
        rows, each case's verdict and counts the run's, exit 0; summary.json as the run wrote it."""
        import shutil

        proc, run_dir = smoke_run
        assert proc.returncode == 0, proc.stderr[-2000:]
        copy = tmp_path / "elsewhere" / "deeper" / "smoke"
        shutil.copytree(run_dir, copy, symlinks=True)
        before = (copy / "summary.json").read_bytes()
        again = run_cli("check", str(copy))
        assert again.returncode == 0, again.stdout + again.stderr[-3000:]
        (out,) = (copy / "check").iterdir()
        ran = {c["name"]: c for c in json.loads(before)["cases"]}
        for case in json.loads((out / "check.json").read_text())["cases"]:
            assert case["agree"] and case["rechecked"] and case["recheck"] == "PASS", case
            assert case["events"] == ran[case["case"]]["events"], case
        assert (copy / "summary.json").read_bytes() == before
