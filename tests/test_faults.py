"""Fault injection without the stack: the commit gate, the schedule's safety rules, targets."""

import json
import os
import threading
import time
from dataclasses import replace

import pytest

from faults import registry
from faults.base import Fault, Observation
from faults.spec import FaultSpec
from faults.targets import RefusedTarget, Targets
from harness.run.schedule import FaultRunner
from workloads.pipelines.control import DELAY_COMMIT, CommitGate, held_batches, holding, request

pytestmark = pytest.mark.unit


def _gate(tmp_path, rows):
    written = []
    gate = CommitGate(lambda df, batch_id: written.append(batch_id), tmp_path, lambda: rows)
    return gate, written


class TestCommitGate:
    def test_without_a_request_a_batch_passes_at_once(self, tmp_path):
        """No control file: the sink writes and foreachBatch returns; nothing is held."""
        gate, written = _gate(tmp_path, rows=5)
        gate(None, 0)
        assert written == [0] and held_batches(tmp_path) == []

    def test_a_delay_holds_the_batch_after_its_write_and_says_so(self, tmp_path):
        """delay-commit 300 ms: the write happens first, then the gate holds the batch for the
        delay and leaves held-N.json with its rows and its time in the window."""
        gate, written = _gate(tmp_path, rows=5)
        request(tmp_path, DELAY_COMMIT, "300")
        started = time.monotonic()
        gate(None, 7)
        assert time.monotonic() - started >= 0.3 and written == [7]
        (held,) = held_batches(tmp_path)
        assert (held["batch_id"], held["rows"]) == (7, 5) and held["until_ms"] - held["at_ms"] == 300

    def test_a_batch_that_wrote_no_rows_is_not_held_and_the_request_waits(self, tmp_path):
        """A replay of an empty batch shows nothing: the gate waits for a batch with rows."""
        gate, _ = _gate(tmp_path, rows=0)
        request(tmp_path, DELAY_COMMIT, "5000")
        gate(None, 1)
        assert held_batches(tmp_path) == [] and (tmp_path / DELAY_COMMIT).exists()

    def test_one_request_holds_one_batch(self, tmp_path):
        """The request is used up by the batch it held: the next batch passes."""
        gate, _ = _gate(tmp_path, rows=3)
        request(tmp_path, DELAY_COMMIT, "50")
        gate(None, 1)
        gate(None, 2)
        assert [h["batch_id"] for h in held_batches(tmp_path)] == [1]

    def test_holding_names_the_batch_in_the_window_only_while_it_is_there(self, tmp_path):
        """A kill-driver that comes during the hold finds the batch; after it, nothing."""
        now = time.time_ns() // 1_000_000
        (tmp_path / "held-4.json").write_text(json.dumps({"batch_id": 4, "rows": 1, "at_ms": now,
                                                          "until_ms": now + 60_000}))
        (tmp_path / "held-2.json").write_text(json.dumps({"batch_id": 2, "rows": 1, "at_ms": now - 9000,
                                                          "until_ms": now - 5000}))
        assert holding(tmp_path)["batch_id"] == 4


def _targets(tmp_path, started=()):
    return Targets(driver=lambda: None, restart_driver=lambda: None, expect_down=lambda _: None,
                   executors_log=tmp_path / "executors.jsonl",
                   control_dir=tmp_path, progress=list, checkpoint=lambda: tmp_path,
                   started_pids=lambda: set(started))


class _Recorded(Fault):
    """A fault that records what the schedule did with it."""

    calls: list = []

    def _inject(self):
        self.calls.append(("inject", self.spec.kind))

    def _heal(self):
        self.calls.append(("heal", self.spec.kind))

    def restore(self):
        self.calls.append(("restore", self.spec.kind))
        return True

    def observe(self):
        return Observation(True, "recorded")


def _record(monkeypatch, kind: str) -> None:
    """Faults of `kind` are _Recorded ones for the test's length."""
    monkeypatch.setitem(registry.KINDS, kind, replace(registry.KINDS[kind], injector=_Recorded))


