"""transformWithState's timers under faults, end to end (issue 49, part 2): a planted
processor that registers its timers again on recovery FAILs with timer-fired-twice, and its
correct twin PASSes with no timer finding; failed_logins' own processor fires each timer once
under kill-executor, fail-task after the state commit, clock-jump and kill-driver
(tests/scenarios/timer_faults.toml).

Setup: nothing; each run starts its own Kafka, PostgreSQL and Spark local-cluster. Both runs are
tests/scenarios/timer_rearm*.toml: failed_logins (20 users, 100 events/s for 30 s) with the
scenario's own processor (tests/scenarios/timer_rearm.py), its driver killed 6 s after the
warm-up between a batch's sink write and Spark's commit, and started again 1 s later; the new
driver runs that batch again. Steps: run the scenario; check from the run's evidence that the
kill bit (it landed, the batch ran again, the query started twice on the checkpoint); then the
timers' check (summary.json's `timers`), its findings and the verdict. Full bench only
(tox -e bench): under flock at a load average of 5 to 7, the pair took 579 s and the faults'
case 334 s.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from harness.check import timers
from tests.helpers import run_scenario

pytestmark = [pytest.mark.integration, pytest.mark.e2e_variation]

_run = run_scenario   # tests/scenarios/<name>.toml, run into tmp_path/<name>


def _the_kill_bit(run_dir: Path, case: dict, output: str) -> None:
    """The kill landed between the sink's write and Spark's commit, the new driver ran the held
    batch again, and the query started twice on the checkpoint (timers/starts.jsonl: the
    processor's generation 1 is what makes the plant register its timers again)."""
    (fault,) = case["faults"]
    if not fault.get("landed"):
        pytest.fail(f"the kill did not land at its point: {fault.get('landed_detail')}\n{output}")
    again = (fault.get("recovery") or {}).get("batches_reexecuted", 0)
    assert again > 0, f"no batch ran again after the kill: {fault.get('recovery')}, {fault.get('detail')}"
    starts = (run_dir / "cases" / case["name"] / "timers" / "starts.jsonl").read_text().splitlines()
    assert len(starts) == 2, f"the query started {len(starts)} time(s) on its checkpoint, not 2"


class TestTimerRearm:
    def test_the_plant_fires_timers_twice_after_the_kill(self, tmp_path):
        """timer_rearm.toml: on the batch the new driver runs first, each user with input
        registers again every timer it ever set, and those that fired before the kill fire
        again: timer-fired-twice names them, each second firing at or after that batch, and
        the case FAILs on it (the output itself is right: a timer fired again forgets nothing)."""
        run_dir, summary, output = _run(tmp_path, "timer_rearm")
        (case,) = summary["cases"]
        _the_kill_bit(run_dir, case, output)
        seen = case.get("timers") or {}
        assert seen.get("fired_twice", 0) > 0, f"{seen}\n{output}"
        case_dir = run_dir / "cases" / case["name"]
        twice = pd.read_parquet(case_dir / "timers-check" / "fired-twice.parquet")
        firings, _ = timers.read_firings(case_dir / "timers")
        restarted_ms = json.loads((case_dir / "timers" / "starts.jsonl").read_text().splitlines()[1])["at_ms"]
        when = firings.groupby(["key", "timer_ms", "batch"])["at_ms"].min()
        def at_ms(which: str) -> list[int]:
            rows = zip(twice["key"], twice["timer_ms"], twice[which], strict=True)
            return [when[(k, t, b)] for k, t, b in rows]

        again_ms, first_ms = at_ms("again"), at_ms("first")
        # the plant registers again on recovery only: every second firing is the new driver's
        assert min(again_ms) > restarted_ms, twice.to_string()
        assert min(first_ms) < restarted_ms, twice.to_string()
        (finding,) = [f for f in case["findings"] if f["class"] == "timer-fired-twice"]
        assert finding["count"] == seen["fired_twice"]
        assert all("kill-driver" in (w["fault"] or "") for w in finding["witness"]), finding["witness"]
        assert "fired in batch" in finding["story"], finding["story"]
        assert not [f for f in case["findings"] if f["class"] == "timer-never-fired"]
        assert case["verdict"]["status"] == "FAIL", case["verdict"]
        assert "transformWithState's timers" in case["verdict"]["detail"], case["verdict"]["detail"]

    def test_its_twin_fires_each_timer_once(self, tmp_path):
        """timer_rearm_twin.toml: the same kill and the same re-registration, of the timers
        still pending only: every timer the watermark passed fired once in a committed batch,
        and the case PASSes."""
        run_dir, summary, output = _run(tmp_path, "timer_rearm_twin")
        (case,) = summary["cases"]
        _the_kill_bit(run_dir, case, output)
        seen = case.get("timers") or {}
        assert seen.get("expected", 0) > 0 and seen["counted"] >= seen["expected"], seen
        assert (seen["fired_twice"], seen["never_fired"]) == (0, 0), seen
        assert not [f for f in case.get("findings", []) if f["class"].startswith("timer-")]
        assert case["verdict"]["status"] == "PASS", case["verdict"]


class TestTimersUnderFaults:
    def test_each_timer_fires_once_under_each_fault(self, tmp_path):
        """timer_faults.toml: failed_logins' own processor, 70 s at 100 events/s, under
        kill-executor, fail-task after the state commit, a +30 s jump of the driver's clock and
        kill-driver at after-write, one after another: each lands, and every timer the watermark
        passed fired once in a committed batch (a retried task's and a batch run again's firings
        counted once); the case PASSes."""
        run_dir, summary, output = _run(tmp_path, "timer_faults")
        (case,) = summary["cases"]
        faults = {f["kind"]: f for f in case["faults"]}
        assert set(faults) == {"kill-executor", "fail-task", "clock-jump", "kill-driver"}, output
        missed = {k: f.get("landed_detail") or f.get("detail") for k, f in faults.items()
                  if not f.get("landed")}
        assert not missed, f"faults that did not land: {missed}\n{output}"
        kill = faults["kill-driver"]
        assert (kill.get("recovery") or {}).get("batches_reexecuted", 0) > 0, kill
        seen = case.get("timers") or {}
        assert seen.get("expected", 0) > 0 and seen["counted"] >= seen["expected"], seen
        assert (seen["fired_twice"], seen["never_fired"]) == (0, 0), seen
        assert not [f for f in case.get("findings", []) if f["class"].startswith("timer-")]
        # the processor's state after each fault and at the end: each variable and the timers as
        # the model says (harness/check/logins.py), none diverged
        state = case.get("state_check") or {}
        after = {c["after"].split(" at ")[0] for c in state.get("checked", [])}
        # (two faults whose first batch after is the same batch share its read)
        assert "final" in after and len(after - {"final"}) >= 2, state
        stores = {c.get("store") for c in state.get("checked", [])}
        assert stores == {"pending", "seen", "raised", "registered-timers"}, state
        assert state.get("diverged") == 0, state
        assert case["verdict"]["status"] == "PASS", case["verdict"]
