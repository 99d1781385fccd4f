"""Findings: each anomaly class with its fewest witnesses and its story, from small cases
built by hand (ground truth, a sink, checkpoint files with set mtimes, progress records)."""

import os
from dataclasses import FrozenInstanceError, replace
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pandas as pd
import pytest

from faults.checkpoint import CheckpointChange
from faults.kafka import Deleted
from harness import check as checker
from harness import metrics
from harness.check.checkpoint import Batch
from harness.check.result import CheckResult
from harness.findings import Inputs, build, text
from harness.results.model import FaultRecord, Finding, Incident
from harness.scenario.model import Pipeline
from workloads.pipelines.config import QUERY_ID_STRIDE

pytestmark = pytest.mark.unit

T0_S = 1_000.0                       # the first event sent, epoch seconds
T0_MS = int(T0_S * 1000)
WINDOWS = Pipeline(kind="tumbling_count",
                   values=MappingProxyType({"window_ms": 2000, "slide_ms": 2000, "watermark_ms": 1000}),
                   columns=MappingProxyType({"key": "STRING", "window_start_ms": "LONG",
                                             "window_end_ms": "LONG", "count": "LONG", "sum_amount": "LONG"}))
PASSTHROUGH = Pipeline(kind="passthrough", columns=MappingProxyType(
    {"event_id": "LONG", "key": "STRING", "event_time_ms": "LONG", "amount": "LONG", "tier": "STRING",
     "partition": "INT", "offset": "LONG"}))


def _ms(s: float) -> int:
    """Seconds from the first event sent, as epoch ms."""
    return int(T0_MS + s * 1000)


def _truth(times_s, keys=None, amounts=None) -> pd.DataFrame:
    n = len(times_s)
    return pd.DataFrame({
        "event_id": np.arange(n), "key": keys or ["k1"] * n,
        "event_time_ms": [_ms(t) for t in times_s], "sent_ms": [_ms(t) for t in times_s],
        "partition": 0, "offset": np.arange(n), "append_ms": [_ms(t) + 5 for t in times_s],
        "amount": amounts or [20] * n, "control": False})


def _checkpoint(root: Path, name: str, files: dict[str, float]) -> Path:
    """A checkpoint directory whose offsets/N and commits/N files have the given mtimes (s)."""
    cp = root / name
    for rel, at_s in files.items():
        path = cp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("v1\n")
        ns = int(_ms(at_s) * 1_000_000)
        os.utime(path, ns=(ns, ns))
    return cp


def _progress(run_id: str, batch_id: int, start_s: float, duration_ms: int = 1000, query: str = "q0",
              end: dict | None = None, dropped: int = 0, updated: int = 0) -> dict:
    stamp = datetime.fromtimestamp(_ms(start_s) / 1000, tz=UTC).isoformat().replace("+00:00", "Z")
    return {"id": query, "runId": run_id, "batchId": batch_id, "timestamp": stamp,
            "batchDuration": duration_ms, "numInputRows": 1, "durationMs": {"addBatch": duration_ms},
            "stateOperators": [{"numRowsDroppedByWatermark": dropped, "numRowsUpdated": updated}],
            "sources": [{"endOffset": {"events": {str(p): o for p, o in (end or {}).items()}}}]}


def _window_sink(rows) -> pd.DataFrame:
    """(key, start_s, end_s, count, sum, batch_id, committed_s) -> sink rows."""
    cols = ["key", "window_start_ms", "window_end_ms", "count", "sum_amount", "batch_id", "committed_ms"]
    return pd.DataFrame([(k, _ms(a), _ms(b), c, s, bid, _ms(at)) for k, a, b, c, s, bid, at in rows],
                        columns=cols).astype({c: "int64" for c in cols[1:]})


def _inputs(pipeline, truth, sink, batches, **kw) -> Inputs:
    checked = kw.pop("checked", None) or checker.check(pipeline, truth, sink, batches)
    return Inputs(truth=truth, sink=sink, batches=batches, checked=checked, pipeline=pipeline, t0_s=T0_S,
                  **kw)


def _only(findings: list[Finding], cls: str) -> Finding:
    found = [f for f in findings if f.cls == cls]
    assert len(found) == 1, f"expected one {cls} finding, got {[f.cls for f in findings]}"
    return found[0]


