"""End-to-end variations of what `tox -e test` checks once: each guarantee under a replay,
both signals, every fault kind, the gallery of real sink bugs, the hunt. They run in
`tox -e bench` (not with --quick): together about half an hour.

Setup: nothing; each run starts its own Kafka, PostgreSQL and Spark local-cluster.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import psutil
import pytest

from tests.helpers import REPO, assert_nothing_left, harness_cmd, run_cli
from workloads.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.e2e_variation]

SCENARIOS = REPO / "harness" / "scenario" / "scenarios"
SMOKE = SCENARIOS / "smoke.toml"
GALLERY = REPO / "examples" / "known-bugs"


def _summary(run_dir) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


class TestDeterministicDuplicate:
    def test_the_three_guarantees_under_a_kill_inside_the_commit_window(self, tmp_path):
        """faults.toml --quick: a batch is held after the sink's write and the driver is killed
        there. at-least-once writes it twice (duplicated > 0), exactly-once stays exact,
        at-most-once restarts fresh and loses what was in flight without duplicating."""
        run_dir = tmp_path / "run"
        proc = run_cli("run", str(SCENARIOS / "faults.toml"), "--quick", "--out", str(run_dir))
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        cases = {c["guarantee"]: c for c in _summary(run_dir)["cases"]}
        for case in cases.values():
            assert all(f["observed"] for f in case["faults"]), case["faults"]
            kill = next(f for f in case["faults"] if f["kind"] == "kill-driver")
            assert "held in the commit window" in kill["detail"], kill["detail"]
        alo, eo, amo = (cases[g]["events"] for g in ("at-least-once", "exactly-once", "at-most-once"))
        assert alo["duplicated"] > 0 and alo["lost"] == 0, alo
        assert eo["duplicated"] == 0 and eo["lost"] == 0 and eo["unexpected"] == 0, eo
        assert amo["lost"] > 0 and amo["duplicated"] == 0, amo
        assert cases["at-least-once"]["verdict"]["observed"] == "at-least-once"
        assert cases["at-most-once"]["verdict"]["observed"] == "at-most-once"
        assert_nothing_left(run_dir)

    def test_delta_s_idempotent_write_survives_a_replayed_stateful_batch(self, tmp_path):
        """benchmarks/scenarios/delta_replay.toml: delta_batch exactly-once under replay-batch.
        Before the sink ran a seen batch into noop, Spark refused the restart
        (STATE_STORE_COMMIT_VALIDATION_FAILED) and the case failed."""
        run_dir = tmp_path / "run"
        scenario = REPO / "benchmarks" / "scenarios" / "delta_replay.toml"
        proc = run_cli("run", str(scenario), "--out", str(run_dir))
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        (case,) = _summary(run_dir)["cases"]
        (replay,) = case["faults"]
        assert replay["observed"] and "ran again" in replay["detail"], replay
        assert case["verdict"]["observed"] == "exactly-once", case["verdict"]
        assert_nothing_left(run_dir)



def _start_and_wait_for_driver(run_dir, scenario=SMOKE):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(harness_cmd("run", str(scenario), "--out", str(run_dir)), env=env,
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def driver_running():
        assert proc.poll() is None, proc.communicate()
        status = list(run_dir.glob("cases/*/status.json"))
        return status and json.loads(status[0].read_text()).get("state") == "running"

    wait_until(driver_running, 240, 0.5, err_msg="the Spark driver never started")
    return proc


def _driver_status(run_dir) -> dict:
    return json.loads(next(run_dir.glob("cases/*/status.json")).read_text())


class TestInterruptedRun:
    @pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
    def test_a_signal_mid_run_stops_every_service(self, sig, tmp_path):
        """Ctrl-C or SIGTERM while the pipeline runs: exit 128+N, summary 'aborted', nothing left."""
        run_dir = tmp_path / "run"
        proc = _start_and_wait_for_driver(run_dir)
        time.sleep(2)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 128 + sig, err[-3000:]
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["status"] == "aborted"
        # the case it was in is said, undecided, not left out
        (case,) = summary["cases"]
        assert case["verdict"]["status"] == "UNKNOWN" and "interrupted" in case["verdict"]["detail"], case
        assert case.get("interrupted"), case
        assert (run_dir / "report.html").exists(), "an aborted run gets its report too"
        assert _driver_status(run_dir)["state"] != "running", "status.json still says running"
        assert_nothing_left(run_dir)



class TestEveryFaultInFull:
    def test_every_kind_lands_is_observed_and_the_verdict_holds(self, tmp_path):
        """tests/scenarios/every_fault.toml without --quick: one fault of every registered kind,
        on one at-least-once case; each observed and landed, the verdict holds, nothing left."""
        run_dir = tmp_path / "run"
        proc = run_cli("run", str(REPO / "tests" / "scenarios" / "every_fault.toml"), "--out", str(run_dir),
                       timeout=1800)
        (case,) = _summary(run_dir)["cases"]
        missed = [f"{f['kind']}: {f.get('landed_detail') or f['detail']}" for f in case["faults"]
                  if not (f["observed"] and f["landed"])]
        assert not missed, missed
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert_nothing_left(run_dir)


class TestFailTaskInTheSink:
    def test_a_sink_that_writes_per_partition_duplicates_and_is_caught(self, tmp_path):
        """(Moved from tox -e test, for its ten minutes; fail-task itself runs there in
        every_fault.toml --quick and storage_faults.toml.) fail_task_sink.toml: the sink writes
        each partition from its tasks, a row at a time, and checks the batch id on the driver
        only. fail-task fails a task after the sink's own code took half of its rows (they were
        written), Spark retries the task, and the retry writes them again: the verdict fails
        with duplicates, and the fault's proof says the sink's own code took the rows. (The
        stage before the sink failed its tasks before the sink's buffered reader had seen a
        row: the bug never showed, and the fault said it had.)"""
        run_dir = tmp_path / "run"
        scenario = REPO / "tests" / "scenarios" / "fail_task_sink.toml"
        proc = run_cli("run", str(scenario), "--out", str(run_dir))
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
        (case,) = _summary(run_dir)["cases"]
        (fault,) = case["faults"]
        assert fault["observed"] and fault["landed"], fault
        assert "the sink's own code took" in fault["landed_detail"], fault["landed_detail"]
        assert fault["tasks"][0]["consumer"] == "iterator", fault["tasks"]
        assert case["events"]["duplicated"] > 0 and case["events"]["lost"] == 0, case["events"]
        assert case["verdict"]["observed"] == "at-least-once", case["verdict"]
        assert_nothing_left(run_dir)


class TestStateAndUnsyncedFaults:
    """Issue 30's state store and lose-unsynced faults (tests/scenarios/state_faults.toml,
    unsynced.toml): each lands where it aims, and the verdict says what Spark did."""

    @pytest.fixture(autouse=True)
    def _fuse(self):
        from harness.services.fuse_mount import fuse_problem

        if fuse_problem() is not None:
            pytest.skip(f"FUSE cannot mount here: {fuse_problem()}")

    def test_a_commit_and_maintenance_killed_and_a_task_failed_after_its_commit_hold(self, tmp_path):
        """fail-task after the state commit, kill-executor at state-commit and at maintenance,
        on RocksDB with changelog checkpointing: each landed in its phase (the version it hit
        named), and exactly-once held (run 20261126T135537-state-faults-6c54)."""
        run_dir = tmp_path / "run"
        proc = run_cli("run", str(REPO / "tests" / "scenarios" / "state_faults.toml"), "--out", str(run_dir))
        (case,) = _summary(run_dir)["cases"]
        assert proc.returncode == 0, (case["faults"], proc.stdout[-3000:] + proc.stderr[-3000:])
        for f in case["faults"]:
            assert f["observed"] and f["landed"], f
        kills = {f["phase"]: f for f in case["faults"] if f["kind"] == "kill-executor"}
        assert kills["state-commit"]["thread"].startswith("Executor task"), kills
        assert kills["maintenance"]["thread"].startswith("state-store-mai"), kills
        assert all(k["state_version"] for k in kills.values()), kills
        assert case["verdict"]["holds"], case["verdict"]
        assert_nothing_left(run_dir)

    @pytest.mark.parametrize("scenario,dirs", [("unsynced.toml", {"offsets", "commits"}),
                                               ("unsynced_executor.toml", {"state"})])
    def test_a_crash_s_lost_writes_are_listed_and_spark_s_answer_is_the_verdict(self, scenario, dirs,
                                                                                 tmp_path):
        """lose-unsynced of the driver (torn) or of an executor (dropped): the files it lost are
        listed (the driver's offsets and commits of the last 30 s, the executor's state files);
        Spark either runs again or refuses the checkpoint (runs 20261126T135919-unsynced-dded:
        refused, JsonEOFException; 20261126T135310-state-faults-8ed8: refused,
        CANNOT_LOAD_STATE_STORE), and a refusal is a refused-restart finding with 0 rows lost or
        duplicated, not a harness error."""
        run_dir = tmp_path / "run"
        proc = run_cli("run", str(REPO / "tests" / "scenarios" / scenario), "--out", str(run_dir))
        (case,) = _summary(run_dir)["cases"]
        (fault,) = case["faults"]
        assert fault["observed"] and fault["landed"] and fault["files"], fault
        assert dirs <= set(fault["by_dir"]), fault["by_dir"]
        assert all(f["bytes_after"] < f["bytes_before"] for f in fault["files"]), fault["files"]
        assert fault["outcome"] in ("accepted", "refused"), fault
        if fault["outcome"] == "refused":
            assert proc.returncode == 1 and any(f["class"] == "refused-restart" for f in case["findings"]), \
                case["findings"]
        else:
            assert proc.returncode in (0, 1), proc.stdout[-3000:]
        assert_nothing_left(run_dir)


class TestDeltaSource:
    """[source] kind = "delta" end to end: the query reads a Delta table the harness appends the
    topic to, without faults and under hide-commit, restart-with an AvailableNow trigger and
    delete-source-files."""

    def test_a_delta_source_is_exact_and_its_offsets_are_the_topic_s(self, tmp_path):
        """tests/scenarios/delta_source.toml: exactly-once into PostgreSQL, every record once, and
        the progress records carry the topic's offsets beside Delta's (run 21f5)."""
        run_dir = tmp_path / "run"
        proc = run_cli("run", str(REPO / "tests" / "scenarios" / "delta_source.toml"), "--out", str(run_dir))
        (case,) = _summary(run_dir)["cases"]
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert case["verdict"]["holds"] and case["events"]["delivered"] == case["events"]["produced"], case
        last = json.loads((run_dir / "cases" / "eo" / "progress.jsonl").read_text().splitlines()[-1])
        (source,) = last["sources"]
        assert "deltaEndOffset" in source and sum(source["endOffset"][case["topic"]].values()) > 0, source
        assert_nothing_left(run_dir)

    def test_its_faults_land_and_exactly_once_holds(self, tmp_path):
        """tests/scenarios/delta_faults.toml (runs 1671, and dc43 pinned to one core): the
        deleted files' records are deleted_before_read, the gap in the log's listing is refused
        by Delta and read once it is whole, the AvailableNow restart reads on where the stream
        stopped; 0 lost, 0 duplicated."""
        from harness.services.fuse_mount import fuse_problem

        if fuse_problem() is not None:
            pytest.skip(f"FUSE cannot mount here: {fuse_problem()}")
        run_dir = tmp_path / "run"
        proc = run_cli("run", str(REPO / "tests" / "scenarios" / "delta_faults.toml"), "--out", str(run_dir))
        (case,) = _summary(run_dir)["cases"]
        assert proc.returncode == 0, (case["faults"], proc.stdout[-3000:])
        by_kind = {f["kind"]: f for f in case["faults"]}
        for f in case["faults"]:
            assert f["observed"] and f["landed"] is not False, f
        assert by_kind["hide-commit"]["listings"] > 0 and by_kind["hide-commit"]["newest_meanwhile"] > \
            by_kind["hide-commit"]["version"], by_kind["hide-commit"]
        deleted = sum(d["to"] - d["from"] for d in by_kind["delete-source-files"]["deleted"])
        assert case["events"]["deleted_before_read"] == deleted > 0, case["events"]
        assert case["verdict"]["holds"], case["verdict"]
        assert_nothing_left(run_dir)


def test_a_checkpoint_format_upgrade_under_a_restart_is_refused_or_held(tmp_path):
    """tests/scenarios/format_version.toml: restart-with checkpointFormatVersion = 2 on a
    version-1 RocksDB checkpoint. On Spark 4.2 the new driver's first batch fails in
    RocksDB.commit with None.get and the restart is refused (run 19b3), a finding with its
    story; a Spark that fixes it must run the query on and hold exactly-once. Anything else
    (the fault unseen, another error, a wrong verdict) fails."""
    run_dir = tmp_path / "run"
    proc = run_cli("run", str(REPO / "tests" / "scenarios" / "format_version.toml"), "--out", str(run_dir))
    (case,) = _summary(run_dir)["cases"]
    (fault,) = case["faults"]
    assert fault["observed"], fault
    if fault["outcome"] == "refused":
        log = (run_dir / "cases" / "eo" / "spark-driver.log").read_text(errors="replace")
        assert "CANNOT_WRITE_STATE_STORE.CANNOT_COMMIT" in log and "None.get" in log, fault["outcome_detail"]
        assert proc.returncode == 1 and any(f["class"] == "refused-restart" for f in case["findings"])
    else:
        assert proc.returncode == 0 and case["verdict"]["holds"], (fault, case["verdict"])
    assert_nothing_left(run_dir)


def test_records_skipped_after_retention_are_counted_and_nothing_is_read_twice(tmp_path):
    """tests/scenarios/retention_skip.toml: kafka-retention deletes records the query has not
    read, twice, under failOnDataLoss = false and exactly-once into PostgreSQL. SPARK-25214's
    shape (the Kafka source returning records twice once offsets it planned are gone) is
    checked for: every deleted record is counted as deleted_before_read, none as lost, and no
    record is duplicated (run 20261126T140759-retention-skip-381a: 411 skipped, 0 duplicated)."""
    run_dir = tmp_path / "run"
    proc = run_cli("run", str(REPO / "tests" / "scenarios" / "retention_skip.toml"), "--out", str(run_dir))
    (case,) = _summary(run_dir)["cases"]
    assert proc.returncode == 0, (case["faults"], proc.stdout[-3000:])
    deleted = sum(d["to"] - d["from"] for f in case["faults"] for d in f["deleted"])
    events = case["events"]
    assert events["deleted_before_read"] == deleted > 0, (events, case["faults"])
    assert events["duplicated"] == events["lost"] == 0 and case["verdict"]["holds"], events
    assert_nothing_left(run_dir)


def test_a_deleted_commit_makes_a_naive_sink_duplicate_and_a_transactional_one_hold(tmp_path):
    """benchmarks/scenarios/commits_deleted.toml: corrupt-checkpoint kills the driver just
    after commits/N and deletes it; Spark runs batch N again. The naive append sink (the
    paimon entry's) duplicates with a story that says so, the Postgres sink's batch-id check
    keeps it exact (run 20261124T203606-commits-delete-naive-7e3a)."""
    run_dir = tmp_path / "run"
    scenario = REPO / "benchmarks" / "scenarios" / "commits_deleted.toml"
    proc = run_cli("run", str(scenario), "--out", str(run_dir), timeout=1200)
    cases = {c["name"]: c for c in _summary(run_dir)["cases"]}
    assert proc.returncode == 1, proc.stderr[-3000:]
    (dup,) = [f for f in cases["naive"]["findings"] if f["class"] == "duplicated"]
    assert "the fault deleted commits/" in dup["story"] and "again" in dup["story"], dup["story"]
    assert cases["transactional"]["verdict"]["holds"], cases["transactional"]["verdict"]
    assert_nothing_left(run_dir)


# the entries: the buggy sink (or source, or checkpoint storage) breaks exactly-once with its
# finding, the fixed one holds
GALLERY_ENTRIES = {"paimon-9666": "duplicated", "iceberg-8809": "duplicated", "hudi-6098": "duplicated",
                   "delta-1421": "unexpected", "spark-38033": "refused-restart", "delta-6314": "lost",
                   "spark-25214": "duplicated", "spark-56720": "commit-without-offsets"}
STORY = {"hudi-6098": ("commits/", "again"), "spark-38033": ("the newest offsets file", "refused"),
         "spark-25214": ("101 times",), "spark-56720": ("never was", "io-error")}
# findings a fixed case may have beside its verdict holding (the records retention deleted)
FIXED_MAY_SAY = {"spark-25214": {"deleted-before-read"}}


@pytest.mark.parametrize("entry", list(GALLERY_ENTRIES))
def test_a_gallery_entry_s_bug_is_caught_and_its_fix_passes(entry, tmp_path):
    """examples/known-bugs/<entry>: under its fixed schedule, the buggy sink's case fails with
    the finding its bug makes, and the fixed sink's case holds."""
    run_dir = tmp_path / "run"
    proc = run_cli("run", str(GALLERY / entry / "scenario.toml"), "--out", str(run_dir), timeout=1200)
    cases = {c["name"]: c for c in _summary(run_dir)["cases"]}
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert not cases["buggy"]["verdict"]["holds"]
    found = {f["class"] for f in cases["buggy"]["findings"]}
    assert GALLERY_ENTRIES[entry] in found, cases["buggy"]["findings"]
    (finding,) = [f for f in cases["buggy"]["findings"] if f["class"] == GALLERY_ENTRIES[entry]]
    assert 1 <= len(finding["witness"]) <= 5 and f"finding {finding['class']}" in proc.stdout
    for words in STORY.get(entry, ()):   # the story tells the replay
        assert words in finding["story"], finding["story"]
    assert cases["fixed"]["verdict"]["holds"], cases["fixed"]["verdict"]
    assert {f["class"] for f in cases["fixed"]["findings"]} <= FIXED_MAY_SAY.get(entry, set()), cases["fixed"]
    assert_nothing_left(run_dir)


def _rows_read(run_dir) -> int:
    """Input rows of every micro-batch so far, from the driver's progress log."""
    lines = next(run_dir.glob("cases/*/progress.jsonl"), None)
    if lines is None:
        return 0
    return sum(json.loads(line).get("numInputRows", 0) for line in lines.read_text().splitlines() if line)


class TestKilledByHand:
    def test_an_executor_then_the_driver_killed_by_hand_are_incidents_and_the_case_fails(self, tmp_path):
        """Setup: the smoke scenario, its run directory 160 characters deep (a CI workspace;
        PostgreSQL's socket path must still fit). Steps: wait until events are being sent,
        SIGKILL an executor, wait for the next batch, SIGKILL the driver. Nobody scheduled
        either: both are incidents of the case, with their causes (exit code 137, SIGKILL). The
        case fails (exit 1) with the signal and the events sent, the checker still runs,
        status.json says killed, and nothing is left."""
        run_dir = tmp_path / ("deep-workspace-" * 8) / "run"
        assert len(str(run_dir)) > 160
        proc = _start_and_wait_for_driver(run_dir)
        wait_until(lambda: _rows_read(run_dir) > 2, 120, 0.2,   # beyond the 2 warm-up events
                   err_msg="no micro-batch read a workload event")
        executor = _executor_of(_driver_status(run_dir)["pid"])
        os.kill(executor, signal.SIGKILL)
        read = _rows_read(run_dir)
        wait_until(lambda: _rows_read(run_dir) > read, 120, 0.2, err_msg="no batch after the executor's kill")
        os.kill(_driver_status(run_dir)["pid"], signal.SIGKILL)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 1, err[-3000:]
        assert "driver of case exactly-once-postgres was killed by SIGKILL at " in err, err[-3000:]
        assert " events sent" in err
        case = json.loads((run_dir / "summary.json").read_text())["cases"][0]
        assert not case["verdict"]["holds"] and case["verdict"]["detail"].startswith("FAILED: driver")
        assert "SIGKILL" in case["error"] and case["events"]["produced"] > 0
        assert _driver_status(run_dir)["state"] == "killed"
        incidents = {i["kind"]: i for i in case["incidents"] if not i["scheduled"]}
        assert "code 137" in incidents["executor-lost"]["cause"], case["incidents"]
        assert incidents["driver-exit"]["cause"] == "killed by SIGKILL", case["incidents"]
        assert incidents["executor-lost"]["at_s"] < incidents["driver-exit"]["at_s"]
        assert "FAIL" in out and "incident executor-lost" in out
        assert 'class="incident"' in (run_dir / "report.html").read_text()
        assert_nothing_left(run_dir)


def _executor_of(driver_pid: int) -> int:
    """The pid of one executor JVM below the driver."""
    import psutil

    for child in psutil.Process(driver_pid).children(recursive=True):
        try:
            if "CoarseGrainedExecutorBackend" in " ".join(child.cmdline()):
                return child.pid
        except psutil.Error:   # a short-lived child that ended meanwhile
            continue
    raise AssertionError(f"driver {driver_pid} has no executor process")


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


class TestStories:
    def test_each_sink_s_story_names_its_own_cause_and_batch(self, tmp_path):
        """benchmarks/scenarios/stories.toml: two sinks duplicate under the same schedule (a kill
        after a batch's write, a replay of a later batch). The one that writes each batch twice
        is told as a write applied twice by one run of its batches; the naive append, which
        keeps no batch id, as two runs of the batches the kill and the replay stopped, each told
        by the batch whose watermark closed the window, and each with its fault listed."""
        run_dir = tmp_path / "run"
        proc = run_cli("run", str(REPO / "benchmarks" / "scenarios" / "stories.toml"), "--out", str(run_dir))
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
        cases = {c["name"]: c for c in _summary(run_dir)["cases"]}
        for case in cases.values():
            assert all(f["observed"] and f["landed"] for f in case["faults"]), case["faults"]
        twice = next(f for f in cases["writes-twice"]["findings"] if f["class"] == "duplicated")
        assert "ran once, and its one run wrote" in twice["story"], twice["story"]
        assert "a write applied twice" in twice["story"], twice["story"]
        naive = next(f for f in cases["naive-append"]["findings"] if f["class"] == "duplicated")
        assert "the copies came from two runs of batch" in naive["story"], naive["story"]
        assert any(x.startswith(("kill-driver", "replay-batch")) for x in naive["faults"]), naive["faults"]
        assert "a write applied twice" not in naive["story"], naive["story"]
