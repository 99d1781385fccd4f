"""A batch id planned twice over different offsets (issue 41's rollback-last-batch): the journal
keeps both plans of offsets/N, the checkpoint reader tells them apart, and the finding of the
events the second plan added tells the two runs, the fault that removed the first, and what to
fix; the finding lists the fault."""

import json
import os

import pandas as pd
import pytest

from harness import check as checker
from harness.check.checkpoint import Batch, earlier_plans, journal_of
from harness.findings import Inputs, build
from harness.results.model import FaultRecord
from harness.run.journal import Journal
from tests.test_findings import PASSTHROUGH, T0_S, _ms, _only, _truth

pytestmark = pytest.mark.unit


def _write(path, text: str, at_s: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    ns = int(_ms(at_s) * 1_000_000)
    os.utime(path, ns=(ns, ns))


def _offsets(end: int) -> str:
    return "v1\n" + json.dumps({"batchWatermarkMs": 0}) + "\n" + json.dumps({"events": {"0": end}})


COMMIT = 'v1\n{"nextBatchWatermarkMs":0}'


def _rolled_back(tmp_path):
    """Batch 1 planned over offsets 2-3 at 2.0 s and committed at 2.5 s; a fault removed its
    offsets/1 and commits/1 at 3.0 s; the new driver planned batch 1 over offsets 2-5 at 5.0 s,
    committed at 5.5 s. The journal polled in between."""
    cp = tmp_path / "checkpoint"
    _write(cp / "offsets" / "0", _offsets(2), 0.5)
    _write(cp / "commits" / "0", COMMIT, 1.0)
    _write(cp / "offsets" / "1", _offsets(4), 2.0)
    _write(cp / "commits" / "1", COMMIT, 2.5)
    journal = Journal(lambda: [cp])
    journal.poll()
    (cp / "offsets" / "1").unlink()
    (cp / "commits" / "1").unlink()
    _write(cp / "offsets" / "1", _offsets(6), 5.0)
    _write(cp / "commits" / "1", COMMIT, 5.5)
    journal.poll()
    return cp


class TestJournal:
    def test_a_log_file_written_again_keeps_its_earlier_copy(self, tmp_path):
        """offsets/1 and commits/1 written twice: the journal holds both, the earlier as N.<mtime_ns>."""
        cp = _rolled_back(tmp_path)
        names = sorted(p.name for p in (journal_of(cp) / "offsets").iterdir())
        assert names == ["0", "1", f"1.{int(_ms(2.0) * 1_000_000)}"]
        assert len(list((journal_of(cp) / "commits").iterdir())) == 3

    def test_the_replaced_plan_is_read_with_its_commit(self, tmp_path):
        """Batch 1's first plan ended at offset 4 and committed at 2.5 s."""
        (plan,) = earlier_plans(_rolled_back(tmp_path))[1]
        assert plan.end_offsets == {0: 4} and plan.planned_ms == _ms(2.0) and plan.committed_ms == _ms(2.5)

    def test_a_plan_written_again_with_the_same_offsets_is_no_second_plan(self, tmp_path):
        """A batch run again over the same offsets (commits/N deleted) is not re-planned."""
        cp = _rolled_back(tmp_path)
        _write(cp / "offsets" / "0", _offsets(2), 7.0)
        Journal(lambda: [cp]).poll()
        assert set(earlier_plans(cp)) == {1}


def _inputs(tmp_path, changes: list[dict] | None) -> Inputs:
    cp = _rolled_back(tmp_path)
    truth = _truth([0.1 * i for i in range(6)])
    batches = [Batch(0, 0, {0: 2}, True, {0: 0}, committed_ms=_ms(1.0)),
               Batch(1, 0, {0: 6}, True, {0: 2}, committed_ms=_ms(5.5))]
    written = truth.iloc[:4].assign(tier="low", batch_id=[0, 0, 1, 1],
                                    committed_ms=[_ms(1.0), _ms(1.0), _ms(2.4), _ms(2.4)])
    sink = written[[*PASSTHROUGH.columns, "batch_id", "committed_ms"]].reset_index(drop=True)
    fault = FaultRecord("rollback-last-batch", 3.0, 3.0, 4.5, "driver (pid 42)", True)
    fault.changes = changes or []
    return Inputs(truth=truth, sink=pd.DataFrame(sink), batches=batches, pipeline=PASSTHROUGH,
                  checked=checker.check(PASSTHROUGH, truth, sink, batches), faults=[fault],
                  checkpoints=[cp], t0_s=T0_S)


REMOVED = [{"action": "removed-batch", "path": "checkpoint/offsets/1", "batch": 1,
            "detail": "batch 1's offsets/1 and commits/1 removed, so Spark planned batch 1 again"}]


class TestFinding:
    def test_the_lost_events_tell_the_two_runs_and_the_fault_that_removed_the_first(self, tmp_path):
        """Events 4 and 5, read by batch 1's second plan, are lost: the story tells the first plan and
        its commit, what the fault's record says it did, the second plan, and the sink's rows of the
        first run; the finding lists the fault, and says what to fix."""
        f = _only(build(_inputs(tmp_path, REMOVED)), "lost")
        assert f.count == 2
        parts = ["batch 1 ran twice over different offsets: first over offsets 2-3 of partition 0 "
                 "(offsets/1 at 2.0 s, committed at 2.5 s)",
                 "rollback-last-batch at 3.0 s (driver (pid 42)): batch 1's offsets/1 and commits/1 removed, "
                 "so Spark planned batch 1 again",
                 "then the query planned batch 1 again over offsets 2-5 of partition 0 (offsets/1 at 5.0 s)",
                 "the sink's 2 rows of batch 1 became visible in its first run, none in its second"]
        at = [f.story.find(p) for p in parts]
        assert -1 not in at and at == sorted(at), f.story
        assert [x for x in f.faults if x.startswith("rollback-last-batch")], f.faults
        assert "To fix: record the offsets a batch read with its id" in f.story, f.story

    def test_without_the_kind_s_record_the_journal_alone_tells_the_runs(self, tmp_path):
        """A kind that records no change: the fault in effect between the two plans is named."""
        f = _only(build(_inputs(tmp_path, None)), "lost")
        assert "batch 1 ran twice over different offsets" in f.story, f.story
        assert ("rollback-last-batch at 3.0 s (driver (pid 42)) was in effect before it was planned again"
                in f.story), f.story
        assert [x for x in f.faults if x.startswith("rollback-last-batch")], f.faults

    def test_an_appending_sink_s_copies_of_the_shared_range_are_the_two_runs_not_a_write_applied_twice(
            self, tmp_path):
        """A sink that appends every batch wrote offsets 2-3 in both runs of batch 1: the story tells
        the two plans (no death came within the second), not one run applying its write twice."""
        inputs = _inputs(tmp_path, REMOVED)
        truth = inputs.truth
        again = truth.iloc[2:6].assign(tier="low", batch_id=1, committed_ms=_ms(5.4))
        sink = pd.concat([inputs.sink, again[inputs.sink.columns]], ignore_index=True)
        checked = checker.check(PASSTHROUGH, truth, sink, inputs.batches)
        f = _only(build(Inputs(truth=truth, sink=sink, batches=inputs.batches, pipeline=PASSTHROUGH,
                               checked=checked, faults=inputs.faults, checkpoints=inputs.checkpoints,
                               t0_s=T0_S)), "duplicated")
        assert f.story.startswith("Batch 1 ran twice over different offsets"), f.story
        assert "the sink holds 2 rows of batch 1 from its first run and 4 from its second" in f.story, f.story
        assert "applied twice" not in f.story, f.story
        assert "To fix: record the offsets a batch read with its id, and for a batch id already recorded" \
            in f.story, f.story