def _run_again(tmp_path: Path) -> Inputs:
    """Batch 1 writes its window, the driver dies before commits/1, the new driver runs it again."""
    truth = _truth([0.1, 0.2, 0.3, 4.0, 4.1, 4.2])
    batches = [Batch(0, 0, {0: 4}, True, {0: 0}, committed_ms=_ms(1.0)),
               Batch(1, _ms(3.0), {0: 6}, True, {0: 4}, committed_ms=_ms(11.0))]
    cp = _checkpoint(tmp_path, "checkpoint", {"offsets/0": 0.5, "commits/0": 1.0, "offsets/1": 2.0,
                                              "commits/1": 11.0})
    row = ("k1", 0.0, 2.0, 3, 60, 1, 3.0)
    progress = [_progress("run-a", 0, 0.5, end={0: 4}), _progress("run-b", 1, 10.0, end={0: 6})]
    kill = FaultRecord("kill-driver", 3.2, 3.2, 12.0, "driver (pid 42)", True)
    died = Incident(3.5, "driver-exit", "spark-driver (pid 42)", "killed by SIGKILL", "process",
                    scheduled=True)
    return _inputs(WINDOWS, truth, _window_sink([row, row]), batches, checkpoints=[cp], progress=progress,
                   faults=[kill], incidents=[died])


class TestDuplicatedAfterABatchRunAgain:
    def test_the_window_written_twice_by_one_batch_id_is_the_witness(self, tmp_path):
        """The witness is the window, with both sink rows written by batch 1."""
        f = _only(build(_run_again(tmp_path)), "duplicated")
        assert f.count == 3
        assert len(f.witness) == 1
        assert f.witness[0]["window"] == [_ms(0), _ms(2)]
        assert [w["batch_id"] for w in f.witness[0]["written_by"]] == [1, 1]

    def test_the_story_tells_the_write_the_death_and_the_rerun_in_time_order(self, tmp_path):
        """Offsets, the sink's commit, the death before commits/1, the rerun and the commit, in order."""
        story = _only(build(_run_again(tmp_path)), "duplicated").story
        parts = ["batch 1 read offsets 4-5 of partition 0 (offsets/1 at 2.0 s)",
                 "its 1 row was committed to the sink at 3.0 s",
                 "kill-driver killed the driver (pid 42), gone at 3.5 s, before commits/1 was written",
                 "the new driver (run run-b) ran batch 1 again at 10.0 s", "commits/1 was written at 11.0 s"]
        at = [story.lower().find(p.lower()) for p in parts]
        assert all(i >= 0 for i in at), f"missing from: {story}"
        assert at == sorted(at), story

    def test_a_commit_the_fault_deleted_is_told_as_deleted_not_as_never_written(self, tmp_path):
        """corrupt-checkpoint at after-commit: commits/1 was written, the driver killed, the
        file deleted; the story said "before commits/1 was written", which was not so."""
        inputs = _run_again(tmp_path)
        cc = FaultRecord("corrupt-checkpoint", 3.2, 3.2, 12.0, "checkpoint/commits/1 of driver (pid 42)",
                         True,
                         spec={"kind": "corrupt-checkpoint", "extra": {"file": "commits", "action": "delete",
                                                                       "point": "after-commit"}},
                         details=CheckpointChange("checkpoint/commits/1"))
        story = _only(build(replace(inputs, faults=[cc])), "duplicated").story
        assert "just after commits/1 was written, and the fault deleted commits/1" in story, story
        assert "before commits/1 was written" not in story, story

    def test_faults_and_checkpoint_files_name_the_batch_run_again(self, tmp_path):
        """The fault in effect over batch 1 and its offsets/1 and commits/1 are listed."""
        f = _only(build(_run_again(tmp_path)), "duplicated")
        assert f.faults == ["kill-driver at 3.2s (driver (pid 42))"]
        assert {"checkpoint/offsets/1", "checkpoint/commits/1"} <= set(f.checkpoint_files)

    def test_it_serialises_to_plain_json(self, tmp_path):
        """summary.json gets class, count, witness, faults, checkpoint_files and story, in JSON types."""
        import json

        out = json.loads(json.dumps(_only(build(_run_again(tmp_path)), "duplicated").to_json()))
        assert set(out) == {"class", "count", "witness", "faults", "checkpoint_files", "story"}


def _fresh_start(tmp_path: Path) -> Inputs:
    """Passthrough: query 0 reads offsets 0-3, the driver dies, query 1 starts fresh at 6."""
    truth = _truth([0.1 * i for i in range(8)])
    base = QUERY_ID_STRIDE
    batches = [Batch(0, 0, {0: 4}, True, {0: 0}, committed_ms=_ms(1.0)),
               Batch(base, 0, {0: 8}, True, {0: 6}, query=1, committed_ms=_ms(21.0))]
    cps = [_checkpoint(tmp_path, "checkpoint", {"offsets/0": 0.5, "commits/0": 1.0}),
           _checkpoint(tmp_path, "checkpoint-1", {"offsets/0": 20.0, "commits/0": 21.0})]
    read = truth[truth["offset"].isin([0, 1, 2, 3, 6, 7])]
    sink = read.assign(tier="low", batch_id=np.where(read["offset"] < 4, 0, base),
                       committed_ms=np.where(read["offset"] < 4, _ms(0.9), _ms(20.9)))
    sink = sink.drop(columns=["sent_ms", "append_ms", "control"])
    progress = [_progress("run-a", 0, 0.5, end={0: 4}), _progress("run-b", 0, 20.0, query="q1", end={0: 8})]
    kill = FaultRecord("kill-driver", 2.0, 2.0, 22.0, "driver (pid 7)", True)
    return _inputs(PASSTHROUGH, truth, sink, batches, checkpoints=cps, progress=progress, faults=[kill])


