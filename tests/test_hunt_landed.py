"""A hunt's run counts only for what landed (issue 43): a run whose fault failed or was missed is
no hold, covers only the pairs whose faults both landed, and the hunt says how many runs tested
nothing; a fault's wait for a batch stands still while another fault holds one."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest

from faults.targets import FixedPace, Targets
from workloads.wait import WaitTimeout

pytestmark = pytest.mark.unit


def _targets(tmp_path, progress=list, paused=lambda: False) -> Targets:
    return Targets(driver=lambda: None, restart_driver=lambda: None, expect_down=lambda _: None,
                   executors_log=tmp_path / "executors.jsonl", control_dir=tmp_path, progress=progress,
                   checkpoint=lambda: tmp_path, started_pids=set, query_paused=paused,
                   pace=FixedPace(batch_s=0.01, start_s=0.05))


def _hold(control, batch_id: int, at_ms: int, for_ms: int) -> None:
    """The commit gate's record of a batch it holds (workloads/pipelines/control.py)."""
    (control / f"held-{batch_id}-{at_ms}.json").write_text(json.dumps(
        {"batch_id": batch_id, "rows": 5, "at_ms": at_ms, "until_ms": at_ms + for_ms, "forever": True,
         "point": "after-write"}))


def _ended(at_ms: float) -> dict:
    """A progress record of a batch that ended at `at_ms`."""
    stamp = datetime.fromtimestamp(at_ms / 1000 - 0.1, UTC).isoformat().replace("+00:00", "Z")
    return {"timestamp": stamp, "batchDuration": 100, "batchId": 3}


class TestAWaitStandsStillWhileAnotherFaultHoldsABatch:
    """Run 1 of a hunt on a user's job: fail-task at 12.2 s, replay-batch at 15.7 s; the replay's
    hold caught the batch and fail-task's wait for a failed task ran out under it ("no 1 task(s)
    of a batch with rows failed ... within 20 s"), as it once did while the driver was down."""

    def test_a_batch_held_in_the_commit_gate_stalls_the_query(self, tmp_path):
        now_ms = int(time.time() * 1000)
        targets = _targets(tmp_path)
        assert not targets.batch_stalled()
        _hold(tmp_path, 7, now_ms, 120_000)
        assert targets.batch_stalled()

    def test_a_hold_a_later_batch_went_past_is_over(self, tmp_path):
        """A driver killed under its hold never closes the hold's record: once a batch ended
        after the hold began, the query runs again."""
        now_ms = int(time.time() * 1000)
        _hold(tmp_path, 7, now_ms - 5_000, 120_000)
        assert not _targets(tmp_path, progress=lambda: [_ended(now_ms - 1_000)]).batch_stalled()
        assert _targets(tmp_path, progress=lambda: [_ended(now_ms - 6_000)]).batch_stalled()

    def test_the_wait_outlasts_a_hold_longer_than_a_batch_s_wait(self, tmp_path, monkeypatch):
        import faults.targets as targets_mod

        waits = {"batch": 0.3, "restart": 5.0}
        monkeypatch.setattr(targets_mod, "pace_wait_s", lambda what, b, s: waits[what])
        start = time.monotonic()
        _hold(tmp_path, 7, int(time.time() * 1000), 600)   # held 0.6 s, twice the batch wait
        found = _targets(tmp_path).wait(lambda: time.monotonic() > start + 0.7 or None, "batch",
                                        "no batch", 0.02)
        assert found is True   # it came 0.1 s after the hold ended: within the 0.3 s counted

    def test_a_hold_that_never_ends_is_waited_for_a_restart_s_time_at_most(self, tmp_path, monkeypatch):
        import faults.targets as targets_mod

        waits = {"batch": 0.2, "restart": 0.3}
        monkeypatch.setattr(targets_mod, "pace_wait_s", lambda what, b, s: waits[what])
        _hold(tmp_path, 7, int(time.time() * 1000), 120_000)
        start = time.monotonic()
        with pytest.raises(WaitTimeout, match="or another fault held a batch"):
            _targets(tmp_path).wait(lambda: None, "batch", "no batch", 0.02)
        assert 0.45 < time.monotonic() - start < 2.0