class TestSchedule:
    @pytest.fixture(autouse=True)
    def recorded(self, monkeypatch):
        _Recorded.calls = []
        for kind in ("pause", "kill-driver"):
            _record(monkeypatch, kind)

    def test_each_fault_is_injected_at_its_time_healed_and_recorded(self, tmp_path):
        """at 0.1 s for 0.2 s: injected, healed, observed; summary fields from the first event sent."""
        runner = FaultRunner((FaultSpec("pause", 0.1, "driver", duration_s=0.2),), _targets(tmp_path))
        t0 = time.time()
        runner.start(t0)
        runner.join(10)
        (record,) = runner.records()
        assert _Recorded.calls == [("inject", "pause"), ("heal", "pause")]
        assert record.observed and 0.1 <= record.started_s < record.ended_s
        assert runner.problems() == []

    def test_a_downtime_counts_from_the_kill_not_from_the_end_of_the_reaping(self, tmp_path, monkeypatch):
        """A killed driver's tree took a moment to reap and the downtime began after it: the
        quick bench's 1 s downtime put the new driver 1.6 s or more after the kill."""
        def slow_kill(self):
            self.killed_at = time.time()
            time.sleep(0.6)   # the process tree being reaped
            self.calls.append(("inject", self.spec.kind))

        monkeypatch.setattr(_Recorded, "_inject", slow_kill)
        runner = FaultRunner((FaultSpec("kill-driver", 0, "driver", downtime_s=0.5),), _targets(tmp_path))
        runner.start(time.time())
        runner.join(10)
        (run,) = runner.runs
        assert run.fault.healed_at - run.fault.killed_at < 0.6 + 0.5   # not 0.6 s of reaping plus 0.5

    def test_an_aborted_run_undoes_a_pause_but_starts_no_driver(self, tmp_path):
        """SIGINT mid-fault: a paused process is resumed; a killed driver is not restarted."""
        specs = (FaultSpec("pause", 0, "driver", duration_s=60),
                 FaultSpec("kill-driver", 0, "driver", downtime_s=60))
        runner = FaultRunner(specs, _targets(tmp_path))
        runner.start(time.time())
        deadline = time.monotonic() + 5
        while len(_Recorded.calls) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        runner.stop(aborted=True)
        assert sorted(_Recorded.calls) == [("heal", "pause"), ("inject", "kill-driver"), ("inject", "pause")]

    def test_a_node_left_down_is_put_back_when_the_case_ends_not_when_the_run_aborts(self, tmp_path):
        """A broker or worker killed without downtime stays down for its case; the case's end
        starts it again (the next case of a matrix ran on a cluster short of a node, and its
        kill-worker found no executor to kill), an aborted run leaves it to the registry, and so
        does the last case of a run on services of its own (restart-broker's lease put back cost a
        broker restart, about 6 s, at the end of every such run)."""
        for aborted, restore, want in (
                (False, True, [("inject", "pause"), ("heal", "pause"), ("restore", "pause")]),
                (True, True, [("inject", "pause"), ("heal", "pause")]),
                (False, False, [("inject", "pause"), ("heal", "pause")])):
            _Recorded.calls = []
            runner = FaultRunner((FaultSpec("pause", 0, "driver", duration_s=0.05),), _targets(tmp_path))
            runner.start(time.time())
            runner.join(10)
            runner.stop(aborted=aborted, restore=restore)
            assert _Recorded.calls == want, (aborted, restore)

    def test_a_fault_that_is_never_injected_fails_the_case(self, tmp_path):
        """The case ended before `at`: observed false, with the reason, and a problem."""
        runner = FaultRunner((FaultSpec("pause", 60, "driver", duration_s=1),), _targets(tmp_path))
        runner.start(time.time())
        runner.stop()
        assert not runner.records()[0].observed
        assert "not injected" in runner.problems()[0]

    def test_a_signal_stops_every_schedule_before_the_stack_unwinds(self, tmp_path):
        """Ctrl-C's handler calls stop_every_schedule: a fault due later is never injected,
        however long the unwinding takes before the runner's own stop (a broker was killed
        40 s after a Ctrl-C while a producer flushed)."""
        from harness.run.schedule import stop_every_schedule

        runner = FaultRunner((FaultSpec("pause", 0.3, "driver", duration_s=0.1),), _targets(tmp_path))
        runner.start(time.time())
        stop_every_schedule()
        time.sleep(0.6)
        assert all(not t.is_alive() for t in runner.threads)
        assert runner.runs[0].fault is None, "injected after the signal"

    def test_a_fault_in_the_middle_of_its_injection_goes_no_further_after_the_signal(self, tmp_path,
                                                                                    monkeypatch):
        """A fault already waiting (a replay-batch for its held batch) when Ctrl-C comes stops
        waiting and sends no signal: one killed the driver 4 s after a Ctrl-C, during the
        unwinding. Its targets refuse every process handle from then on."""
        from harness.run.schedule import stop_every_schedule

        waited, sent = threading.Event(), []

        class _Waits(Fault):
            def _inject(self):
                self.targets.wait(lambda: waited.set() or None, "signal", "never")
                sent.append(self.targets.process(os.getpid()))

            def _heal(self):
                pass

        monkeypatch.setitem(registry.KINDS, "pause", replace(registry.KINDS["pause"], injector=_Waits))
        runner = FaultRunner((FaultSpec("pause", 0, "driver", duration_s=0.1),),
                             _targets(tmp_path, started={os.getpid()}))
        runner.start(time.time())
        assert waited.wait(5)
        stop_every_schedule()
        runner.join(5)
        assert sent == [] and "the run is stopping" in (runner.runs[0].error or ""), runner.runs[0].error


