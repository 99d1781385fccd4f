"""transformWithState's timers under faults (issue 49, part 2): the firing log the processor
writes (workloads/pipelines/timer_log.py), the check that counts each firing of a committed
batch once (harness/check/timers.py), its findings timer-fired-twice and timer-never-fired
(harness/findings/timers.py), and the planted processor that registers its timers again on
recovery, with its twin (tests/scenarios/timer_rearm.py), on faked firing files and a faked
processor handle. No Spark: benchmarks/test_timers.py runs the plant and its twin end to end."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType, SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from harness.check import timers
from harness.check.checkpoint import Batch
from harness.check.result import CheckResult
from harness.findings import CLASSES, Inputs, build
from harness.results.model import FaultRecord
from harness.scenario.model import Pipeline
from workloads.pipelines import timer_log
from workloads.pipelines.timer_log import TimerLog

pytestmark = pytest.mark.unit

T0_S = 1_000.0
T0_MS = int(T0_S * 1000)
WITHIN_MS = 2000
LOGINS = Pipeline(kind="failed_logins",
                  values=MappingProxyType({"attempts": 3, "within_ms": WITHIN_MS, "watermark_ms": 1000}))


def _ms(s: float) -> int:
    return int(T0_MS + s * 1000)


# four batches of one query: watermarks 0, 0, 3.5 s, 6.0 s; batch 3 committed at 4.5 s
BATCHES = [Batch(0, 0, {0: 2}, True, {0: 0}, committed_ms=_ms(1.0), planned_ms=_ms(0.5)),
           Batch(1, 0, {0: 4}, True, committed_ms=_ms(2.0), planned_ms=_ms(1.5)),
           Batch(2, _ms(3.5), {0: 6}, True, committed_ms=_ms(3.0), planned_ms=_ms(2.5)),
           Batch(3, _ms(6.0), {0: 8}, True, committed_ms=_ms(4.5), planned_ms=_ms(3.2)),
           Batch(4, _ms(6.0), {0: 8}, False, planned_ms=_ms(5.0))]


def _truth(rows: list[tuple[int, str, float]]) -> pd.DataFrame:
    """(user, type, event time in s) per event, in offset order on partition 0."""
    n = len(rows)
    return pd.DataFrame({"event_id": np.arange(n), "user": [r[0] for r in rows],
                         "event_type": [r[1] for r in rows], "event_time_ms": [_ms(r[2]) for r in rows],
                         "partition": 0, "offset": np.arange(n), "control": False})


def _firing(user: int, timer_s: float, batch: int, attempt: int = 1, at_s: float = 0.0) -> dict:
    return {"key": [user], "timer_ms": _ms(timer_s), "spark_batch": batch, "batch": batch,
            "task_attempt": attempt, "attempt": 0, "partition": 0, "watermark_ms": 0, "pid": 7,
            "at_ms": _ms(at_s)}


def _case(tmp_path: Path, firings: list[dict], torn: bool = False) -> Path:
    case = tmp_path / "case"
    (case / "checkpoint").mkdir(parents=True)
    log = case / "timers"
    log.mkdir()
    (log / timer_log.STARTS).write_text('{"pid": 1}\n')
    lines = [json.dumps(f) for f in firings] + (['{"key": [1], "tim'] if torn else [])
    (log / "firings-7.jsonl").write_text("\n".join(lines) + "\n")
    return case


class TestTimerLog:
    def test_a_firing_is_written_with_the_batch_of_the_task_that_ran_it(self, tmp_path, monkeypatch):
        """The batch id comes from the task's local property streaming.sql.batchId, plus the
        query's batch base; the task attempt and the watermark come along."""
        from pyspark import taskcontext

        task = SimpleNamespace(getLocalProperty=lambda k: "12" if k == timer_log.BATCH_ID else None,
                               taskAttemptId=lambda: 31, attemptNumber=lambda: 1, partitionId=lambda: 0)
        monkeypatch.setattr(taskcontext.TaskContext, "get", classmethod(lambda cls: task))
        values = SimpleNamespace(getCurrentWatermarkInMs=lambda: 5_000)
        TimerLog(str(tmp_path), batch_base=1_000_000).fired((np.int64(17),), 4_000, values)
        (path,) = tmp_path.glob(timer_log.FIRINGS)
        (record,) = map(json.loads, path.read_text().splitlines())
        assert (record["key"], record["timer_ms"], record["spark_batch"], record["batch"]) == \
            ([17], 4_000, 12, 1_000_012)
        assert (record["task_attempt"], record["attempt"], record["watermark_ms"]) == (31, 1, 5_000)

    def test_opening_the_log_counts_the_queries_started_before(self, tmp_path):
        params = timer_log.params_for(str(tmp_path), 0)
        assert [TimerLog.opened(params).generation for _ in range(3)] == [0, 1, 2]
        assert TimerLog.opened({}) is None

    def test_no_directory_gives_the_build_no_params(self):
        assert timer_log.params_for("", 0) == {}

    def test_a_job_s_processor_finds_the_log_its_driver_offered_once_opened(self, tmp_path, monkeypatch):
        """A job's functions are given no params: TimerLog.current() is the log the driver
        offered, its start recorded once however often it is asked; None with nothing offered
        (the batch oracle, the plan check, a run without the harness)."""
        monkeypatch.setattr(timer_log, "_OFFERED", {})
        monkeypatch.setattr(timer_log, "_OPENED", None)
        assert TimerLog.current() is None
        timer_log.offer({"job": "x", **timer_log.params_for(str(tmp_path), 7)})
        log = TimerLog.current()
        assert log == TimerLog(str(tmp_path), 7, 0) and TimerLog.current() is log
        assert len((tmp_path / timer_log.STARTS).read_text().splitlines()) == 1
        timer_log.offer({})
        assert TimerLog.current() is None