def _case(faults: list[tuple[str, bool, str | None]], observed: str = "exactly-once", duplicated: int = 0,
          status: str | None = None):
    """A finished case whose faults are (kind, landed, missed)."""
    from harness.results.model import CaseResult, FaultRecord, Verdict

    why = "no 1 task(s) of a batch with rows failed within 20 s"
    records = [FaultRecord(kind, 1.0 + i, 1.0 + i, 2.0 + i, "driver", observed=landed or False,
                           detail=why if not landed else "seen", landed=landed, missed=missed)
               for i, (kind, landed, missed) in enumerate(faults)]
    holds = observed == "exactly-once" and all(landed for _, landed, _ in faults)
    verdict = Verdict("exactly-once", observed, holds, "detail", status or "")
    return CaseResult("c-h1", "exactly-once", "passthrough", "custom",
                      {"lost": 0, "duplicated": duplicated, "unexpected": 0}, verdict, {}, {}, {},
                      faults=records)


class TestARunCountsOnlyForWhatLanded:
    def test_a_run_whose_fault_did_not_land_is_not_a_hold(self):
        """Issue 43's run 1: fail-task NOT SEEN under replay-batch's hold; the hunt printed
        "holds exactly-once" and counted the pairs."""
        from harness.hunt.outcome import NOT_LANDED, STATUS, outcome, why_not_landed

        case = _case([("fail-task", False, None), ("replay-batch", True, None)])
        assert outcome(case) == NOT_LANDED and STATUS[NOT_LANDED] == "UNKNOWN"
        assert "fail-task (1s): no 1 task(s)" in why_not_landed(case)

    def test_a_missed_fault_is_not_landed_and_a_break_is_a_break_whatever_landed(self):
        from harness.hunt.outcome import BREAKS, HOLDS, NOT_LANDED, outcome

        assert outcome(_case([("kill-driver", True, None), ("pause", False, "the workload had ended")])) \
            == NOT_LANDED
        assert outcome(_case([("fail-task", False, None)], observed="at-least-once", duplicated=4)) == BREAKS
        assert outcome(_case([("kill-driver", True, None)])) == HOLDS

    def test_a_verdict_that_could_not_say_tested_nothing(self):
        from harness.hunt.outcome import UNDECIDED, outcome

        assert outcome(_case([("kill-driver", True, None)], status="UNKNOWN")) == UNDECIDED

    def test_an_output_that_could_not_be_read_is_undecided_not_a_violation(self):
        """The verdict of a sink whose read() raised says `unchecked`: its guarantee is not
        known to hold, and not known to break either. The hunt counted it as a violation (exit 1,
        then shrank it) because `unchecked` is not exactly-once."""
        from harness.hunt.outcome import UNDECIDED, outcome
        from harness.results.verdict import undecided

        case = _case([("kill-driver", True, None)])
        case.verdict = undecided("exactly-once", "the sink's read() raised: OSError")
        assert outcome(case) == UNDECIDED
        case.verdict = undecided("exactly-once", "the oracle raised", failure="the driver died")
        assert case.verdict.status == "FAIL" and outcome(case) == UNDECIDED

    def test_only_pairs_whose_faults_both_landed_are_covered(self):
        from harness.hunt.plan import Space, coverage
        from harness.scenario import load
        from harness.scenario.fault_specs import Context
        from tests.helpers import REPO

        scenario = load(REPO / "tests" / "scenarios" / "two_faults.toml")
        space = Space.of(Context(scenario.workload.duration_s, scenario.services, scenario.cases))
        plan = [{"kind": "fail-task", "at": "2s"}, {"kind": "replay-batch", "at": "6s", "downtime": "1s"},
                {"kind": "kill-driver", "at": "30s", "downtime": "1s"}]
        assert coverage(space, [plan])["pairs_covered"] == 3
        assert coverage(space, [plan], [[False, True, True]])["pairs_covered"] == 1

    def test_the_hunt_says_how_many_runs_tested_nothing_and_ends_unknown(self):
        """No violation and a run that tested nothing: exit 4 (UNKNOWN), never "every run held"."""
        from harness.hunt.search import HuntSearch, ended, tally

        tried = [{"outcome": "holds", "times_s": {"total": 30.0, "startup": 10.0, "workload": 12.0,
                                                  "drain": 3.0, "check": 5.0}},
                 {"outcome": "not-landed", "times_s": {"total": 40.0, "startup": 10.0, "workload": 20.0,
                                                       "drain": 4.0, "check": 6.0}}]
        hunt = {"stopped": "runs", "found": None, "tried": tried, **tally(tried)}
        assert hunt["tested_nothing"] == 1 and hunt["status"] == "UNKNOWN"
        assert hunt["run_time_median_s"] == {"total": 35.0, "startup": 10.0, "workload": 16.0, "drain": 3.5,
                                             "check": 5.5}
        assert "1 of the 2 runs tested nothing" in ended(hunt) and "every run held" not in ended(hunt)

        class Result:
            sections = {"hunt": hunt}

        search = HuntSearch.of(None, 2, 1, None, "10m", False)
        assert search.exit_code(Result()) == 4
        Result.sections = {"hunt": {**hunt, **tally(tried[:1])}}
        assert search.exit_code(Result()) == 0
        Result.sections = {"hunt": {**hunt, "found": {"run": 2}}}
        assert search.exit_code(Result()) == 1