class TestTargets:
    def test_a_pid_the_run_did_not_start_is_refused(self, tmp_path):
        """Injectors touch only what the harness started: this test's own pid is not that."""
        with pytest.raises(RefusedTarget, match="not started by this run"):
            _targets(tmp_path).process(os.getpid())

    def test_a_started_pid_gives_a_handle(self, tmp_path):
        assert _targets(tmp_path, started={os.getpid()}).process(os.getpid()).pid == os.getpid()

    def test_random_choices_follow_the_seed(self, tmp_path):
        """executor:random picks the same executor for the same seed, every run."""
        a, b = _targets(tmp_path), _targets(tmp_path)
        assert [a.rng("x").random() for _ in range(3)] == [b.rng("x").random() for _ in range(3)]


def test_threads_of_a_finished_schedule_are_gone(tmp_path, monkeypatch):
    """No thread of the schedule outlives it."""
    _record(monkeypatch, "pause")
    runner = FaultRunner((FaultSpec("pause", 0, "driver", duration_s=0.05),), _targets(tmp_path))
    runner.start(time.time())
    runner.join(5)
    runner.stop()
    assert not [t for t in threading.enumerate() if t.name.startswith("fault-")]


class _Clock:
    """A pace whose anchors come when the test says: `warm_at` (epoch s) and each batch after it."""

    def __init__(self, start_s: float = 20.0):
        self.warm_at: float | None = None
        self.batches: list[float] = []
        self.batch_s, self.start_s = 1.0, start_s

    def reached(self, anchor):
        if anchor.after == "start":
            raise AssertionError("plain times are the schedule's own")
        if self.warm_at is None:
            return None
        if anchor.after == "warmup":
            return self.warm_at + anchor.plus_s
        return self.batches[anchor.batches - 1] if len(self.batches) >= anchor.batches else None

    def not_reached(self, anchor):
        return f"{len(self.batches)} batches after the warm-up"