class TestExpected:
    def test_each_failure_read_and_on_time_registers_its_time_plus_within_once(self):
        """A login that is not a failure, a late failure (at or below the previous batch's
        watermark) and a re-sent copy of an event_id register nothing."""
        truth = _truth([(1, "login-failed", 0.1), (2, "login", 0.2), (1, "login-failed", 0.5),
                        (3, "login-failed", 1.0), (4, "view", 2.0), (4, "order", 2.1),
                        (2, "login-failed", 3.6), (1, "login-failed", 3.4)])
        truth.loc[2, "event_id"] = 0          # a re-sent copy of event 0
        got = timers.expected_timers(truth, BATCHES, WITHIN_MS)
        assert sorted(zip(got["key"], got["timer_ms"] - T0_MS, got["registered"], strict=True)) == \
            [("[1]", 2100, 0), ("[2]", 5600, 3), ("[3]", 3000, 1)]
        # user 1 at 3.4 s came in batch 3, whose late mark is batch 2's watermark, 3.5 s: late


class TestJudge:
    def _expected(self, rows: list[tuple[int, float, int]]) -> pd.DataFrame:
        return pd.DataFrame({"key": [json.dumps([u]) for u, _, _ in rows],
                             "timer_ms": [_ms(t) for _, t, _ in rows], "query": 0,
                             "registered": [b for _, _, b in rows]})

    def _firings(self, rows: list[dict]) -> pd.DataFrame:
        frame = pd.DataFrame(rows, columns=timers.FIRING_COLUMNS)
        frame["key"] = [json.dumps(k) for k in frame["key"]]
        return frame

    def test_a_batch_run_again_counts_its_firings_once(self):
        """The killed driver's attempt of batch 2 and the new driver's both fired the timer: once."""
        firings = self._firings([_firing(1, 2.1, 2, attempt=1), _firing(1, 2.1, 2, attempt=9)])
        out = timers.judge(firings, BATCHES, self._expected([(1, 2.1, 0)]))
        assert (out.recorded, out.counted, len(out.twice), len(out.never)) == (2, 1, 0, 0)
        assert out.problem() is None

    def test_a_timer_fired_in_two_committed_batches_fired_twice(self):
        firings = self._firings([_firing(1, 2.1, 2), _firing(1, 2.1, 3)])
        out = timers.judge(firings, BATCHES, self._expected([(1, 2.1, 0)]))
        (row,) = out.twice.to_dict("records")
        assert (row["key"], list(row["batches"]), row["first"], row["again"]) == ("[1]", [2, 3], 2, 3)
        assert "1 timer(s) fired in more than one committed batch" in out.problem()

    def test_a_firing_of_a_batch_never_committed_does_not_count(self):
        """Batch 4 was planned and not committed: its firing is not one, and the timer fired once."""
        firings = self._firings([_firing(1, 2.1, 2), _firing(1, 2.1, 4)])
        out = timers.judge(firings, BATCHES, self._expected([(1, 2.1, 0)]))
        assert (out.counted, len(out.twice)) == (1, 0)

    def test_a_timer_the_watermark_passed_with_no_firing_never_fired(self):
        """User 2's timer at 3.0 s is below batch 2's watermark (3.5 s): due there, and it never
        fired; user 3's at 6.5 s is above the last watermark (6.0 s): not due yet."""
        out = timers.judge(self._firings([]), BATCHES, self._expected([(2, 3.0, 1), (3, 6.5, 1)]))
        (row,) = out.never.to_dict("records")
        assert (row["key"], row["due"], row["last_watermark_ms"]) == ("[2]", 2, _ms(6.0))
        assert (out.expected, out.problem()) == (1, "transformWithState's timers: 1 timer(s) the "
                                                    "watermark passed never fired")

    def test_a_timer_at_exactly_the_watermark_is_due_in_that_batch(self):
        """Spark fires a timer whose time equals the batch's eviction watermark (a real firing log:
        watermark_ms == timer_ms, run 20261129T070119-timer-faults-b8a6): user 3's at 6.0 s is
        due in batch 3, whose watermark is 6.0 s."""
        out = timers.judge(self._firings([]), BATCHES, self._expected([(3, 6.0, 1)]))
        (row,) = out.never.to_dict("records")
        assert (row["key"], row["due"]) == ("[3]", 3)

    def test_a_fresh_query_does_not_owe_the_timers_of_the_query_before(self):
        """At-most-once restarts on a fresh checkpoint: user 2's timer at 5.0 s, registered by
        query 0 (last watermark 3.5 s), is not due in query 1 (watermark 9.0 s), which started
        with no timers."""
        batches = [*BATCHES[:3], Batch(1_000_000, _ms(9.0), {0: 8}, True, {0: 6}, query=1)]
        out = timers.judge(self._firings([]), batches, self._expected([(2, 5.0, 1)]))
        assert (out.expected, len(out.never)) == (0, 0)

    def test_without_a_model_of_the_timers_only_double_firings_are_judged(self):
        out = timers.judge(self._firings([_firing(1, 2.1, 2)]), BATCHES, None)
        assert (out.expected, len(out.never), len(out.twice)) == (None, 0, 0)