class TestWhereARunsTimeWent:
    def test_start_up_workload_drain_and_check(self, tmp_path):
        """From the case's own marks: its first batch (warm), the generator's report (the workload
        sent, the faults observed), the driver asked to stop (drained), the result built."""
        import os
        from types import SimpleNamespace

        from harness.hunt.search import wall_times
        from harness.results.rundir import CaseDir

        files = CaseDir(tmp_path)
        files.generator.write_text("{}")
        os.utime(files.generator, (1030.0, 1030.0))
        case = SimpleNamespace(running_from_ms=1012_000.0, stopping_ms=1034_000.0, files=files)
        assert wall_times(case, 1000.0, 1041.0) == {"total": 41.0, "startup": 12.0, "workload": 18.0,
                                                     "drain": 4.0, "check": 7.0}

    def test_the_terminal_shows_each_run_s_time_new_behaviours_and_runs_that_tested_nothing(self):
        from harness.hunt.report import render

        hunt = {"case": "c", "seed": 1, "strategy": "both", "kinds": ["kill-driver"], "stopped": "runs",
                "found": None, "minimal": None, "behaviours_seen": 3, "tested_nothing": 1,
                "run_time_median_s": {"total": 35.0, "startup": 10.0, "workload": 16.0, "drain": 3.5,
                                      "check": 5.5},
                "ended": "no run broke the guarantee; 1 of the 2 runs tested nothing",
                "tried": [{"run": 1, "outcome": "holds", "breaks": False, "observed": "exactly-once",
                           "plan": [{"kind": "kill-driver", "at": "3s", "downtime": "1s"}],
                           "times_s": {"total": 30.0}, "source": "covering",
                           "new_behaviours": [["kill-driver without point",
                                               "re-ran a batch with the same offsets", "nothing"]]},
                          {"run": 2, "outcome": "not-landed", "breaks": False, "observed": "exactly-once",
                           "plan": [{"kind": "fail-task", "at": "3s"}], "times_s": {"total": 40.0},
                           "source": "mutation", "change": "run 1, fail-task added before kill-driver",
                           "not_landed": "fail-task (3s): no task failed", "new_behaviours": []}]}
        text = render(hunt)
        assert "run   1  holds" in text and "   30s  covering" in text
        assert "new: kill-driver without point: Spark re-ran a batch with the same offsets" in text
        assert "run   2  NOT LANDED" in text and "not landed: fail-task (3s): no task failed" in text
        assert "behaviours: 3 seen in 2 runs" in text and "tested nothing: 1 of the 2 runs" in text
        assert "time per run: median 35s (startup 10s, workload 16s, drain 3.5s, check 5.5s)" in text


class TestAHoldWaitsForAnotherFaultsRestart:
    def test_a_kill_at_a_point_asks_for_its_hold_once_the_restarting_driver_is_up(self, tmp_path):
        """A hunt's run 2: kill-driver at after-commit, then kill-driver at after-write 6 s later.
        The second asked for its hold while the first's new driver started; the hold caught that
        driver's first batch, the first kill's wait for it ran out (NOT SEEN), and the second
        kill waited as long for the driver to be up. The hold is asked for once it is."""
        from dataclasses import replace

        from faults.driver import hold_at

        order: list[str] = []

        def driver():   # Targets.driver: returns once no fault has the driver down or restarting
            order.append("driver up")
            return None

        def wait(condition, what, message, every_s=0.2):
            order.append("hold asked" if (tmp_path / "hold-commit").exists() else "no hold asked")
            _hold(tmp_path, 9, int(time.time() * 1000), 120_000)
            return condition()

        targets = replace(_targets(tmp_path), driver=driver)
        targets.wait = wait   # type: ignore[method-assign]
        held = hold_at(targets, "after-write")
        assert held["batch_id"] == 9
        assert order == ["driver up", "hold asked"], order