class TestAnchors:
    @pytest.fixture(autouse=True)
    def recorded(self, monkeypatch):
        _Recorded.calls = []
        for kind in ("pause", "kill-driver", "delay-commit"):
            _record(monkeypatch, kind)

    def _spec(self, kind: str, text: str, **kw) -> FaultSpec:
        from faults.spec import parse_anchor

        anchor = parse_anchor(text, lambda t: float(t.rstrip("s")) * 1000)
        return FaultSpec(kind, anchor.plus_s, "driver", anchor=anchor, **kw)

    def test_a_fault_at_a_batch_comes_when_the_query_gets_there(self, tmp_path):
        """batch 2 after the warm-up: nothing before it, the injection as soon as it commits."""
        clock = _Clock()
        spec = self._spec("pause", "batch 2", duration_s=0.05)
        runner = FaultRunner((spec,), _targets(tmp_path), clock=clock)
        now = time.time()
        runner.start(now, send_end=now + 30)
        clock.warm_at = time.time()
        clock.batches.append(time.time())
        time.sleep(0.5)
        assert _Recorded.calls == [], "injected before its batch"
        clock.batches.append(time.time())
        runner.join(10)
        (record,) = runner.records()
        assert record.observed and record.at == "batch 2" and record.at_s is not None, record

    def test_an_anchor_that_never_comes_is_missed_not_failed(self, tmp_path):
        """The workload ended before batch 6 after the warm-up: the fault is missed, with why;
        the case's problems leave it out (a schedule that did not fit says nothing of the
        pipeline), and missed() names it."""
        clock = _Clock()
        clock.warm_at = time.time()
        runner = FaultRunner((self._spec("pause", "batch 6", duration_s=1),), _targets(tmp_path), clock=clock)
        now = time.time()
        runner.start(now, send_end=now + 0.5)
        runner.join(10)
        (record,) = runner.records()
        assert record.missed and "batch 6 never came while the workload was sent" in record.missed, record
        assert runner.problems() == [] and len(runner.missed()) == 1 and _Recorded.calls == []

    def test_faults_at_one_anchor_go_in_the_listed_order(self, tmp_path, monkeypatch):
        """A delay-commit and a kill-driver at the same anchor: the kill is injected only after the
        delay's request is placed (its injection), whatever the threads' timing."""
        def slow(self):
            time.sleep(0.3)   # the delay-commit's injection takes a while
            self.calls.append(("inject", self.spec.kind))

        monkeypatch.setattr(_Recorded, "_inject", slow)
        clock = _Clock()
        clock.warm_at = time.time()
        clock.batches.append(time.time())
        specs = (self._spec("delay-commit", "batch 1", duration_s=0.05),
                 self._spec("kill-driver", "batch 1", downtime_s=0.05))
        runner = FaultRunner(specs, _targets(tmp_path), clock=clock)
        now = time.time()
        runner.start(now, send_end=now + 30)
        runner.join(10)
        injected = [kind for call, kind in _Recorded.calls if call == "inject"]
        assert injected == ["delay-commit", "kill-driver"], _Recorded.calls

    def test_a_fresh_restart_with_too_little_workload_left_is_missed(self, tmp_path):
        """At-most-once restarts on a fresh checkpoint at the latest offsets: a kill whose new
        driver would start after the last event is missed, with the figures it rested on."""
        clock = _Clock(start_s=20.0)
        clock.warm_at = time.time()
        runner = FaultRunner((self._spec("kill-driver", "warmup", downtime_s=1.0),), _targets(tmp_path),
                             clock=clock, fresh_restarts=True)
        now = time.time()
        runner.start(now, send_end=now + 10)
        runner.join(10)
        (record,) = runner.records()
        assert record.missed and "the driver's measured start-up of 20.0 s" in record.missed, record
        assert _Recorded.calls == []


