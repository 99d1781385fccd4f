"""The hunt's plans and its shrinking, without services: the same seed draws the same plans,
each accepted by the loader, and a failing plan shrinks to the one fault that makes it fail."""

from __future__ import annotations

import pytest

from harness.hunt.plan import Space, describe, draw
from harness.hunt.shrink import Candidate, shrink
from harness.scenario import load
from harness.scenario.fault_specs import Context, fault
from tests.helpers import MINIMAL_SCENARIO

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
        """Fails whenever a replay-batch is in the plan: the rest goes, the replay comes earlier,
        and the workload gets shorter while the fault still fits."""
        start = Candidate(({"kind": "pause", "at": "4s", "target": "driver", "duration": "3s"},
                           {"kind": "replay-batch", "at": "30s", "downtime": "2s"},
                           {"kind": "stall-sink", "at": "60s", "duration": "2s"}), 90.0, "drawn")
        found = shrink(start, lambda c: any(t["kind"] == "replay-batch" for t in c.plan))
        (only,) = found.smallest.plan
        assert only["kind"] == "replay-batch" and only["at"] == "1.9s" and only["downtime"] == "0.5s"
        assert found.smallest.workload_s < 90 and found.flaky == 0
        for step in found.steps:
            assert step["failed"] == any(t["kind"] == "replay-batch" for t in step["plan"])

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