class TestCheck:
    def test_a_case_whose_processor_kept_no_log_is_not_checked(self, tmp_path):
        assert timers.check(tmp_path, LOGINS, None, BATCHES) is None

    def test_the_outcome_is_written_beside_the_case_and_torn_lines_are_said(self, tmp_path):
        truth = _truth([(1, "login-failed", 0.1)])
        case = _case(tmp_path, [_firing(1, 2.1, 2), _firing(1, 2.1, 3)], torn=True)
        out = timers.check(case, LOGINS, truth, BATCHES)
        assert out.to_json() == {"recorded": 2, "counted": 2, "expected": 1, "fired_twice": 1,
                                 "never_fired": 0,
                                 "notes": ["1 firing line(s) torn by a killed worker were skipped"]}
        assert len(pd.read_parquet(case / timers.CHECK_DIR / timers.TWICE)) == 1
        assert json.loads((case / timers.CHECK_DIR / timers.OUTCOME).read_text())["fired_twice"] == 1


class TestJudgedAgainUnderARecheck:
    def test_the_run_s_firings_are_judged_again_into_the_re_check_s_directory(self, tmp_path):
        """`python -m harness check` runs the timers' check again from the firings the run's
        workers wrote (it carried the run's count before), and writes its outcome in the
        re-check's case directory, never over the run's."""
        from harness.check.batch_oracle import spark_run
        from harness.results.model import CaseResult, Verdict
        from harness.results.rundir import CaseDir
        from harness.run import recheck

        case = _case(tmp_path, [_firing(1, 2.1, 2), _firing(1, 2.1, 3)])
        said = CaseResult(name="case", guarantee="exactly-once", pipeline="failed_logins", sink="postgres",
                          events={}, verdict=Verdict("exactly-once", "exactly-once", True, "", "PASS"),
                          throughput_eps={}, latency_ms={}, backpressure={},
                          sections={"timers": {"fired_twice": 0}})
        truth = _truth([(1, "login-failed", 0.1)])
        with spark_run.rechecking(tmp_path / "check" / "cases"):
            problems, _ = recheck.evidence_again(CaseDir(case), said, LOGINS, truth, BATCHES)
        assert problems == ["transformWithState's timers: 1 timer(s) fired in more than one committed batch"]
        again = tmp_path / "check" / "cases" / "case" / timers.CHECK_DIR
        assert json.loads((again / timers.OUTCOME).read_text())["fired_twice"] == 1
        assert not (case / timers.CHECK_DIR).exists()


