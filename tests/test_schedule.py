"""The schedule that the workload waits for (harness/run/schedule.py): what is pending, the cap
(max_duration) and the workload's end, with a faked pace; and the pace's count of the batches
that read past a fault (harness/run/pace.py), on checkpoint files written here."""

import time

import pytest

from faults.base import Observation
from faults.spec import FaultSpec, parse_anchor
from harness.run.pace import Pace
from harness.run.schedule import FaultRunner
from tests.test_checkpoint import _write_batch
from tests.test_faults import _Clock, _record, _Recorded, _targets

pytestmark = pytest.mark.unit


class _ReadClock(_Clock):
    """A faked pace whose batches past a fault's mark are what the test says."""

    def __init__(self):
        super().__init__()
        self.read = 0
        self.asked: list = []

    def read_past(self, since_s, mark):
        self.asked.append((since_s, mark))
        return self.read


def _spec(kind: str, text: str, **kw) -> FaultSpec:
    anchor = parse_anchor(text, lambda t: float(t.rstrip("s")) * 1000)
    return FaultSpec(kind, anchor.plus_s, "driver", anchor=anchor, **kw)


def _started(tmp_path, spec: FaultSpec, duration_s: float, cap_s: float, warm: bool = True, **kw):
    """A schedule of `spec` started now, its duration ending `duration_s` and its cap `cap_s`
    from now; its faked pace warm already (or not); (runner, pace, now)."""
    clock = _ReadClock()
    if warm:
        clock.warm_at = time.time()
    runner = FaultRunner((spec,), _targets(tmp_path), clock=clock, **kw)
    now = time.time()
    runner.start(now, send_end=now + duration_s, cap=now + cap_s)
    return runner, clock, now