class TestWaitsWhileTheDriverIsDown:
    """A wait for a batch counts only the time the query could run one (nexmark-faults' q7: a
    fail-task armed just before a kill-driver timed out at 20 s while no driver ran)."""

    def _targets(self, tmp_path, paused):
        from dataclasses import replace

        from faults.targets import FixedPace

        return replace(_targets(tmp_path), pace=FixedPace(batch_s=0.01, start_s=0.05), query_paused=paused)

    def test_the_time_the_driver_was_down_does_not_count(self, tmp_path, monkeypatch):
        import faults.targets as targets_mod

        waits = {"batch": 0.3, "restart": 5.0}
        monkeypatch.setattr(targets_mod, "pace_wait_s", lambda what, b, s: waits[what])
        start = time.monotonic()
        down_until = start + 0.6      # the driver is down for 0.6 s, twice the batch wait
        found = self._targets(tmp_path, lambda: time.monotonic() < down_until).wait(
            lambda: time.monotonic() > start + 0.7 or None, "batch", "no batch", 0.02)
        assert found is True   # it came 0.1 s after the driver was back: within the 0.3 s counted

    def test_a_driver_that_never_comes_back_is_waited_for_a_restart_s_time_at_most(self, tmp_path,
                                                                                  monkeypatch):
        import faults.targets as targets_mod
        from workloads.wait import WaitTimeout

        waits = {"batch": 0.2, "restart": 0.3}
        monkeypatch.setattr(targets_mod, "pace_wait_s", lambda what, b, s: waits[what])
        start = time.monotonic()
        with pytest.raises(WaitTimeout, match="while the driver was down or restarting"):
            self._targets(tmp_path, lambda: True).wait(lambda: None, "batch", "no batch", 0.02)
        assert 0.45 < time.monotonic() - start < 2.0


class TestFailTaskOnOneRowPartitions:
    """A fail-task on a query whose batches write one row to each sink partition (nexmark's q7:
    a window's highest bid) cannot fail a task after the sink took some rows: it is missed, with
    why, not 'not observed' (which failed the case)."""

    def test_one_row_tasks_are_recorded_by_their_batch(self, tmp_path):
        from workloads.pipelines import taskfault

        taskfault._too_small(tmp_path, {"batch": "7", "partition": 1}, 1)
        taskfault._too_small(tmp_path, {"batch": "8", "partition": 0}, 3)   # could fail: not recorded
        assert taskfault.small_batches(tmp_path) == {"7"}

    def test_the_fault_is_missed_when_only_one_row_tasks_came(self, tmp_path, monkeypatch):
        from dataclasses import replace

        import faults.targets as targets_mod
        import faults.tasks as tasks_mod
        from faults.base import Missed

        calls = iter([set(), {"7", "9"}])
        monkeypatch.setattr(tasks_mod, "small_batches", lambda control: next(calls))
        monkeypatch.setattr(targets_mod, "pace_wait_s", lambda what, b, s: 0.2)   # a short wait
        targets = replace(_targets(tmp_path), pace=targets_mod.FixedPace())
        fault = tasks_mod.FailTask(FaultSpec("fail-task", 0, "tasks", extra={"rows": 1}), targets)
        with pytest.raises(Missed, match=r"batches with rows that came \(7, 9\) wrote one row"):
            fault._inject()

    def test_a_wait_that_ran_out_says_what_the_query_did_meanwhile(self, tmp_path, monkeypatch):
        """In CI a fail-task once found 'no 1 task(s) of a batch with rows failed within 20 s' and
        nothing more, and its run directory was gone: the timeout now names the batches that
        ended while it waited and which of them took the request."""
        from dataclasses import replace

        import faults.targets as targets_mod
        import faults.tasks as tasks_mod
        from workloads.pipelines import taskfault
        from workloads.wait import WaitTimeout

        now_ms = time.time() * 1000 + 60_000   # batches that end after the request
        progress = [{"batchId": b, "timestamp": "2026-11-28T00:00:00.000Z", "batchDuration": 0,
                     "numInputRows": rows} for b, rows in ((11, 40), (12, 0), (13, 55))]
        monkeypatch.setattr(targets_mod, "end_s", lambda p: now_ms / 1000)
        monkeypatch.setattr(targets_mod, "pace_wait_s", lambda what, b, s: 0.2)
        targets = replace(_targets(tmp_path), pace=targets_mod.FixedPace(), progress=lambda: progress)
        fault = tasks_mod.FailTask(FaultSpec("fail-task", 0, "tasks"), targets)
        (tmp_path / taskfault.BATCH).write_text("11")
        said = (r"failed \(is the stage.*meanwhile 3 batch\(es\) ended, 2 with input \(11-13\); "
                r"batch 11 took the request, and no task of it failed")
        with pytest.raises(WaitTimeout, match=said):
            fault.inject()