class TestLostAfterAFreshStart:
    def test_the_witness_is_an_event_no_batch_read(self, tmp_path):
        """An event between query 0's last batch and query 1's first offset: read by no batch."""
        f = _only(build(_fresh_start(tmp_path)), "lost")
        assert f.count == 2
        assert f.witness[0]["event_id"] == 4 and f.witness[0]["read_by_batch"] == -1
        assert (f.witness[0]["partition"], f.witness[0]["offset"]) == (0, 4)

    def test_the_story_names_the_gap_the_death_and_the_new_query(self, tmp_path):
        """What query 0 committed, the kill, where the fresh query started and the unread offsets."""
        story = _only(build(_fresh_start(tmp_path)), "lost").story
        for part in ["committed batch 0, which read up to offset 3 of partition 0",
                     "then kill-driver (injected at 2.0 s) killed the driver (pid 7)",
                     "a new query started on a fresh checkpoint (checkpoint-1/) at 20.0 s, "
                     "at offset 6 of partition 0",
                     "offsets 4-5 of partition 0 (2 events) were read by no batch"]:
            assert part in story, f"{part!r} not in: {story}"

    def test_the_checkpoint_files_include_the_new_querys_first_batch(self, tmp_path):
        """checkpoint-1/offsets/0 and sources/0/0 record where the new query started."""
        f = _only(build(_fresh_start(tmp_path)), "lost")
        assert {"checkpoint/commits/0", "checkpoint-1/offsets/0", "checkpoint-1/sources/0/0"} <= \
            set(f.checkpoint_files)


class TestUnexpected:
    def test_a_row_for_a_key_never_sent_is_unexpected(self, tmp_path):
        """A window row of key zz, which no event had, is the witness; the story says so."""
        truth = _truth([0.1, 0.2])
        batches = [Batch(0, 0, {0: 2}, True, {0: 0}), Batch(1, _ms(3.0), {0: 2}, True, {0: 2})]
        sink = _window_sink([("k1", 0.0, 2.0, 2, 40, 1, 3.0), ("zz", 0.0, 2.0, 1, 5, 1, 3.0)])
        f = _only(build(_inputs(WINDOWS, truth, sink, batches)), "unexpected")
        assert f.count == 1 and f.witness[0]["key"] == "zz"
        assert "no event with key zz was ever sent" in f.story

    def test_a_count_twice_what_was_sent_says_the_write_was_applied_twice(self, tmp_path):
        """An upsert that added a batch run again's counts again (delta-io/delta#1421): one row,
        twice the count, from a sink that records no batch id."""
        truth = _truth([0.1, 0.2])
        batches = [Batch(0, 0, {0: 2}, True, {0: 0}), Batch(1, _ms(3.0), {0: 2}, True, {0: 2})]
        sink = _window_sink([("k1", 0.0, 2.0, 4, 80, 1, 3.0)]).drop(columns=["batch_id"])
        f = _only(build(_inputs(WINDOWS, truth, sink, batches)), "unexpected")
        assert f.witness[0]["actual"] == {"count": 4, "sum_amount": 80}
        assert ("written by a batch the sink does not name and visible at 3.0 s counting 4 events where "
                "2 were sent: 2 times the count, as if the write that made it had been applied 2 times"
                ) in f.story


class TestWrongValue:
    def test_a_right_count_with_a_wrong_sum_is_a_wrong_value(self, tmp_path):
        """The window's count is right and its sum is not: the story gives both sums."""
        truth = _truth([0.1, 0.2])
        batches = [Batch(0, 0, {0: 2}, True, {0: 0}), Batch(1, _ms(3.0), {0: 2}, True, {0: 2})]
        sink = _window_sink([("k1", 0.0, 2.0, 2, 39, 1, 3.0)])
        f = _only(build(_inputs(WINDOWS, truth, sink, batches)), "wrong-value")
        assert f.count == 1 and f.witness[0]["actual"] == {"count": 2, "sum_amount": 39}
        assert "sum_amount 39" in f.story and "sum to 40" in f.story


