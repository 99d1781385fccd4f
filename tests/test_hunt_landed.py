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