def test_a_refusal_names_the_failed_task_under_spark_s_wrapping(tmp_path):
    """A query's failure reaches the driver wrapped (FOREACH_BATCH_USER_FUNCTION_ERROR through
    py4j): the refusal adds the newest failed task's reason and its first cause from the
    driver's log, skipping the tasks Spark only cancelled (state_store.toml's run 772d)."""
    from faults.driver import with_task_failure

    log = tmp_path / "spark-driver.log"
    log.write_text(
        "26/11/26 12:20:25 WARN TaskSetManager: [batchId = 20] Lost task 1.0 in stage 1.0 (TID 3) "
        "(127.0.0.1 executor 0): org.apache.spark.SparkException: [CANNOT_WRITE_STATE_STORE.CANNOT_COMMIT] "
        "Error writing state store files\n\tat org.apache.spark.X(X.scala:1)\n"
        "Caused by: java.util.NoSuchElementException: None.get\n\tat scala.None$.get(Option.scala:627)\n"
        "26/11/26 12:20:26 WARN TaskSetManager: Lost task 0.3 in stage 1.0 (TID 9) (127.0.0.1 executor 1): "
        "TaskKilled (Stage cancelled)\n")

    class Driver:
        log_path = log

    said = with_task_failure("StreamingQueryException: [STREAM_FAILED] ... Python Proxy", Driver())
    assert "a task failed with org.apache.spark.SparkException: [CANNOT_WRITE_STATE_STORE." in said
    assert said.endswith("caused by java.util.NoSuchElementException: None.get"), said
    assert with_task_failure("x", type("NoLog", (), {"log_path": tmp_path / "none"})()) == "x"


def test_batches_on_a_moved_driver_clock_stay_in_real_time_order(tmp_path):
    """A driver clock 30 s behind writes timestamps earlier than the batch before it: the
    records carry the offset (clock_offset_ms), and the progress log reads them back on the
    real clock, in the order they ran."""
    from workloads.pipelines import progress_log

    path = tmp_path / "progress.jsonl"
    before = {"batchId": 4, "timestamp": "2026-11-26T12:00:10.000Z", "batchDuration": 500}
    skewed = {"batchId": 5, "timestamp": "2026-11-26T11:59:41.000Z", "batchDuration": 500,
              "clock_offset_ms": -30000}
    path.write_text(json.dumps(before) + "\n" + json.dumps(skewed) + "\n")
    read = progress_log.read(path)
    assert [r["batchId"] for r in read] == [4, 5]
    assert progress_log.end_ms(read[1]) - progress_log.end_ms(read[0]) == 1000


class TestStateFiles:
    """Which state store version, partition and operator a checkpoint path is (the state store
    faults' records read them; workloads/pipelines/state_files.py)."""

    def test_version_files_of_every_store_and_format(self):
        from workloads.pipelines.state_files import parse

        assert parse("/state/0/1/13.changelog") == {"operator": 0, "partition": 1, "version": 13,
                                                    "file": "state/0/1/13.changelog"}
        assert parse("state/2/0/20.zip")["version"] == 20
        assert parse("/state/0/3/left-keyToNumValues/7.delta")["partition"] == 3
        assert parse("/state/0/1/12_0f3c2a1e-77aa-4f0e-9d6a-1b2c3d4e5f60.zip")["version"] == 12
        for other in ("/state/0/1/.13.changelog.crc", "/state/0/1/SSTs/000018-abc.sst", "/offsets/13",
                      "/state/0/_metadata/metadata", "/state/0/1/.13.changelog.1a2b.TID4.tmp"):
            assert parse(other) is None, other

    def test_of_version_lists_one_partition_s_files_with_their_times(self, tmp_path):
        from workloads.pipelines.state_files import of_version

        for name in ("state/0/1/8.changelog", "state/0/1/.8.changelog.crc", "state/0/0/8.changelog",
                     "state/1/1/8.zip", "state/0/1/9.changelog"):
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text("x")
        found = of_version(tmp_path, 1, 8)
        assert [f["file"] for f in found] == ["state/0/1/8.changelog", "state/1/1/8.zip"]
        assert all(f["mtime_ms"] > 0 for f in found)