class TestRefusedRestart:
    def test_the_story_quotes_sparks_sentence(self, tmp_path):
        """A fault whose outcome is refused is a finding whose story quotes Spark."""
        truth = _truth([0.1, 0.2])
        batches = [Batch(0, 0, {0: 2}, True, {0: 0}, committed_ms=_ms(1.0))]
        cp = _checkpoint(tmp_path, "checkpoint", {"offsets/0": 0.5, "commits/0": 1.0})
        said = "The checkpoint's offset log is corrupt"
        fault = FaultRecord("corrupt-checkpoint", 5.0, 5.0, 9.0, "driver (pid 9)", True,
                            outcome="refused", outcome_detail=said)
        sink = _window_sink([])
        checked = CheckResult({"lost": 0, "duplicated": 0, "unexpected": 0}, np.array([]), np.array([]))
        inputs = _inputs(WINDOWS, truth, sink, batches, checkpoints=[cp], faults=[fault], checked=checked)
        f = _only(build(inputs), "refused-restart")
        assert f.count == 1 and said in f.story
        assert "Batch 0 was the last committed before it" in f.story and "no batch ran after it" in f.story


class TestDeletedBeforeRead:
    def test_events_in_deleted_ranges_are_counted_and_witnessed(self, tmp_path):
        """Two events at deleted offsets: the count is 2 and the first of them is the witness."""
        truth = _truth([0.1 * i for i in range(6)])
        batches = [Batch(0, 0, {0: 2}, True, {0: 0}), Batch(1, 0, {0: 6}, True, {0: 2})]
        fault = FaultRecord("kafka-retention", 3.0, 3.0, 4.0, "topic events, partition 0", True,
                            details=Deleted([{"partition": 0, "from": 2, "to": 4}]), outcome="accepted",
                            outcome_detail="Spark skipped the deleted records")
        checked = CheckResult({"lost": 0, "duplicated": 0, "unexpected": 0}, np.array([]), np.array([]))
        f = _only(build(_inputs(WINDOWS, truth, _window_sink([]), batches, faults=[fault], checked=checked)),
                  "deleted-before-read")
        assert f.count == 2 and f.witness[0]["offset"] == 2
        assert "deleted offsets 2-3 of partition 0 (2 records)" in f.story


class TestDroppedLateWrongly:
    def test_spark_dropping_more_than_the_oracle_is_a_finding(self, tmp_path):
        """Spark's dropped count above the oracle's (Spark's way) names the batch where it happened."""
        truth = _truth([0.1, 0.2, 5.0])
        batches = [Batch(0, 0, {0: 1}, True, {0: 0}), Batch(1, _ms(-0.9), {0: 3}, True, {0: 1}),
                   Batch(2, _ms(4.0), {0: 3}, True, {0: 3})]
        progress = [_progress("r", 0, 0.5, end={0: 1}), _progress("r", 1, 1.5, end={0: 3}, dropped=1),
                    _progress("r", 2, 2.5, end={0: 3})]
        sink = _window_sink([("k1", 0.0, 2.0, 1, 20, 2, 3.0)])
        inputs = _inputs(WINDOWS, truth, sink, batches, progress=progress, spark_dropped_by_watermark=1)
        f = _only(build(inputs), "dropped-late-wrongly")
        assert f.count == 1
        assert f.witness[0]["event_id"] == 1 and f.witness[0]["read_by_batch"] == 1
        assert "Spark dropped 1" in f.story