class TestFindings:
    def _inputs(self, case: Path) -> Inputs:
        fault = FaultRecord("kill-driver", 3.0, 3.0, 4.0, "driver", True, landed_s=3.1)
        checked = CheckResult({"lost": 0, "duplicated": 0, "unexpected": 0}, np.array([]), np.array([]))
        return Inputs(truth=_truth([(1, "login-failed", 0.1)]), sink=pd.DataFrame(), batches=BATCHES,
                      checked=checked, pipeline=LOGINS, faults=[fault], checkpoints=[case / "checkpoint"],
                      t0_s=T0_S)

    def test_both_classes_are_registered(self):
        assert {"timer-fired-twice", "timer-never-fired"} <= set(CLASSES)

    def test_fired_twice_names_key_timer_batches_and_the_fault_before_the_second(self, tmp_path):
        """Batch 3 was planned at 3.2 s, after the kill at 3.1 s: not a batch run again."""
        case = _case(tmp_path, [_firing(1, 2.1, 2), _firing(1, 2.1, 3)])
        timers.check(case, LOGINS, self._inputs(case).truth, BATCHES)
        (found,) = [f for f in build(self._inputs(case)) if f.cls == "timer-fired-twice"]
        (w,) = found.witness
        assert (w["key"], w["timer_s"], w["batches"]) == ([1], 2.1, [2, 3])
        assert w["fault"] == "kill-driver at 3.1 s"
        assert found.story.startswith("User 1's timer at 2.1 s fired in batch 2, then again in batch 3, "
                                      "the first batch committed after kill-driver at 3.1 s;")
        assert "1 timer fired more than once" in found.story and "To fix:" in found.story
        assert found.faults == ["kill-driver at 3.1 s"]

    def test_a_batch_planned_before_the_kill_is_said_to_have_run_again(self, tmp_path):
        case = _case(tmp_path, [_firing(1, 2.1, 2), _firing(1, 2.1, 3)])
        timers.check(case, LOGINS, None, BATCHES)
        inputs = self._inputs(case)
        inputs.faults[0].landed_s = 4.0
        (found,) = [f for f in build(inputs) if f.cls == "timer-fired-twice"]
        assert "kill-driver at 4.0 s, which was planned before the fault and ran again" in found.story

    def test_a_later_batch_is_not_said_to_be_the_first_after_the_fault(self, tmp_path):
        """Batches 1, 2 and 3 committed after a kill at 1.1 s: batch 3 is one of them, not the first."""
        case = _case(tmp_path, [_firing(1, 2.1, 2), _firing(1, 2.1, 3)])
        timers.check(case, LOGINS, None, BATCHES)
        inputs = self._inputs(case)
        inputs.faults[0].landed_s = 1.1
        (found,) = [f for f in build(inputs) if f.cls == "timer-fired-twice"]
        assert "then again in batch 3, a batch committed after kill-driver at 1.1 s;" in found.story

    def test_never_fired_names_the_batch_it_was_due_in(self, tmp_path):
        case = _case(tmp_path, [])
        truth = _truth([(2, "login-failed", 1.0)])     # batch 0: its timer at 3.0 s, due in batch 2
        timers.check(case, LOGINS, truth, BATCHES)
        (found,) = [f for f in build(self._inputs(case)) if f.cls == "timer-never-fired"]
        (w,) = found.witness
        assert (w["key"], w["registered"], w["due"]) == ([2], 0, 2)
        assert "user 2's timer at 3.0 s, registered in batch 0, was due in batch 2" in found.story.lower()

    def test_a_case_whose_timers_fired_once_has_no_timer_finding(self, tmp_path):
        case = _case(tmp_path, [_firing(1, 2.1, 2)])
        timers.check(case, LOGINS, _truth([(1, "login-failed", 0.1)]), BATCHES)
        assert not [f for f in build(self._inputs(case)) if f.cls.startswith("timer-")]