def _until(predicate, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture(autouse=True)
def recorded(monkeypatch):
    _Recorded.calls = []
    for kind in ("pause", "kill-driver"):
        _record(monkeypatch, kind)


class TestPending:
    def test_the_workload_waits_for_a_fault_to_come_land_and_be_read_past(self, tmp_path):
        """A fault at batch 2: pending before its anchor, while it lasts, and until the query has
        read past it in the asked number of batches, with the topic's end offsets at its
        observation as the mark; then nothing is pending."""
        runner, clock, now = _started(tmp_path, _spec("pause", "batch 2", duration_s=0.3), 0.1, 30,
                                      warm=False, mark=lambda: {0: 40, 1: 41})
        assert runner.pending(3) == "fault pause (batch 2) has not come"
        clock.warm_at = time.time()
        clock.batches += [time.time(), time.time()]
        _until(lambda: ("inject", "pause") in _Recorded.calls)
        assert "has not" in runner.pending(3)
        runner.join(5)
        assert runner.pending(3) == "the query has read past fault pause (batch 2) in 0 of 3 batches"
        clock.read = 3
        assert runner.pending(3) is None
        assert clock.asked[-1][1] == {0: 40, 1: 41} and clock.asked[-1][0] >= now

    def test_a_fault_whose_anchor_comes_after_the_duration_lands_before_the_cap(self, tmp_path):
        """The anchor comes 0.4 s after the duration ended (at 0.1 s) and well before the cap: the
        fault is injected and observed, not missed (before, it was missed at the duration)."""
        runner, clock, _ = _started(tmp_path, _spec("pause", "batch 1", duration_s=0.05), 0.1, 30)
        time.sleep(0.5)
        clock.batches.append(time.time())
        runner.join(5)
        (record,) = runner.records()
        assert record.missed is None and record.observed, record

    def test_a_fault_not_seen_or_refused_is_not_waited_for(self, tmp_path, monkeypatch):
        """No query will read past a fault that was not seen, or after which Spark refused to run
        the query again: neither keeps the workload going."""
        for observation in (Observation(False, "not seen"), Observation(True, "refused", outcome="refused")):
            monkeypatch.setattr(_Recorded, "observe", lambda self, o=observation: o)
            runner, _, _ = _started(tmp_path, FaultSpec("pause", 0, "driver", duration_s=0.01), 5, 10)
            runner.join(5)
            assert runner.pending(3) is None


class TestTheCap:
    def test_an_anchor_that_never_comes_before_the_cap_is_missed_saying_so(self, tmp_path):
        """The workload went on to max_duration and batch 6 never came: missed, the record says
        the workload was cut at max_duration, and the case's problems leave it out."""
        runner, _, _ = _started(tmp_path, _spec("pause", "batch 6", duration_s=1), 0.1, 0.4)
        runner.join(5)
        (record,) = runner.records()
        assert record.missed and "cut at max_duration (0.4 s)" in record.missed, record
        assert runner.problems() == [] and runner.pending(3) is None and _Recorded.calls == []

    def test_a_workload_that_stopped_early_misses_what_has_not_come_at_once(self, tmp_path):
        """ended(at): the workload stopped before its cap (its case failed); a fault whose anchor
        has not come is missed at once, saying when the workload ended."""
        runner, _, now = _started(tmp_path, _spec("pause", "batch 6", duration_s=1), 0.1, 60)
        runner.ended(now + 0.2)
        started = time.monotonic()
        runner.join(5)
        (record,) = runner.records()
        assert time.monotonic() - started < 2 and "the workload ended at 0.2 s" in record.missed, record

    def test_a_fresh_restart_is_missed_only_when_the_cap_leaves_too_little(self, tmp_path):
        """An at-most-once kill needs its downtime and the driver's start-up of workload after it:
        with the duration nearly over but the cap far, it lands; with the cap near, it is missed,
        and the record names max_duration."""
        for cap_s, missed in ((60.0, False), (5.0, True)):
            _Recorded.calls = []
            runner, _, _ = _started(tmp_path, _spec("kill-driver", "warmup", downtime_s=0.05), 1, cap_s,
                                    fresh_restarts=True)
            runner.join(5)
            (record,) = runner.records()
            assert bool(record.missed) is missed, record
            if missed:
                assert "before max_duration (5 s) cuts the workload" in record.missed, record


class TestReadPast:
    def _pace(self, tmp_path) -> Pace:
        pace = Pace(lambda: [tmp_path], "t")
        (tmp_path / "sources" / "0").mkdir(parents=True)
        (tmp_path / "sources" / "0" / "0").write_text('v1\n{"t":{"0":0,"1":0}}')
        return pace

    def test_only_committed_batches_with_input_that_reach_the_mark_count(self, tmp_path):
        """Past a mark of (10, 10): a batch short of it on one partition does not count, nor an
        uncommitted one, nor one without input; each one reaching it does."""
        pace = self._pace(tmp_path)
        since = time.time() - 60
        _write_batch(tmp_path, 0, 0, {0: 5, 1: 12})     # short on partition 0
        _write_batch(tmp_path, 1, 0, {0: 10, 1: 12})    # reaches it
        _write_batch(tmp_path, 2, 0, {0: 10, 1: 12})    # no input
        _write_batch(tmp_path, 3, 0, {0: 14, 1: 15})    # reaches it
        _write_batch(tmp_path, 4, 0, {0: 20, 1: 20}, committed=False)
        assert pace.read_past(since, {0: 10, 1: 10}) == 2

    def test_batches_committed_before_the_mark_was_taken_do_not_count(self, tmp_path):
        """A batch must commit after the fault was observed."""
        pace = self._pace(tmp_path)
        _write_batch(tmp_path, 0, 0, {0: 20, 1: 20})
        assert pace.read_past(time.time() + 60, {0: 1, 1: 1}) == 0


class TestGoingOn:
    """The generator's keep_going in a case (harness/run/stages.py): what it answers, and the
    sentence summary.json's cases[].workload keeps."""

    class _Schedule:
        def __init__(self, answers, specs=("a fault",)):
            self.answers, self.specs = list(answers), specs

        def pending(self, batches):
            return self.answers.pop(0)

    class _Case:
        failure = None

    def _going(self, answers, **kw):
        from harness.run.stages import GoingOn

        return GoingOn(self._Case(), self._Schedule(answers, **kw), 3)

    def _record(self, going, extended_s, cut=False, cap_s=30.0):
        from workloads.generator import spec

        wl = spec.parse({"duration": "10s", "max_duration": f"{cap_s:g}s", "rate": {"eps": 1}})
        report = {"sent_for_s": 10 + extended_s, "extended_by_s": extended_s, "cut_at_cap": cut}
        return going.record(wl, report)

    def test_it_goes_on_while_a_fault_is_pending_and_says_what_first_and_last(self):
        going = self._going(["fault x (batch 9) has not come", "the query has read past fault x (batch 9) "
                             "in 1 of 3 batches", None])
        assert [going(), going(), going()] == [True, True, False]
        record = self._record(going, 2.0)
        assert record["why"] == ("went on 2 s past the duration: at its end fault x (batch 9) has not come, "
                                 "and last the query has read past fault x (batch 9) in 1 of 3 batches; then "
                                 "every fault had landed and the query had read 3 batches past each")
        assert (record["sent_for_s"], record["extended_by_s"]) == (12, 2.0)
        assert not record["cut_at_max_duration"]

    def test_the_cap_and_a_failed_case_are_said(self):
        """Cut at max_duration, the sentence names it and the pending fault; a failed case stops
        the workload at once, whatever is pending."""
        going = self._going(["fault x (batch 99) has not come"] * 20)
        assert all(going() for _ in range(20))   # asked each second to the cap, and still pending
        record = self._record(going, 20.0, cut=True)
        assert record["cut_at_max_duration"] and record["why"] == (
            "cut at max_duration (30 s) while fault x (batch 99) has not come")
        failed = self._going(["fault x (batch 99) has not come"])
        failed.case.failure = "the driver died"
        assert failed() is False and "the case had failed" in self._record(failed, 0.0)["why"]

    def test_without_faults_it_says_so(self):
        assert self._record(self._going([], specs=()), 0.0)["why"].startswith("no fault is scheduled")