class TestSparkCountedOnce:
    """Spark's late rows against the oracle's, once each batch: what the harness itself can
    double (a batch run again after a restart, a batch's plan run twice) accuses nobody."""

    def _late_in_batch_2(self, progress: list[dict]) -> Inputs:
        """Batch 0 moves the watermark to 4.0 s; batch 2 reads an event at 0.2 s (late: one
        (key, window) group by the oracle) and one at 5.2 s (on time: one group updated)."""
        truth = _truth([0.1, 5.0, 5.1, 0.2, 5.2])
        batches = [Batch(0, 0, {0: 2}, True, {0: 0}), Batch(1, _ms(4.0), {0: 3}, True, {0: 2}),
                   Batch(2, _ms(4.1), {0: 5}, True, {0: 3})]
        sink = _window_sink([("k1", 0.0, 2.0, 1, 20, 1, 3.0)])
        return _inputs(WINDOWS, truth, sink, batches, progress=progress,
                       spark_dropped_by_watermark=metrics.dropped_by_watermark(progress))

    def _runs(self, *last: dict) -> list[dict]:
        return [_progress("a", 0, 0.5, end={0: 2}, updated=2), _progress("a", 1, 1.5, end={0: 3}, updated=1),
                *last]

    def test_a_batch_run_before_and_after_a_restart_counts_its_late_rows_once(self):
        """Batch 2 committed, its commits/2 lost, run again by a new driver: two progress records
        of 1 late row each are Spark's 1 (its last run's), the oracle's 1, and no finding."""
        progress = self._runs(_progress("a", 2, 2.5, end={0: 5}, dropped=1, updated=1),
                              _progress("b", 2, 9.0, end={0: 5}, dropped=1, updated=1))
        inputs = self._late_in_batch_2(progress)
        assert inputs.spark_dropped_by_watermark == 1 == inputs.checked.counts["dropped_late_spark"]
        assert "dropped-late-wrongly" not in {f.cls for f in build(inputs)}

    def test_the_last_run_that_executed_the_batch_is_the_one_counted(self):
        """An idle trigger's record repeats a batch id with nothing run: the executed run counts."""
        idle = {**_progress("b", 2, 12.0, end={0: 5}, dropped=0), "durationMs": {"triggerExecution": 3}}
        runs = [_progress("a", 2, 2.5, end={0: 5}, dropped=3), _progress("b", 2, 9.0, end={0: 5}, dropped=1),
                idle]
        assert metrics.once_per_batch(runs) == [runs[1]]
        assert metrics.dropped_by_watermark(runs) == 1

    def test_a_query_on_a_fresh_checkpoint_is_another_query(self):
        """Batch 0 of two query ids is two batches: both count."""
        runs = [_progress("a", 0, 0.5, dropped=2), _progress("b", 0, 5.0, query="q1", dropped=3)]
        assert metrics.dropped_by_watermark(runs) == 5

    def test_a_batch_whose_commit_a_fault_deleted_is_judged_on_neither_side(self):
        """Batch 2 ran and committed, then its commits/2 was deleted and no driver ran it again:
        the oracle judges committed batches only, so Spark's late row there accuses nobody."""
        inputs = self._late_in_batch_2(self._runs(_progress("a", 2, 2.5, end={0: 5}, dropped=1, updated=1)))
        batches = [replace(b, committed=b.batch_id != 2) for b in inputs.batches]
        inputs = _inputs(WINDOWS, inputs.truth, inputs.sink, batches, progress=inputs.progress,
                         spark_dropped_by_watermark=inputs.spark_dropped_by_watermark)
        assert inputs.checked.counts["dropped_late_spark"] == 0 < inputs.spark_dropped_by_watermark
        assert "dropped-late-wrongly" not in {f.cls for f in build(inputs)}

    def test_a_batch_whose_plan_ran_twice_is_no_finding(self):
        """Twice the oracle's late rows and twice its state rows in one run: the plan ran twice
        (a second action on the batch), Spark dropped nothing on time."""
        inputs = self._late_in_batch_2(self._runs(_progress("a", 2, 2.5, end={0: 5}, dropped=2, updated=2)))
        assert "dropped-late-wrongly" not in {f.cls for f in build(inputs)}

    def test_twice_the_late_rows_with_the_state_rows_of_one_run_is_still_a_finding(self):
        """Twice the oracle's late rows but the state rows of one run: Spark's drops are its own."""
        inputs = self._late_in_batch_2(self._runs(_progress("a", 2, 2.5, end={0: 5}, dropped=2, updated=1)))
        f = _only(build(inputs), "dropped-late-wrongly")
        assert f.count == 1 and "Spark dropped 2, the oracle finds 1 late" in f.story


class TestNothingToFind:
    def test_an_exact_case_has_no_findings(self, tmp_path):
        """Every window once, with its count and sum: no finding at all."""
        truth = _truth([0.1, 0.2])
        batches = [Batch(0, 0, {0: 2}, True, {0: 0}), Batch(1, _ms(3.0), {0: 2}, True, {0: 2})]
        assert build(_inputs(WINDOWS, truth, _window_sink([("k1", 0.0, 2.0, 2, 40, 1, 3.0)]), batches)) == []


class TestWitnessLimits:
    def test_no_finding_has_more_than_five_witnesses(self, tmp_path):
        """Many lost events of one cause still give one witness each per cause, at most five."""
        truth = _truth([0.01 * i for i in range(50)])
        batches = [Batch(0, 0, {0: 50}, True, {0: 0}), Batch(1, _ms(9.0), {0: 50}, True, {0: 50})]
        f = _only(build(_inputs(WINDOWS, truth, _window_sink([]), batches)), "lost")
        assert 1 <= len(f.witness) <= 5