class TestAfterSparkStoppedTheQuery:
    def test_faults_after_a_refusal_did_not_fail_the_run(self):
        """A hunt's seed 3, run 1: kafka-retention (failOnDataLoss) and Spark failed the query;
        the two kills after it found no driver ("pid ... is gone", no batch reached the commit
        window). The run ended in Spark's refusal, not in faults that failed to land."""
        from harness.hunt.outcome import NOT_LANDED, REFUSED, outcome

        kill = ("kill-driver", False, None)
        case = _case([("kafka-retention", True, None), kill, kill])
        case.faults[0].outcome = "refused"
        assert outcome(case) == REFUSED
        case = _case([("fail-task", False, None), ("kafka-retention", True, None), kill])
        case.faults[1].outcome = "refused"
        assert outcome(case) == NOT_LANDED   # the fail-task before the refusal did not land

    def test_pairs_after_a_refusal_are_given_up_at_once(self):
        """No later fault of any run can land after a fault Spark stops the query for: none of
        the pairs from it is sought (each such plan cost seed 3 a run)."""
        from harness.hunt import behaviour as bh
        from harness.hunt.feedback import COVERING, Planner, Proposal
        from harness.hunt.plan import Space, choice_of
        from harness.scenario import load
        from harness.scenario.fault_specs import Context
        from tests.helpers import REPO

        scenario = load(REPO / "tests" / "scenarios" / "two_faults.toml")
        space = Space.of(Context(scenario.workload.duration_s, scenario.services, scenario.cases))
        planner = Planner(space, 3, COVERING)
        plan = [{"kind": "kafka-retention", "at": "3.3s"},
                {"kind": "kill-driver", "at": "7.4s", "downtime": "1.2s"}]
        planner.tell(Proposal(plan, "covering"), [True, False],
                     {bh.Behaviour("kafka-retention", bh.REFUSED, bh.NOTHING)})
        assert (choice_of(plan[0]), choice_of(plan[1])) in planner.cover.given_up
        after = {b for a, b in planner.cover.given_up if a == choice_of(plan[0])}
        assert after == {b for a, b in space.possible if a == choice_of(plan[0])}   # every one from it


class TestAKillWithoutPointAmongOtherHolds:
    """A hunt's seed 4, run 9: kill-driver at after-write (4 s), replay-batch (8.2 s), kill-driver
    without a point (11.9 s). The last found the first kill's hold record, which a killed driver
    never closes, and said it killed "while batch 5 was held"; its heal then withdrew the
    replay's pending hold request, and the replay held nothing (not landed)."""

    def test_a_killed_driver_s_hold_is_no_live_hold(self, tmp_path):
        now_ms = int(time.time() * 1000)
        _hold(tmp_path, 5, now_ms - 10_000, 120_000)
        assert _targets(tmp_path).live_hold()["batch_id"] == 5
        assert _targets(tmp_path, progress=lambda: [_ended(now_ms - 2_000)]).live_hold() is None

    def test_a_kill_without_point_leaves_another_fault_s_hold_request(self, tmp_path):
        from faults.driver import KillDriver
        from faults.spec import FaultSpec
        from workloads.pipelines.control import HOLD_COMMIT, request

        request(tmp_path, HOLD_COMMIT, "after-write")   # the replay-batch's, pending
        kill = KillDriver(FaultSpec("kill-driver", 11.9, "driver", downtime_s=2.0), _targets(tmp_path))
        kill._heal()   # never killed: nothing to restart
        assert (tmp_path / HOLD_COMMIT).exists()


class _Hunt:
    """A hunt over two_faults.toml whose runs are made, not run: each plan's faults all landed,
    and its verdict is `status` (its Spark and sink records unread: the run directory is empty)."""

    def __init__(self, status: str, runs: int):
        from types import SimpleNamespace

        from harness.hunt.feedback import COVERING
        from harness.hunt.search import Hunt, Options
        from harness.scenario import load
        from tests.helpers import REPO

        scenario = load(REPO / "tests" / "scenarios" / "two_faults.toml")

        def no_case_dir(name):
            raise FileNotFoundError(name)

        outer = self

        class Made(Hunt):
            def trial(self, plan, label):
                from harness.hunt.plan import seconds

                ordered = sorted(plan, key=lambda t: seconds(t["at"]))
                case = _case([(t["kind"], True, None) for t in ordered], status=status)
                case.name = f"c-{label}"
                outer.runs.append(case)
                return case

        self.runs: list = []
        options = Options(runs=runs, seed=1, strategy=COVERING, shrink=False)
        self.hunt = Made(scenario, scenario.cases[0], None, SimpleNamespace(case=no_case_dir), "r",
                         SimpleNamespace(step=lambda *_: None), None, options, [])