class _State:
    """A list or value state of a faked processor handle."""

    def __init__(self):
        self.values: list = []

    def exists(self):
        return bool(self.values)

    def get(self):
        return iter(self.values) if self.list else self.values[0]

    def appendValue(self, v):
        self.values.append(v)

    def put(self, vs):
        self.values = list(vs)

    def update(self, v):
        self.values = [v]

    def clear(self):
        self.values = []

    def containsKey(self, k):
        return any(key == k for key, _ in self.values)

    def updateValue(self, k, v):
        self.values.append((k, v))

    def iterator(self):
        return iter(list(self.values))

    def removeKey(self, k):
        self.values = [(key, v) for key, v in self.values if key != k]


class _Handle:
    """One key's state and timers, as a handle restored from the checkpoint shows them."""

    def __init__(self):
        self.states: dict[str, _State] = {}
        self.timers: set[int] = set()
        self.registered: list[int] = []

    def _state(self, name, is_list):
        state = self.states.setdefault(name, _State())
        state.list = is_list
        return state

    def getListState(self, name, schema):
        return self._state(name, True)

    def getMapState(self, name, key_schema, value_schema):
        return self._state(name, True)

    def getValueState(self, name, schema):
        return self._state(name, False)

    def registerTimer(self, t):
        self.registered.append(t)
        self.timers.add(t)


class TestRearmingProcessor:
    """The plant and its twin, on a faked handle: user 1's failures at 1.0 s and 1.5 s register
    timers at 3.0 s and 3.5 s; the first fires; then the driver starts again (generation 1)."""

    def _run(self, tmp_path: Path, prune: bool) -> _Handle:
        from tests.scenarios.timer_rearm import Rearming

        handle = _Handle()
        params = {"attempts": 3, "within_ms": WITHIN_MS, **timer_log.params_for(str(tmp_path), 0)}
        first = Rearming(params, prune=prune)
        first.init(handle)
        rows = [SimpleNamespace(event_id=i, event_time_ms=_ms(t)) for i, t in ((1, 1.0), (2, 1.5))]
        list(first.handleInputRows((1,), iter(rows), None))
        first.log = None                        # no TaskContext here: the firing is not written
        list(first.handleExpiredTimer((1,), None, SimpleNamespace(getExpiryTimeInMs=lambda: _ms(3.0))))
        handle.timers.discard(_ms(3.0))         # Spark deletes a timer as it fires
        handle.registered.clear()
        again = Rearming(params, prune=prune)   # the new driver's processor
        again.init(handle)
        list(again.handleInputRows((1,), iter([SimpleNamespace(event_id=3, event_time_ms=_ms(4.0))]), None))
        return handle

    def test_the_plant_registers_again_a_timer_that_already_fired(self, tmp_path):
        handle = self._run(tmp_path, prune=False)
        assert _ms(3.0) in handle.registered and _ms(3.0) in handle.timers

    def test_the_twin_registers_again_only_the_timers_still_pending(self, tmp_path):
        handle = self._run(tmp_path, prune=True)
        assert sorted(handle.registered) == [_ms(3.5), _ms(6.0)]
        assert _ms(3.0) not in handle.timers
