"""The hunt's plans and its shrinking, without services: the same seed draws the same plans,
each accepted by the loader, and a failing plan shrinks to the one fault that makes it fail."""

from __future__ import annotations

import pytest

from harness.hunt import shrink as shrink_mod
from harness.hunt.plan import Space, choice_of, coverage, covering, describe, draw, plans
from harness.hunt.shrink import Candidate, shrink
from harness.scenario import load
from harness.scenario.fault_specs import Context, fault
from tests.helpers import MINIMAL_SCENARIO, REPO

pytestmark = pytest.mark.unit


@pytest.fixture
def space(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(MINIMAL_SCENARIO.replace('duration = "1s"', 'duration = "90s"'))
    scenario = load(path)
    return Space.of(Context(scenario.workload.duration_s, scenario.services, scenario.cases))


class TestPlans:
    def test_the_same_seed_draws_the_same_plans(self, space):
        assert [draw(space, 7, i) for i in range(5)] == [draw(space, 7, i) for i in range(5)]
        assert [draw(space, 7, i) for i in range(5)] != [draw(space, 8, i) for i in range(5)]

    def test_every_drawn_fault_is_one_the_loader_accepts(self, space):
        """Kinds, times, targets and keys: each table loads, in a case it can run in."""
        ctx = space.ctx
        for run in range(30):
            plan = draw(space, 3, run)
            assert 1 <= len(plan) <= 3, plan
            for table in plan:
                fault(table, "plan", ctx)

    def test_kinds_a_case_cannot_run_are_never_drawn(self, tmp_path):
        """A Parquet sink has no commit window: no delay-commit, replay-batch, fail-batch, stall-sink."""
        path = tmp_path / "s.toml"
        path.write_text(MINIMAL_SCENARIO.replace('duration = "1s"', 'duration = "90s"').replace(
            'guarantee = "exactly-once"', 'guarantee = "exactly-once"\nsink = "parquet"'))
        scenario = load(path)
        space = Space.of(Context(scenario.workload.duration_s, scenario.services, scenario.cases))
        assert not {"delay-commit", "replay-batch", "fail-batch", "stall-sink"} & set(space.kinds)
        assert "kill-executor" in space.kinds

    def test_a_plan_reads_as_one_line(self):
        plan = [{"kind": "stall-sink", "at": "3s", "duration": "2s"}]
        assert describe(plan) == "stall-sink at 3s (duration 2s)"


class TestShrink:
    def test_a_plan_shrinks_to_the_one_fault_that_fails_it(self):
        """Fails whenever a replay-batch is in the plan: the rest goes (6 runs), then the replay
        comes earlier until the shrink's 12 runs, one kept back, are spent, and the last move is
        confirmed by a second run."""
        start = Candidate(({"kind": "pause", "at": "4s", "target": "driver", "duration": "3s"},
                           {"kind": "replay-batch", "at": "30s", "downtime": "2s"},
                           {"kind": "stall-sink", "at": "60s", "duration": "2s"}), 90.0, "drawn")
        found = shrink(start, lambda c: any(t["kind"] == "replay-batch" for t in c.plan))
        (only,) = found.smallest.plan
        assert only["kind"] == "replay-batch" and only["at"] == "1.9s" and only["downtime"] == "2s"
        assert found.runs == 11 and found.flaky == 0 and found.steps[-1]["phase"] == "confirm"
        for step in found.steps:
            assert step["failed"] == any(t["kind"] == "replay-batch" for t in step["plan"])

    def test_a_last_move_that_holds_when_run_again_gives_way_to_the_move_before(self):
        """The two-fault hunt's minimal plan (a kill 0.7 s after partitions were added) held when
        run again: it sat on the edge of its timing. A move accepted on one failing run is run
        once more; the plan before it is the answer when it holds."""
        start = Candidate(({"kind": "kill-driver", "at": "8s", "downtime": "1s"},), 60.0, "drawn")
        seen: dict[str, int] = {}

        def fails(c: Candidate) -> bool:
            at = c.plan[0]["at"] if c.plan else None
            seen[at] = seen.get(at, 0) + 1
            # 8s and 4s fail every time; 2s failed once, and holds from its second run on
            return at in ("8s", "4s") or (at == "2s" and seen[at] == 1)

        found = shrink(start, fails)
        assert found.smallest.plan[0]["at"] == "4s", found.steps
        assert [s["phase"] for s in found.steps][-2:] == ["confirm", "confirm"]
        assert found.flaky == 1 and found.runs <= shrink_mod.SHRINK_RUNS

    def test_the_workload_gets_shorter_while_the_fault_still_fits(self):
        start = Candidate(({"kind": "replay-batch", "at": "2s", "downtime": "0.5s"},), 90.0, "drawn")
        found = shrink(start, lambda c: bool(c.plan))
        assert found.smallest.workload_s < 40 and found.smallest.plan[0]["at"] == "1s"
        assert all(shrink_mod._end(t) <= found.smallest.workload_s for t in found.smallest.plan)

    def test_a_candidate_that_passed_both_runs_is_not_run_again(self):
        """Moving the one fault earlier makes "without it" the empty plan again: a paimon hunt
        ran the empty plan twice over (4 runs, about 7 minutes) before this."""
        runs = []

        def fails(c):
            runs.append(c.plan)
            return bool(c.plan)

        start = Candidate(({"kind": "replay-batch", "at": "8s", "downtime": "2s"},), 12.0, "drawn")
        shrink(start, fails)
        assert runs.count(()) == 2, runs   # the empty plan's two runs, once

    def test_a_candidate_that_fails_only_on_its_second_run_counts_and_is_flaky(self):
        """Either of two runs decides; the disagreement is counted."""
        outcomes = iter([False, True] + [False] * 100)
        start = Candidate(({"kind": "stall-sink", "at": "3s", "duration": "2s"},), 30.0, "drawn")
        found = shrink(start, lambda c: next(outcomes))
        assert found.flaky == 1 and found.smallest.plan == ()


TWO_FAULTS = REPO / "tests" / "scenarios" / "two_faults.toml"
# what breaks tests/scenarios/fixture_sinks.py GuardsFirstPartitions: partitions added, then a
# batch run again after the sink's write
REPLAYS_AFTER_WRITE = {("replay-batch", None), ("kill-driver", "after-write"), ("fail-batch", "after-write")}


def _two_faults_space() -> Space:
    scenario = load(TWO_FAULTS)
    return Space.of(Context(scenario.workload.duration_s, scenario.services, scenario.cases))


def _breaks_it(plan: list[dict]) -> bool:
    choices = [choice_of(t) for t in plan]
    return any(a.kind == "kafka-partitions" and (b.kind, b.value) in REPLAYS_AFTER_WRITE
               for i, a in enumerate(choices) for b in choices[i + 1:])


class TestCoverage:
    def test_the_covering_plans_hold_every_possible_ordered_pair(self):
        """Every ordered pair of choices (a kind, with a point or rows where the hunt covers one)
        that fits the workload is in some covering plan, and the plans come before any repeat."""
        space = _two_faults_space()
        planned = plans(space, 1, len(covering(space, 1)) + 10)
        cov = coverage(space, planned)
        assert cov["pairs_covered"] == cov["pairs_possible"] == len(space.possible) > 200, cov
        assert all(2 <= len(p) <= 3 for p in planned[:len(covering(space, 1))])

    def test_pairs_whose_second_fault_restarts_the_driver_come_first(self):
        """A batch run again is where a sink's exactly-once breaks: those pairs are all covered
        before the rest are."""
        space = _two_faults_space()
        tiers = coverage(space, plans(space, 1, len(covering(space, 1)) + 10))["tier_covered_by_run"]
        assert tiers["second-restarts"] < tiers["first-restarts"] < tiers["rest"], tiers

    def test_the_points_are_drawn_too(self):
        """kill-driver at each of its points, fail-batch at both, fail-task with 1 row and with half."""
        labels = {c.label for c in _two_faults_space().choices}
        assert {"kill-driver without point", "kill-driver at before-write", "kill-driver at after-write",
                "kill-driver at after-commit", "fail-batch at before-write", "fail-batch at after-write",
                "fail-task with rows 1", "fail-task without rows"} <= labels

    def test_a_two_fault_ordered_bug_is_in_the_first_25_plans_of_every_seed(self):
        """Partitions added, then a replay after the sink's write: sampling drew it in 12 runs
        from 2% of seeds; the covering plans hold it within 25 runs from each of seeds 1-5
        (docs/hunt.md: within 25 from each of 50 seeds, with fourteen kinds)."""
        space = _two_faults_space()
        for seed in range(1, 6):
            first = next((i + 1 for i, p in enumerate(plans(space, seed, 25)) if _breaks_it(p)), None)
            assert first is not None, f"seed {seed}: not in its first 25 plans"

    def test_the_seed_fixes_the_plans_and_orders_them(self):
        space = _two_faults_space()
        assert plans(space, 3, 20) == plans(space, 3, 20)
        assert plans(space, 3, 20) != plans(space, 4, 20)

    def test_every_covering_plan_loads(self):
        space = _two_faults_space()
        for plan in plans(space, 2, 40):
            for table in plan:
                fault(table, "plan", space.ctx)


class TestTwoPhaseShrink:
    def test_the_faults_are_settled_before_any_time_moves(self):
        """Removals first: the plan's one needless fault goes in one run, both needed ones hold
        twice when removed; only then do the times move, within their own budget, and the
        removals are not tried again (the paimon hunt re-tested "without the other fault" after
        every move: 12 of 20 candidates). A two-fault plan shrinks in at most 12 runs."""
        start = Candidate(({"kind": "pause", "at": "3s", "target": "driver", "duration": "2s"},
                           {"kind": "kafka-partitions", "at": "8s", "count": 1},
                           {"kind": "replay-batch", "at": "20s", "downtime": "2s"}), 60.0, "found")

        def fails(c):
            kinds = [t["kind"] for t in c.plan]
            return "kafka-partitions" in kinds and "replay-batch" in kinds and (
                kinds.index("kafka-partitions") < kinds.index("replay-batch"))

        found = shrink(start, fails)
        assert [t["kind"] for t in found.smallest.plan] == ["kafka-partitions", "replay-batch"]
        phases = [s["phase"] for s in found.steps]
        assert phases == sorted(phases, key=lambda p: p != "remove"), phases   # removals, then moves
        assert found.runs <= 12 and found.ended == "shrunk", (found.runs, found.ended)

    def test_a_two_fault_plan_shrinks_in_at_most_12_runs_when_every_move_holds(self):
        """The worst case for the goal: both faults needed (4 runs of removals), and no earlier
        or shorter fault fails again, each move held twice: the moves stop where a candidate's
        two runs would pass 12."""
        start = Candidate(({"kind": "kafka-partitions", "at": "8s", "count": 1},
                           {"kind": "replay-batch", "at": "20s", "downtime": "2s"}), 60.0, "found")
        found = shrink(start, lambda c: c == start or c.plan == start.plan and c.workload_s == 60.0)
        assert found.runs <= 12 and found.smallest == start, found.steps
        assert [s["phase"] for s in found.steps].count("remove") == 2

    def test_a_candidate_the_budget_cuts_off_is_not_run_not_held(self):
        """After the budget is spent, fails() answers None: the candidate is recorded as not run
        (it was recorded as held, runs [False, False], which inflated the flake figures), and
        the shrinking says the budget ended it."""
        answers = iter([True, None])
        start = Candidate(({"kind": "pause", "at": "3s", "target": "driver", "duration": "2s"},
                           {"kind": "replay-batch", "at": "20s", "downtime": "2s"}), 60.0, "found")
        found = shrink(start, lambda c: next(answers))
        assert found.ended == "budget"
        cut = found.steps[-1]
        assert cut["not_run"] and cut["runs"] == [] and cut["failed"] is None, cut
        assert found.runs == 1


def test_minimal_toml_reruns_a_plan_of_a_user_s_own_kind_from_anywhere(tmp_path):
    """The hunt's minimal.toml lands in the run directory: it names the scenario's directory
    once in `imports`, and keeps `fault_kinds`, so a plan holding the user's own kind loads
    there (examples/fault-kinds/)."""
    from harness.hunt.search import minimal_toml

    scenario = load(REPO / "examples" / "fault-kinds" / "scenario.toml")
    plan = [{"kind": "restore-checkpoint", "at": "3s", "downtime": "1s"}]
    path = tmp_path / "run" / "minimal.toml"
    path.parent.mkdir()
    path.write_text(minimal_toml(scenario, scenario.cases[0], plan, 40.0))
    again = load(path)
    assert [f.kind for f in again.faults] == ["restore-checkpoint"]
    assert again.fault_kinds == scenario.fault_kinds
    import tomllib

    assert tomllib.loads(path.read_text())["imports"] == [str(REPO / "examples" / "fault-kinds")]


def test_a_query_spark_stopped_is_no_violation_unless_it_wrote_copies():
    """kafka-retention under the default failOnDataLoss: Spark fails the query (outcome refused)
    and the events it never read are not in the sink. The hunt's seed 4 called that a violation
    (observed at-most-once); copies written before the stop still are one."""
    from harness.hunt.search import breaks
    from harness.results.model import CaseResult, FaultRecord, Verdict

    def case(lost: int, duplicated: int, outcome: str | None) -> CaseResult:
        observed = "none" if lost and duplicated else ("at-most-once" if lost else
                                                       ("at-least-once" if duplicated else "exactly-once"))
        fault = FaultRecord("kafka-retention", 1.5, 1.5, 1.6, "topic t", True, outcome=outcome)
        return CaseResult("c", "exactly-once", "passthrough", "custom",
                          {"lost": lost, "duplicated": duplicated, "unexpected": 0},
                          Verdict("exactly-once", observed, not (lost or duplicated), ""), {}, {}, {},
                          faults=[fault])

    assert not breaks(case(lost=17_000, duplicated=0, outcome="refused"))
    assert breaks(case(lost=17_000, duplicated=5, outcome="refused"))
    assert breaks(case(lost=3, duplicated=0, outcome=None))
    assert breaks(case(lost=3, duplicated=0, outcome="accepted"))


def test_a_refusal_after_a_crash_a_job_must_survive_breaks_it():
    """lose-unsynced is a machine's crash: Spark refusing the checkpoint it left (the torn log of
    run 20261126T162645-spark-38033-ec3b) is a finding, with 0 lost and 0 duplicated."""
    from harness.hunt.search import breaks
    from harness.results.model import CaseResult, FaultRecord, Verdict

    def case(kind: str) -> CaseResult:
        fault = FaultRecord(kind, 15.0, 15.0, 15.1, "driver", True, outcome="refused")
        return CaseResult("c", "exactly-once", "tumbling_count", "postgres",
                          {"lost": 0, "duplicated": 0, "unexpected": 0},
                          Verdict("exactly-once", "exactly-once", False, ""), {}, {}, {}, faults=[fault])

    assert breaks(case("lose-unsynced"))
    assert not breaks(case("kafka-retention"))
    assert not breaks(case("corrupt-checkpoint"))


def test_a_kind_kept_from_drawing_is_hunted_when_asked_by_name(tmp_path, monkeypatch):
    """lose-unsynced and hide-commit are not drawn unasked; `--kinds` names them, and the plans
    hold them; a kind whose keys cannot be drawn is still refused with its reason. (FUSE counts
    as installed: the unit lane runs where fusermount3 is not.)"""
    from harness.errors import ScenarioError
    from harness.hunt.plan import Space, plans
    from harness.scenario import fault_specs
    from harness.scenario.load import load
    from harness.services import fuse_mount

    monkeypatch.setattr(fuse_mount, "fuse_problem", lambda: None)
    scenario = load(REPO / "examples" / "known-bugs" / "spark-38033" / "scenario.toml")
    ctx = fault_specs.Context(scenario.workload.duration_s, scenario.services, scenario.cases,
                              warmup_s=0.0, pipeline=scenario.pipeline)
    assert "lose-unsynced" not in Space.of(ctx).kinds
    space = Space.of(ctx, ("lose-unsynced", "kill-driver"))
    assert space.kinds == ("lose-unsynced", "kill-driver")
    drawn = {f["kind"] for plan in plans(space, 1, 6) for f in plan}
    assert "lose-unsynced" in drawn
    with pytest.raises(ScenarioError, match="restart-with"):
        Space.of(ctx, ("restart-with",))