class TestStoriesFromEvidence:
    """Three sinks that duplicate for different reasons, under the same schedule: each story
    names the cause its evidence supports, and the batch, in time order, and never guesses."""

    def _no_ids(self, inputs: Inputs, committed_s: list[float], **kw) -> Finding:
        sink = inputs.sink.drop(columns=["batch_id"]).assign(committed_ms=[_ms(s) for s in committed_s])
        return _only(build(replace(inputs, sink=sink, **kw)), "duplicated")

    def test_a_naive_append_under_a_kill_is_told_as_two_runs_of_the_batch_that_closed_the_window(
            self, tmp_path):
        """No batch id in the sink: the batch whose watermark closed the window (batch 1) wrote it;
        the driver died while batch 1 was under way, so its two copies came from two runs."""
        f = self._no_ids(_run_again(tmp_path), [3.0, 10.5])
        assert "its watermark was the first to reach the end of the window" in f.story, f.story
        assert ("the copies came from two runs of batch 1, visible at 3.0 s and 10.5 s, before and after the "
                "driver died at 3.5 s") in f.story, f.story
        assert any(x.startswith("kill-driver") for x in f.faults), f.faults
        assert all("batch_id" not in w for w in f.witness[0]["written_by"])

    def test_one_commit_time_for_both_copies_is_said_not_taken_at_its_word(self, tmp_path):
        """The sink gave both copies one time (13.3 s and 13.3 s, one of them written by the new
        driver 15 s later): the story says the runs, and that the sink's times cannot tell them."""
        f = self._no_ids(_run_again(tmp_path), [3.0, 3.0])
        assert "two runs of batch 1, before and after the driver died at 3.5 s" in f.story, f.story
        assert "one commit time, 3.0 s, so it cannot tell them apart" in f.story, f.story

    def test_without_a_death_in_the_batch_the_copies_are_one_write_applied_twice(self, tmp_path):
        """No fault, no death: one run wrote both copies (a write applied twice), whether or not
        the sink records the batch id."""
        inputs = _run_again(tmp_path)
        alone = replace(inputs, faults=[], incidents=[])
        for f in (self._no_ids(alone, [3.0, 3.1]), _only(build(alone), "duplicated")):
            said = "batch 1 ran once, and its one run wrote the row of window [0.0 s, 2.0 s) of key k1 twice"
            assert said in f.story, f.story
            assert "a write applied twice" in f.story and "killed" not in f.story, f.story

    def test_a_batch_written_twice_is_not_blamed_on_another_run_again(self, tmp_path):
        """A sink that writes each batch twice, under a replay-batch of a later batch: batch 1 ran once,
        at 3.3 s, before any death (the story said the replay-batch at 17.6 s re-ran batch 1, out of
        time order, and the finding listed no fault)."""
        truth = _truth([0.1, 0.2, 0.3, 4.0, 4.1, 4.2, 8.0, 8.1])
        batches = [Batch(0, 0, {0: 3}, True, {0: 0}, committed_ms=_ms(1.0)),
                   Batch(1, _ms(3.0), {0: 6}, True, {0: 3}, committed_ms=_ms(3.4)),
                   Batch(2, _ms(6.0), {0: 8}, True, {0: 6}, committed_ms=_ms(30.0))]
        cp = _checkpoint(tmp_path, "checkpoint", {"offsets/0": 0.5, "commits/0": 1.0, "offsets/1": 3.0,
                                                  "commits/1": 3.4, "offsets/2": 16.0, "commits/2": 30.0})
        progress = [_progress("run-a", 0, 0.5, end={0: 3}), _progress("run-a", 1, 3.0, end={0: 6}),
                    _progress("run-b", 2, 29.0, end={0: 8})]
        replay = FaultRecord("replay-batch", 16.5, 16.5, 20.0, "driver (pid 42)", True, landed_s=17.6)
        died = Incident(17.7, "driver-exit", "spark-driver (pid 42)", "killed by SIGKILL", "process",
                        scheduled=True)
        row = ("k1", 0.0, 2.0, 3, 60, 1, 3.329)
        f = _only(build(_inputs(WINDOWS, truth, _window_sink([row, row[:-1] + (3.338,)]), batches,
                                checkpoints=[cp], progress=progress, faults=[replay], incidents=[died])),
                  "duplicated")
        assert "batch 1 ran once" in f.story and "a write applied twice" in f.story, f.story
        assert "replay-batch" not in f.story and "17.6" not in f.story, f.story


class TestCountTiedToRows:
    def test_the_duplicated_pairs_are_tied_to_the_rows_the_story_tells(self, tmp_path):
        """3 duplicated (event, window) pairs, one window's row written twice: the story says how
        the count is made of the rows it tells."""
        story = _only(build(_run_again(tmp_path)), "duplicated").story
        assert story.startswith("The 3 duplicated (event, window) pairs are the events that the extra copies "
                                "of 1 window's row count again; "), story