class TestAnUndecidedRunCoversNothing:
    """A run whose faults all landed but whose verdict could not say (UNKNOWN: a sink whose read()
    raised) tested nothing: it covers none of its pairs, so the hunt tries them again (issue 48:
    they were counted covered, and a pair whose only run was UNKNOWN was never tried again)."""

    def test_an_undecided_hunt_run_covers_nothing(self):
        made = _Hunt("UNKNOWN", runs=2)
        out = made.hunt.run()
        assert [t["outcome"] for t in out["tried"]] == ["undecided", "undecided"]
        assert all(all(t["landed"]) for t in out["tried"])   # every fault landed: hunt.json says so
        assert out["coverage"]["pairs_covered"] == 0, out["coverage"]
        assert made.hunt.planner.cover.covered == 0
        assert out["tested_nothing"] == 2 and out["status"] == "UNKNOWN"

    def test_its_pairs_are_tried_again(self):
        """The first covering plan, undecided, is the second one too (a decided run would
        have covered its pairs, and the next plan would be another)."""
        undecided, held = _Hunt("UNKNOWN", runs=2), _Hunt("PASS", runs=2)
        plans = [[t["plan"] for t in h.hunt.run()["tried"]] for h in (undecided, held)]
        assert plans[0][0] == plans[1][0]
        first_pairs = _pairs_of(plans[0][0])
        assert first_pairs & _pairs_of(plans[0][1]), plans[0]
        assert not first_pairs & _pairs_of(plans[1][1]), plans[1]

    def test_a_decided_run_covers_its_pairs(self):
        """The twin: every fault landed and the verdict held: its pairs are covered."""
        made = _Hunt("PASS", runs=1)
        out = made.hunt.run()
        assert [t["outcome"] for t in out["tried"]] == ["holds"]
        assert out["coverage"]["pairs_covered"] == len(_pairs_of(out["tried"][0]["plan"])) > 0

    def test_coverage_of_undecided_runs_is_none(self):
        from harness.hunt.plan import Space, coverage
        from harness.scenario import load
        from harness.scenario.fault_specs import Context
        from tests.helpers import REPO

        scenario = load(REPO / "tests" / "scenarios" / "two_faults.toml")
        space = Space.of(Context(scenario.workload.duration_s, scenario.services, scenario.cases))
        plan = [{"kind": "fail-task", "at": "2s"}, {"kind": "replay-batch", "at": "6s", "downtime": "1s"},
                {"kind": "kill-driver", "at": "30s", "downtime": "1s"}]
        assert coverage(space, [plan], [[True, True, True]], [True])["pairs_covered"] == 3
        assert coverage(space, [plan], [[True, True, True]], [False])["pairs_covered"] == 0


def _pairs_of(plan: list[dict]) -> set:
    from harness.hunt.plan import choice_of, pairs_of, seconds

    return pairs_of([choice_of(t) for t in sorted(plan, key=lambda t: seconds(t["at"]))])


class TestARefusedRunThatWroteWrongValues:
    """Spark refused to go on after a fault, and the rows it wrote before it stopped carry wrong
    values: a violation (issue 48: a refusal broke only on copies and rows nothing sent explains)."""

    def _refused(self, wrong: int = 0, finding: bool = False):
        from harness.results.model import Finding

        case = _case([("kafka-retention", True, None)], observed="at-most-once")
        case.faults[0].outcome = "refused"
        case.events["wrong"] = wrong
        if finding:
            case.findings = [Finding("wrong-value", 3, story="a window counted an event twice")]
        return case

    def test_wrong_values_break_a_refused_run(self):
        from harness.hunt.outcome import BREAKS, outcome

        assert outcome(self._refused(wrong=2)) == BREAKS
        assert outcome(self._refused(finding=True)) == BREAKS

    def test_a_refused_run_with_right_values_is_refused_not_a_break(self):
        """The twin: the same refusal, every value it wrote right (what it never read is not lost
        by the sink)."""
        from harness.hunt.outcome import REFUSED, outcome

        assert outcome(self._refused()) == REFUSED