def test_a_new_leader_s_first_read_is_timed_in_utc_on_any_host_zone(monkeypatch):
    """kill-broker's first_batch_after_s reads the progress timestamps (UTC, "...Z") as UTC: on
    a host in New York, local time (mktime) made it 18,004 s, five hours late."""
    import time as clock

    from faults.cluster import first_read_after_s

    monkeypatch.setenv("TZ", "America/New_York")
    clock.tzset()
    try:
        killed = 1795766400.0   # 2026-11-27T08:00:00Z
        reading = [{"batchId": 7, "timestamp": "2026-11-27T08:00:04.500Z"},
                   {"batchId": 8, "timestamp": "2026-11-27T08:00:06.000Z"}]
        assert first_read_after_s(reading, killed) == 4.5
    finally:
        monkeypatch.delenv("TZ")
        clock.tzset()


class TestBrokerCrash:
    def test_a_lone_broker_comes_back_from_a_crash_on_kafka_s_lease(self, tmp_path):
        """restart-broker at its default (hard): the harness's 120 s lease outlived Kafka's 60 s
        registration timeout, and the restarted broker exited on DUPLICATE_BROKER_REGISTRATION
        (issue 41). The process started after a kill runs on Kafka's 9 s lease; one started
        after that without a crash, on the harness's again; a cluster's nodes keep Kafka's."""
        from harness.services.kafka import KafkaBroker, KafkaCluster

        lease = "broker.session.timeout.ms"
        alone = KafkaBroker(tmp_path / "alone")
        alone.formatted = True   # as on a restart: prepare() writes the properties, and formats nothing
        alone.workdir.mkdir()
        assert alone.properties()[lease] == "120000"
        alone.kill()             # no process: what counts is what the next start reads
        alone.prepare()
        assert alone.properties()[lease] == "9000" and alone.on_kafka_lease
        assert "broker.session.timeout.ms=9000" in alone.props_path.read_text()
        alone.prepare()
        assert alone.properties()[lease] == "120000" and not alone.on_kafka_lease
        node = KafkaCluster(tmp_path / "cluster", registry=None, brokers=3).nodes[0]
        node.formatted = True
        node.workdir.mkdir(parents=True)
        node.kill()
        node.prepare()
        assert lease not in node.properties() and not node.on_kafka_lease

    def test_the_harness_s_lease_is_put_back_only_on_a_node_that_crashed(self, tmp_path):
        """restore_lease() restarts nothing that runs on the harness's lease, nor a node that is down."""
        from harness.services.kafka import KafkaBroker

        alone = KafkaBroker(tmp_path / "alone")
        assert alone.restore_lease() is False
        alone.on_kafka_lease = True   # not running
        assert alone.restore_lease() is False