class TestWhatToFix:
    """A story ends with what to fix, chosen by the cause its evidence showed, not by its class."""

    def test_a_batch_run_again_and_appended_hears_to_record_the_batch_id_in_one_transaction(self, tmp_path):
        """paimon-9666's shape: the batch wrote, the driver died before commits/1, the re-run appended."""
        f = _only(build(_run_again(tmp_path)), "duplicated")
        assert f.story.endswith("To fix: record Spark's batch id with the rows in one transaction, and skip "
                                "a batch id the sink already holds: after a restart Spark runs a batch "
                                "again with the same id and offsets."), f.story

    def test_a_write_applied_twice_in_one_run_hears_something_else(self, tmp_path):
        """No death while the batch ran: no batch id would have helped; the write itself was applied twice."""
        alone = replace(_run_again(tmp_path), faults=[], incidents=[])
        story = _only(build(alone), "duplicated").story
        assert "To fix: write each batch's rows once" in story and "transaction" not in story, story

    def test_a_committed_batch_the_sink_holds_nothing_of_hears_about_the_sink_s_write(self, tmp_path):
        """Batch 1 committed, yet no row of its window is in the sink."""
        inputs = _run_again(tmp_path)
        f = _only(build(_inputs(WINDOWS, inputs.truth, _window_sink([]), inputs.batches,
                                checkpoints=inputs.checkpoints, progress=inputs.progress)), "lost")
        assert "To fix: make the sink hold a batch's rows before foreachBatch returns" in f.story, f.story

    def test_every_cause_a_builder_names_has_a_sentence(self):
        """fix.FIXES covers each (class, cause) the builders hand it: none falls back to nothing."""
        from harness.findings import fix

        named = {("duplicated", c) for c in ("run-again", "no-batch-id", "own-ids", "applied-twice",
                                             "several", "unknown", "replanned")}
        named |= {("lost", c) for c in ("fresh-restart", "ended", "unwritten", "replanned")}
        named |= {("unexpected", c) for c in ("too-many", "late", "never-sent", "no-event-in-window",
                                             "not-expected")}
        named |= {(c, None) for c in ("wrong-value", "dropped-late-wrongly", "refused-restart",
                                      "commit-without-offsets", "mismatch", "went-backwards")}
        assert named <= set(fix.FIXES), named - set(fix.FIXES)


class TestSinkOwnCommitIds:
    def test_copies_under_ids_no_checkpoint_lists_are_told_and_say_why(self, tmp_path):
        """A sink that commits under its own id (a time, as hudi#6098's) still gets a story: each
        copy with its id and time, and that no checkpoint lists those ids."""
        inputs = _run_again(tmp_path)
        sink = inputs.sink.assign(batch_id=[1_700_000_000_111, 1_700_000_000_999],
                                  committed_ms=[_ms(3.0), _ms(10.5)])
        f = _only(build(_inputs(WINDOWS, inputs.truth, sink, inputs.batches, checkpoints=inputs.checkpoints,
                                progress=inputs.progress, faults=inputs.faults, incidents=inputs.incidents)),
                  "duplicated")
        assert "under its batch id 1700000000111, visible at 3.0 s" in f.story
        assert "wrote it again under its batch id 1700000000999, visible at 10.5 s" in f.story
        # what to fix: commit under Spark's batch id (hudi-6098's fix)
        assert "To fix: commit under Spark's batch id (foreachBatch's second argument)" in f.story, f.story
        assert "no checkpoint lists batch ids 1700000000111 and 1700000000999" in f.story
        assert "driver" in f.story      # the death between the two copies
        # the batch in flight at each copy is the one that wrote it
        assert "visible at 3.0 s, while batch 1 ran (offsets/1 at 2.0 s)" in f.story
        assert "while batch 1 ran again; commits/1 was written at 11.0 s" in f.story


class TestEventsUnitDuplicate:
    def test_an_event_written_by_two_batches_names_both(self, tmp_path):
        """An event_id delivered by batch 0 and again by batch 1 is told batch by batch."""
        truth = _truth([0.1, 0.2])
        batches = [Batch(0, 0, {0: 2}, True, {0: 0}, committed_ms=_ms(1.0)),
                   Batch(1, 0, {0: 2}, True, {0: 2}, committed_ms=_ms(2.0))]
        sink = truth.drop(columns=["sent_ms", "append_ms", "control"]).assign(tier="low", batch_id=0,
                                                                                 committed_ms=_ms(0.9))
        again = sink.iloc[[0]].assign(batch_id=1, committed_ms=_ms(1.9))
        f = _only(build(_inputs(PASSTHROUGH, truth, pd.concat([sink, again]), batches)), "duplicated")
        assert [w["batch_id"] for w in f.witness[0]["written_by"]] == [0, 1]
        assert "wrote it again, visible at 1.9 s" in f.story


SESSIONS = Pipeline(kind="session_count", columns=MappingProxyType(
    {"key": "STRING", "session_start_ms": "LONG", "session_end_ms": "LONG", "count": "LONG"}))


class TestKeyedRows:
    def test_a_lost_session_names_its_row_and_the_batches_that_read_its_events(self, tmp_path):
        """A keyed row the oracle lists as lost is the witness; its events' batch explains it."""
        truth = _truth([0.1, 0.2, 5.0])
        batches = [Batch(0, 0, {0: 2}, True, {0: 0}, committed_ms=_ms(1.0)),
                   Batch(1, _ms(4.0), {0: 3}, True, {0: 2}, committed_ms=_ms(6.0))]
        item = f"key=k1 session_start_ms={_ms(0.1)} session_end_ms={_ms(1.2)}"
        d = pd.DataFrame({"kind": ["lost"], "item": [item], "expected": ["count=2"], "actual": ["none"],
                          "batch_id": [-1]})
        checked = CheckResult({"lost": 1, "duplicated": 0, "unexpected": 0}, np.array([]), np.array([]),
                              discrepancies=d, unit="rows")
        sink = pd.DataFrame({"key": ["k1"], "session_start_ms": [_ms(5.0)], "session_end_ms": [_ms(6.0)],
                             "count": [1], "batch_id": [1], "committed_ms": [_ms(6.5)]})
        f = _only(build(_inputs(SESSIONS, truth, sink, batches, checked=checked)), "lost")
        assert f.witness[0]["row"] == item and f.witness[0]["window"] == [_ms(0.1), _ms(1.2)]
        assert f.witness[0]["written_by"] == []
        told = (f"sink holds no row {item} (expected count=2), though batch 0 (committed at 1.0 s) "
                f"read its events")
        assert told in f.story, f.story


class TestInputs:
    def test_inputs_are_frozen(self, tmp_path):
        """Inputs cannot be changed after they are made."""
        inputs = _run_again(tmp_path)
        with pytest.raises(FrozenInstanceError):
            inputs.t0_s = 0.0  # type: ignore[misc]



class TestText:
    def test_offset_ranges_are_inclusive_with_separators(self):
        """End offsets are exclusive; the text shows the last offset read, with thousands separators."""
        assert text.offset_ranges({0: 1200, 1: 812}, {0: 1490, 1: 1153}) == \
            "offsets 1,200-1,489 of partition 0 and 812-1,152 of partition 1"

    def test_a_partition_new_to_the_query_is_read_from_zero(self):
        """A partition added since the previous batch has no start: the batch read it from 0, and
        the text names it (issue 27: every duplicate came from partition 2, which the story left out)."""
        assert text.offset_ranges({0: 62, 1: 31}, {0: 463, 1: 326, 2: 48}) == \
            "offsets 62-462 of partition 0, 31-325 of partition 1 and 0-47 of partition 2, new to the query"

    def test_batch_ids_are_written_as_runs(self):
        """Consecutive ids collapse into a range."""
        assert text.ids([3, 4, 5, 8]) == "3-5 and 8"



def test_a_driver_exit_a_storage_fault_caused_is_scheduled_not_an_incident():
    """The full disk failed the query and the harness started a new driver (run a514 listed
    both exits as incidents "not scheduled"): a kind whose error may end the query explains
    the driver's exit while it lasts and shortly after, not a broker's."""
    from harness.results.model import FaultRecord
    from harness.run.incidents import _scheduled

    full = FaultRecord(kind="disk-full", at_s=8.0, started_s=8.8, ended_s=10.8, target="checkpoint",
                       observed=True)
    assert _scheduled("driver-exit", 9.3, [full])
    assert not _scheduled("driver-exit", 80.0, [full])   # past the 60 s a restart may take to settle
    assert not _scheduled("service-exit", 9.3, [full])


def test_a_commit_without_its_offsets_is_a_finding_that_names_the_fault_then(tmp_path):
    """Run 20261126T164032-spark-56720-04f6: async progress tracking's offsets/11 write failed
    under io-error, and commits/11 was written behind it; the query then stopped twice. The
    finding names commits/11 and the fault in effect, and the lost story both deaths."""
    truth = _truth([0.1, 0.2, 0.3, 4.0, 4.1, 4.2])
    batches = [Batch(0, 0, {0: 3}, True, {0: 0}, committed_ms=_ms(1.0))]
    cp = _checkpoint(tmp_path, "checkpoint", {"offsets/0": 0.5, "commits/0": 1.0, "commits/1": 2.6})
    sink = pd.DataFrame({"event_id": [0, 1, 2], "key": "k1",
                         "event_time_ms": [_ms(t) for t in (0.1, 0.2, 0.3)], "amount": 20, "tier": "high",
                         "partition": 0, "offset": [0, 1, 2], "batch_id": 0, "committed_ms": _ms(1.0)})
    fault = FaultRecord("io-error", 2.0, 2.0, 4.0, "checkpoint (EIO on writes on paths matching offsets/)",
                        True, outcome="accepted")
    deaths = [Incident(2.1, "driver-exit", "spark-driver (pid 10)", "exited with code 1", "process",
                       scheduled=True),
              Incident(9.0, "driver-exit", "spark-driver (pid 11)", "exited with code 1", "process",
                       scheduled=True)]
    found = build(_inputs(PASSTHROUGH, truth, sink, batches, checkpoints=[cp], faults=[fault],
                          incidents=deaths))
    orphan = _only(found, "commit-without-offsets")
    assert orphan.count == 1 and orphan.witness[0]["checkpoint_file"] == "checkpoint/commits/1"
    assert "offsets/1 never was" in orphan.story and "io-error at 2.0 s" in orphan.story, orphan.story
    lost = _only(found, "lost")
    assert "(pid 10) died at 2.1 s" in lost.story and "(pid 11) died at 9.0 s" in lost.story, lost.story