class TestKafkaRetentionReadAnyway:
    """A CI run FAILED 'alo' of every_fault.toml with 150 unexpected: kafka-retention recorded 150
    records as deleted before the query read them, and the held batch read them all the same
    (an executor served them from what it had fetched before the deletion)."""

    class _Progress:
        def __init__(self, rows):
            self.rows = rows

        def progress(self):
            return [{"batchId": 7, "numInputRows": 10}, {"batchId": 8, "numInputRows": self.rows}]

    def _seen(self, rows: int):
        from faults.kafka import Deleted, KafkaRetention

        spec = FaultSpec(kind="kafka-retention", at_s=3.0, target="topic")
        fault = KafkaRetention(spec, self._Progress(rows))  # type: ignore[arg-type]
        fault.batch, fault.planned = 8, 300
        fault.deleted = [{"partition": 0, "from": 100, "to": 250}]
        seen = Observation(True, "150 records the query had not read were deleted", landed=True,
                           outcome="accepted", details=Deleted(list(fault.deleted)))
        return fault._read_anyway(seen, 150)

    def test_a_batch_that_read_every_record_it_spans_had_none_deleted_before_it_read_them(self):
        """Every record of the batch's offsets read: no deleted range is left for the checker."""
        seen = self._seen(300)
        assert seen.details.deleted_ranges() == [] and "read all 300 records" in seen.detail

    def test_a_batch_that_skipped_them_keeps_its_deleted_ranges(self):
        """150 of 300 read: the deleted ranges stand, and the checker counts them apart."""
        seen = self._seen(150)
        assert seen.details.deleted_ranges() == [{"partition": 0, "from": 100, "to": 250}]


class TestStorageFaultLands:
    """A full or failing disk took effect when Spark first met it, and its duration counts from
    then (faults/storage.py StorageFault.land): a 2 s full disk put on right after a batch's
    offsets met no file operation on a loaded CI machine and was missed (issue 48)."""

    def _fault(self, tmp_path, monkeypatch):
        from faults.storage import DiskFull

        stats, control = tmp_path / "stats.json", tmp_path / "control.json"
        stats.write_text(json.dumps({"failed": {"create:ENOSPC": {"count": 3, "first_at": 1.0}}}))
        targets = replace(_targets(tmp_path), storage_control=control, storage_stats=stats)
        spec = FaultSpec("disk-full", 10.0, "checkpoint", duration_s=2.0)
        fault = DiskFull(spec, targets)
        monkeypatch.setattr(fault, "_watch", lambda: None)   # no driver here to watch
        return fault, stats

    def test_it_lands_at_spark_s_first_failed_operation_not_at_its_injection(self, tmp_path, monkeypatch):
        fault, stats = self._fault(tmp_path, monkeypatch)
        fault.inject()

        def spark_writes():
            time.sleep(1.0)
            stats.write_text(json.dumps({"failed": {"create:ENOSPC": {"count": 4, "first_at": 1.0}}}))
        threading.Thread(target=spark_writes).start()
        fault.land()
        assert fault.landed_at - fault.injected_at >= 0.9

    def test_a_query_that_touches_nothing_leaves_it_as_injected(self, tmp_path, monkeypatch):
        fault, _ = self._fault(tmp_path, monkeypatch)
        fault.targets = replace(fault.targets, pace=_Pace(0.5))
        fault.inject()
        fault.land()
        assert fault.landed_at == fault.injected_at


class _Pace:
    def __init__(self, wait_s: float):
        self.wait_s_ = wait_s

    def wait_s(self, what: str) -> float:
        return self.wait_s_

    def basis(self, what: str) -> str:
        return f"{self.wait_s_} s"


class TestBrokerAnswering:
    """A fault that asks the broker (kafka-retention, kafka-partitions) first waits, as long as a
    restart may take, for it to answer: another fault may have it down."""

    def test_it_waits_on_the_restart_s_pace_and_names_the_broker(self):
        import socket
        from types import SimpleNamespace

        from faults.kafka import broker_answering
        from workloads.wait import WaitTimeout

        with socket.socket() as s:   # a port nothing listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        asked = []

        def wait(condition, what, message):
            asked.append((condition(), what))
            raise WaitTimeout(message)

        fault = SimpleNamespace(targets=SimpleNamespace(bootstrap_servers=f"127.0.0.1:{port}", wait=wait))
        with pytest.raises(WaitTimeout, match=f"127.0.0.1:{port}"):
            broker_answering(fault)
        assert asked == [(False, "restart")]
