"""The state check (harness/check/state_check.py) and its finding, state-diverged
(harness/findings/state.py), on state frames faked as workloads/pipelines/state_read.py writes them:
what the state must hold at a batch, which batches are read, what counts as a divergence and how
its story reads; and the planted state loss's choice of file (tests/scenarios/state_rollback.py).
No Spark: the reader's Spark run is tested end to end in benchmarks/test_state_check.py."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pandas as pd
import pytest

from harness.check import dedup, state_check
from harness.check.checkpoint import Batch
from harness.check.result import CheckResult
from harness.findings import CLASSES, Inputs, build
from harness.results.model import FaultRecord
from harness.scenario.model import Pipeline

pytestmark = pytest.mark.unit

T0_S = 1_000.0
T0_MS = int(T0_S * 1000)
WINDOWS = Pipeline(kind="tumbling_count",
                   values=MappingProxyType({"window_ms": 2000, "slide_ms": 2000, "watermark_ms": 1000}),
                   columns=MappingProxyType({"key": "STRING", "window_start_ms": "LONG",
                                             "window_end_ms": "LONG", "count": "LONG", "sum_amount": "LONG"}))
KEY = list(state_check.WINDOW_KEY.values())
VALUES = list(state_check.WINDOW_VALUE.values())


def _ms(s: float) -> int:
    return int(T0_MS + s * 1000)


def _truth(rows: list[tuple[str, float, int]]) -> pd.DataFrame:
    """(key, event time in s, amount) per event, in offset order on partition 0."""
    n = len(rows)
    return pd.DataFrame({"event_id": np.arange(n), "key": [r[0] for r in rows],
                         "event_time_ms": [_ms(r[1]) for r in rows], "amount": [r[2] for r in rows],
                         "sent_ms": [_ms(r[1]) for r in rows], "partition": 0, "offset": np.arange(n),
                         "control": False})


# three batches: 0 reads offsets 0-1, 1 reads 2-3, 2 reads 4-5; the watermark moves to 3.0 s at batch 2
BATCHES = [Batch(0, 0, {0: 2}, True, {0: 0}, committed_ms=_ms(1.0)),
           Batch(1, 0, {0: 4}, True, committed_ms=_ms(2.0)),
           Batch(2, _ms(3.0), {0: 6}, True, committed_ms=_ms(3.5))]
TRUTH = _truth([("a", 0.1, 10), ("b", 0.2, 5), ("a", 0.5, 1), ("a", 2.5, 7), ("b", 4.1, 2), ("a", 4.2, 3)])


def _window(key: str, start_s: float) -> dict:
    return {"key": key, "window_start_ms": _ms(start_s), "window_end_ms": _ms(start_s + 2)}


class TestExpectedWindows:
    def test_the_state_after_a_batch_counts_what_the_batches_up_to_it_read(self):
        """After batch 1 (no watermark yet) the state holds every window the first four events
        fall in, with their counts and sums; the events of batch 2 are not in it yet."""
        got = state_check.expected_windows(TRUTH, BATCHES, 1, 2000, 2000)
        rows = {(r.key, r.window_start_ms): (r.count, r.sum_amount) for r in got.itertuples()}
        assert rows == {("a", _ms(0)): (2, 11), ("b", _ms(0)): (1, 5), ("a", _ms(2)): (1, 7)}

    def test_a_window_the_batch_s_watermark_closed_is_evicted(self):
        """Batch 2 runs with a watermark of 3.0 s: the windows ending at 2.0 s are gone, the one
        ending at 4.0 s is still open, and batch 2's own events opened windows at 4.0 s."""
        got = state_check.expected_windows(TRUTH, BATCHES, 2, 2000, 2000)
        assert sorted(zip(got["key"], got["window_start_ms"], got["count"], strict=True)) == [
            ("a", _ms(2), 1), ("a", _ms(4), 1), ("b", _ms(4), 1)]

    def test_a_row_late_for_its_batch_opens_no_window(self):
        """An event read by batch 3, whose window ended before batch 2's watermark (the one batch 3
        drops late rows with), is not in the state."""
        truth = pd.concat([TRUTH, _truth([("c", 0.9, 4)]).assign(offset=6, event_id=6)], ignore_index=True)
        batches = [*BATCHES, Batch(3, _ms(3.0), {0: 7}, True, committed_ms=_ms(4.0))]
        got = state_check.expected_windows(truth, batches, 3, 2000, 2000)
        assert "c" not in set(got["key"])


SESSIONS = Pipeline(kind="session_count", values=MappingProxyType({"gap_ms": 1000, "watermark_ms": 1000}))


def _session(key: str, start_s: float, end_s: float, count: int, total: int) -> tuple:
    return (key, _ms(start_s), _ms(end_s), count, total)


class TestExpectedSessions:
    """session_count's state: the sessions open after a batch, merged as Spark merges them, and
    gone once the batch's watermark passed their end (a 1 s gap here)."""

    def _state(self, batch: int) -> set[tuple]:
        from harness.check import sessions

        found = sessions.state_after(TRUTH, BATCHES, 1000, batch)
        return set(found[["key", "session_start_ms", "session_end_ms", "count", "sum_amount"]]
                   .itertuples(index=False, name=None))

    def test_an_event_within_the_gap_merges_into_its_key_s_session(self):
        assert self._state(0) == {_session("a", 0.1, 1.1, 1, 10), _session("b", 0.2, 1.2, 1, 5)}
        assert self._state(1) == {_session("a", 0.1, 1.5, 2, 11), _session("a", 2.5, 3.5, 1, 7),
                                  _session("b", 0.2, 1.2, 1, 5)}

    def test_a_session_the_batch_s_watermark_passed_is_evicted(self):
        """Batch 2's watermark is 3.0 s: a's [0.1, 1.5) and b's [0.2, 1.2) are emitted and gone."""
        assert self._state(2) == {_session("a", 2.5, 3.5, 1, 7), _session("a", 4.2, 5.2, 1, 3),
                                  _session("b", 4.1, 5.1, 1, 2)}

    def test_the_state_as_spark_s_reader_flattens_it_is_checked(self, tmp_path):
        """The columns Spark 4.2's state data source gives a session_window aggregation (read from
        a real checkpoint): the key and sessionStartTime, then the row; a count one short is found."""
        from workloads.pipelines.state_read import ANSWER

        case = tmp_path / "case"
        (case / "checkpoint" / "state").mkdir(parents=True)
        reads = case / state_check.STATE_DIR
        reads.mkdir()
        pd.DataFrame({"operatorId": [0], "operatorName": [state_check.SESSIONS]}).to_parquet(
            reads / "metadata.parquet")
        rows = [("a", 2.5, 3.5, 1, 7), ("a", 4.2, 5.2, 1, 3), ("b", 4.1, 5.1, 0, 2)]
        pd.DataFrame({"key.key": [r[0] for r in rows], "key.sessionStartTime": [_ms(r[1]) for r in rows],
                      "value.session_window.start": [_ms(r[1]) for r in rows],
                      "value.session_window.end": [_ms(r[2]) for r in rows],
                      "value.key": [r[0] for r in rows],
                      "value.count": [r[3] for r in rows], "value.sum": [r[4] for r in rows],
                      "partition_id": 0}).to_parquet(reads / "b2.parquet")
        files = [{"operator": 0, "batch": 2, "file": "b2.parquet"}]
        answer = {"in_driver": True, "batches": [2], "failed": [], "files": files}
        (reads / ANSWER).write_text(json.dumps(answer))
        outcome = state_check.check(case, SESSIONS, TRUTH, BATCHES, [], T0_S, [case / "checkpoint"])
        assert outcome is not None and outcome.count == 1, (outcome.notes, outcome.diverged)
        found = outcome.diverged.iloc[0]
        assert (found["column"], found["expected"], found["held"]) == ("count", "1", "0")
        assert found["key"] == f"key=b session_start_ms={_ms(4.1)}"


class TestExpectedDedup:
    """dedup's state (dropDuplicatesWithinWatermark, a delay of 1 s): each event id let through,
    kept until the batch's watermark is at or past its event time plus the delay."""

    def _state(self, truth, batch: int) -> dict[int, int]:
        got = dedup.state_after(truth, BATCHES, 1000, batch)
        return dict(zip(got["event_id"], got["expiresAtMicros"], strict=True))

    def test_the_ids_up_to_a_batch_are_kept_with_their_expiry_in_microseconds(self):
        """After batch 1 (watermark 0) all four ids read so far are kept; expiry = event time +
        1 s, in microseconds as Spark stores it."""
        times = (0.1, 0.2, 0.5, 2.5)
        assert self._state(TRUTH, 1) == {i: (_ms(t) + 1000) * 1000 for i, t in enumerate(times)}

    def test_an_id_whose_expiry_the_watermark_reached_is_evicted_and_a_resent_copy_adds_nothing(self):
        """Batch 2 runs with a watermark of 3.0 s: ids expiring at 1.1-1.5 s are gone, 2.5 s + 1 s
        = 3.5 s stays; a copy of id 3 re-sent in batch 2 (same id, same time) is not kept twice."""
        resent = pd.concat([TRUTH.iloc[:4], TRUTH.iloc[[3]], TRUTH.iloc[4:]], ignore_index=True)
        resent["offset"] = np.arange(len(resent))
        batches_ = [BATCHES[0], BATCHES[1], Batch(2, _ms(3.0), {0: 7}, True, committed_ms=_ms(3.5))]
        got = dedup.state_after(resent, batches_, 1000, 2)
        assert sorted(got["event_id"]) == [3, 4, 5] and len(got) == 3
        exact = dedup.state_after(TRUTH, [BATCHES[0], BATCHES[1], Batch(2, _ms(3.5), {0: 6}, True)], 1000, 2)
        assert 3 not in set(exact["event_id"])   # expiry 3.5 s, watermark 3.5 s: Spark removes it (>=)


class TestCompare:
    def _held(self, rows: list[tuple[str, float, int, int]]) -> pd.DataFrame:
        return pd.DataFrame([{**_window(k, s), "count": c, "sum_amount": a} for k, s, c, a in rows])

    def test_a_state_that_holds_what_it_must_has_no_divergence(self):
        expected = state_check.expected_windows(TRUTH, BATCHES, 1, 2000, 2000)
        held = self._held([("a", 0, 2, 11), ("b", 0, 1, 5), ("a", 2, 1, 7)])
        assert state_check.compare(expected, held, KEY, VALUES).empty

    def test_a_lost_update_a_missing_key_and_an_extra_key_are_each_named(self):
        """A count one short (its sum too), a window the state lacks, a window it should not hold:
        the lost update once per column, each absent key once."""
        expected = state_check.expected_windows(TRUTH, BATCHES, 1, 2000, 2000)
        held = self._held([("a", 0, 1, 10), ("a", 2, 1, 7), ("z", 0, 9, 9)])
        found = state_check.compare(expected, held, KEY, VALUES)
        rows = {(r.key.split()[0], r.column): (r.expected, r.held) for r in found.itertuples()}
        assert len(found) == 4, found.to_string()   # the window of a the state holds right is not one
        assert rows == {("key=a", "count"): ("2", "1"), ("key=a", "sum_amount"): ("11", "10"),
                        ("key=b", "(the key)"): ("1", "none"), ("key=z", "(the key)"): ("none", "9")}
        assert json.loads(found.iloc[0]["key_values"])["key"] == "a"


class TestChosen:
    def test_the_last_batch_and_the_first_committed_after_each_fault(self):
        """A fault at 1.5 s: batch 1 committed at 2.0 s is the first after it; batch 2 is the last."""
        fault = FaultRecord("kill-driver", 1.5, 1.5, 3.0, "driver", True, landed_s=1.5)
        assert state_check.chosen(BATCHES, [fault], T0_S) == {1: "after kill-driver at 1.5 s", 2: "final"}

    def test_a_fault_after_the_last_commit_adds_nothing(self):
        fault = FaultRecord("kill-driver", 9.0, 9.0, 9.5, "driver", True)
        assert state_check.chosen(BATCHES, [fault], T0_S) == {2: "final"}

    def test_a_run_that_committed_nothing_reads_nothing(self):
        assert state_check.chosen([Batch(0, 0, {0: 2}, False)], [], T0_S) == {}


class TestJobValues:
    def test_each_count_sum_or_max_maps_to_its_one_buffer_field(self):
        """balances: sum, count and max, each an output column; their buffers are the state's
        value fields by name."""
        held = pd.DataFrame(columns=["key.account", "value.sum", "value.count", "value.max", "partition_id"])
        aggs = [{"output": "balance_cents", "function": "sum", "buffer": ["sum"]},
                {"output": "transactions", "function": "count", "buffer": ["count"]},
                {"output": "last_ts", "function": "max", "buffer": ["max"]}]
        outcome = state_check.Outcome()
        columns = {"balance_cents": "LONG", "transactions": "LONG", "last_ts": "LONG"}
        got = state_check._values(aggs, held, columns, outcome)
        assert got == {"value.sum": "balance_cents", "value.count": "transactions", "value.max": "last_ts"}

    def test_two_buffers_of_one_name_and_an_average_are_left_out_and_said(self):
        """Two counts share the buffer name `count`: which state field is which is not known; an
        average's buffer is not its output. Nothing is guessed, and the note says so."""
        held = pd.DataFrame(columns=["key.user", "value.count", "value.count_1", "value.sum"])
        aggs = [{"output": "clicks", "function": "count", "buffer": ["count"]},
                {"output": "pages", "function": "count", "buffer": ["count"]},
                {"output": "mean", "function": "avg", "buffer": ["sum", "count"]}]
        outcome = state_check.Outcome()
        assert state_check._values(aggs, held, {"clicks": "LONG", "pages": "LONG", "mean": "DOUBLE"},
                                   outcome) == {}
        assert "not checked" in outcome.notes[0]

    def test_a_job_that_did_not_build_leaves_the_state_unchecked(self):
        outcome = state_check.Outcome()
        assert state_check._values("the job did not build", pd.DataFrame(), {}, outcome) == {}
        assert "not known" in outcome.notes[0]


class TestOutcome:
    def test_a_divergence_is_a_problem_naming_operator_key_batch_and_values(self):
        diverged = pd.DataFrame([{"operator": 0, "store": "default", "batch": 7, "after": "final",
                                  "key": "key=a", "key_values": "{}", "column": "count", "expected": "5",
                                  "held": "3"}])
        problem = state_check.Outcome(diverged, 1).problem()
        assert problem is not None
        assert "operator 0, key key=a, count after batch 7: held 3, expected 5" in problem

    def test_a_state_that_held_what_it_must_is_no_problem(self):
        assert state_check.Outcome().problem() is None


class TestFinding:
    def _case(self, tmp_path: Path, sink: pd.DataFrame) -> Inputs:
        case = tmp_path / "case"
        (case / "checkpoint").mkdir(parents=True)
        (case / state_check.STATE_DIR).mkdir()
        w = _window("a", 2)
        pd.DataFrame([{"operator": 0, "store": "default", "batch": 1, "after": "after kill-driver at 1.5 s",
                       "key": f"key=a window_start_ms={w['window_start_ms']} "
                              f"window_end_ms={w['window_end_ms']}",
                       "key_values": json.dumps(w), "column": "count", "expected": "2", "held": "1"}]
                     ).to_parquet(case / state_check.STATE_DIR / state_check.DIVERGED)
        fault = FaultRecord("state-rollback", 1.5, 1.5, 3.0, "driver", True, landed_s=1.5)
        checked = CheckResult({"lost": 0, "duplicated": 0, "unexpected": 0}, np.array([]), np.array([]))
        return Inputs(truth=TRUTH, sink=sink, batches=BATCHES, checked=checked, pipeline=WINDOWS,
                      faults=[fault], checkpoints=[case / "checkpoint"], t0_s=T0_S)

    def test_state_diverged_is_a_registered_class(self):
        assert "state-diverged" in CLASSES

    def test_the_story_names_the_fault_and_says_the_sink_had_no_row_yet(self, tmp_path):
        sink = pd.DataFrame([{**_window("a", 2), "count": 1, "sum_amount": 7, "batch_id": 2,
                              "committed_ms": _ms(3.5)}])
        (found,) = [f for f in build(self._case(tmp_path, sink)) if f.cls == "state-diverged"]
        (w,) = found.witness
        assert (w["operator"], w["batch"], w["expected"], w["held"]) == (0, 1, "2", "1")
        assert w["fault"] == "state-rollback at 1.5 s"
        assert "had not reached the sink yet" in found.story
        assert "held count=1 for window [2.0 s, 4.0 s) of key a where the oracle says 2" in found.story
        assert "by the end the sink held 1 row(s) for it, the last count=1" in found.story
        assert found.story.rstrip().endswith(".") and "To fix:" in found.story

    def test_a_row_the_sink_held_by_then_is_said(self, tmp_path):
        sink = pd.DataFrame([{**_window("a", 2), "count": 1, "sum_amount": 7, "batch_id": 1,
                              "committed_ms": _ms(2.0)}])
        (found,) = [f for f in build(self._case(tmp_path, sink)) if f.cls == "state-diverged"]
        assert "the sink already held 1 row(s) for it by then (count=1)" in found.story

    def test_a_case_without_divergences_has_no_finding(self, tmp_path):
        inputs = self._case(tmp_path, pd.DataFrame())
        (Path(inputs.checkpoints[0]).parent / state_check.STATE_DIR / state_check.DIVERGED).unlink()
        assert not [f for f in build(inputs) if f.cls == "state-diverged"]


class TestPlantTarget:
    def _store(self, root: Path, sizes: dict[int, dict[int, int]], commits: int) -> Path:
        cp = root / "checkpoint"
        (cp / "commits").mkdir(parents=True)
        for n in range(commits):
            (cp / "commits" / str(n)).write_text("v1\n")
        for part, versions in sizes.items():
            where = cp / "state" / "0" / str(part)
            where.mkdir(parents=True)
            for version, size in versions.items():
                (where / f"{version}.delta").write_bytes(b"x" * size)
        return cp

    def test_the_newest_committed_version_of_the_largest_partition(self, tmp_path):
        """Batches 0-2 committed: version 3 is the newest; partition 1's delta is the larger."""
        from tests.scenarios.state_rollback import rollback_target

        cp = self._store(tmp_path, {0: {1: 5, 2: 5, 3: 10}, 1: {1: 5, 2: 5, 3: 40}}, commits=3)
        assert rollback_target(cp) == (1, 3, ".delta")

    def test_rocksdb_s_snapshot_per_version_and_its_changelog(self, tmp_path):
        """RocksDB without changelog checkpointing writes a zip per version; with it, a changelog
        per version (and a zip now and then): the changelog is the version's file then."""
        from tests.scenarios.state_rollback import rollback_target

        cp = self._store(tmp_path, {0: {}, 1: {}}, commits=3)
        for part, keys in ((0, {2: 10, 3: 14}), (1, {2: 3, 3: 4})):
            for version, n in keys.items():
                where = cp / "state" / "0" / str(part) / f"{version}.zip"
                _snapshot_zip(where, [f"{n}.sst"], n, pad=part * 100)
        assert rollback_target(cp) == (1, 3, ".zip")   # the larger zip
        for version in (2, 3):
            (cp / "state" / "0" / "1" / f"{version}.changelog").write_bytes(b"c" * (1000 + version))
        assert rollback_target(cp) == (1, 3, ".changelog")

    def test_a_version_that_changed_nothing_is_no_target(self, tmp_path):
        """A batch that read no row of the partition's keys writes a zip with the same state (and
        an empty delta): putting it back would lose nothing, so the plant waits for another."""
        from tests.scenarios.state_rollback import rollback_target

        cp = self._store(tmp_path, {0: {2: 7, 3: 7}}, commits=3)   # two empty deltas: the same bytes
        assert rollback_target(cp) is None
        cp = self._store(tmp_path / "zips", {0: {}}, commits=3)
        for version in (2, 3):   # the same SSTs and keys, the zip's other bytes aside
            _snapshot_zip(cp / "state" / "0" / "0" / f"{version}.zip", [], 0, pad=version)
        assert rollback_target(cp) is None

    def test_no_target_before_two_versions(self, tmp_path):
        from tests.scenarios.state_rollback import rollback_target

        assert rollback_target(self._store(tmp_path, {0: {1: 5}}, commits=1)) is None

    def test_a_join_s_four_stores_are_one_target_and_all_go_back(self, tmp_path):
        """A stream-stream join keeps four stores per partition, each in its own directory: the
        partition is a target when one of them changed, and the plant puts back every store's
        version together (so that the rows and their counts per key agree)."""
        from tests.scenarios.state_rollback import rollback_target, stores

        cp = self._store(tmp_path, {}, commits=3)
        names = ["left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues",
                 "right-keyWithIndexToValue"]
        for part, grew in ((0, 0), (1, 30)):
            for name in names:
                where = cp / "state" / "0" / str(part) / name
                where.mkdir(parents=True)
                (where / "2.delta").write_bytes(b"x" * 7)
                (where / "3.delta").write_bytes(b"x" * (7 + (grew if name.startswith("left") else 0)))
        assert rollback_target(cp) == (1, 3, ".delta")
        assert [d.name for d in stores(cp / "state" / "0" / "1")] == names
        assert stores(cp / "state" / "0" / "0") == [cp / "state" / "0" / "0" / n for n in names]


def _snapshot_zip(path: Path, ssts: list[str], keys: int, pad: int = 0) -> None:
    """A RocksDB snapshot zip as Spark 4.2 writes it: a `metadata` entry ("v1", then JSON)."""
    import zipfile

    meta = {"sstFiles": [{"localFileName": s, "dfsSstFileName": s, "sizeBytes": 1} for s in ssts],
            "numKeys": keys, "numInternalKeys": keys}
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("metadata", "v1\n" + json.dumps(meta))
        z.writestr("OPTIONS-000007", "x" * pad)


class TestNothingToRead:
    def _case(self, tmp_path: Path, operators: list[str], mode: str = "whole") -> Path:
        case = tmp_path / "case"
        (case / "checkpoint" / "state").mkdir(parents=True)
        (case / "oracle").mkdir()
        (case / "plan.json").write_text(json.dumps({"operators": operators, "watermarks": []}))
        (case / "oracle" / "oracle.json").write_text(json.dumps({"mode": mode}))
        pd.DataFrame({"user": ["u"], "clicks": [1]}).to_parquet(case / "oracle" / "with-flush.parquet")
        return case

    def _check(self, case: Path) -> state_check.Outcome | None:
        from harness.scenario.job import JobSpec

        job = JobSpec(kind="job", oracle="batch")
        return state_check.check(case, job, TRUTH, BATCHES, [], T0_S, [case / "checkpoint"])

    def test_a_job_whose_state_is_not_one_aggregation_starts_no_spark(self, tmp_path):
        """applyInPandasWithState's state has no model yet: said, and no reader is started (a
        reader would fail here: there is no Spark in the unit lane)."""
        outcome = self._check(self._case(tmp_path, ["applyInPandasWithState"]))
        assert outcome is not None and outcome.count == 0 and not outcome.checked
        assert "applyInPandasWithState" in outcome.notes[0]

    def test_late_records_leave_a_job_s_state_unchecked(self, tmp_path):
        outcome = self._check(self._case(tmp_path, ["aggregate"], mode="partial"))
        assert outcome is not None and "its mode: partial" in outcome.notes[0]

    def test_a_query_that_kept_no_state_is_not_checked(self, tmp_path):
        case = self._case(tmp_path, [])
        (case / "checkpoint" / "state").rmdir()
        assert self._check(case) is None

    def test_a_pipeline_without_a_state_model_is_not_checked(self, tmp_path):
        case = self._case(tmp_path, [])
        assert state_check.check(case, Pipeline(kind="passthrough"), TRUTH, BATCHES, [], T0_S,
                                 [case / "checkpoint"]) is None


class TestJobMidRun:
    """A job's aggregation state after a batch mid-run: the batch oracle answers over the records
    batches 0 to N read, for each batch N before the last that the driver read the state after."""

    def _given(self, mode: str = "whole"):
        from harness.check.batch_oracle.job_input import Input

        read = TRUTH.assign(batch=[0, 0, 1, 1, 2, 2])
        return Input(read, np.zeros(len(read), bool), [(0, 0, 6)], mode, "")

    def _case(self, tmp_path: Path, batches: list[int]) -> Path:
        from workloads.pipelines.state_read import ANSWER

        case = tmp_path / "case"
        (case / state_check.STATE_DIR).mkdir(parents=True)
        said = {"in_driver": True, "batches": batches}
        (case / state_check.STATE_DIR / ANSWER).write_text(json.dumps(said))
        return case

    def test_each_batch_the_driver_read_before_the_last_gets_an_answer(self, tmp_path):
        from harness.check.batch_oracle.oracle import state_batches

        case = self._case(tmp_path, [4, 1, 2])
        assert state_batches(case, self._given(), {"operators": ["aggregate"]}) == [1, 2]

    def test_none_where_the_state_check_could_not_judge_it(self, tmp_path):
        from harness.check.batch_oracle.oracle import state_batches

        case = self._case(tmp_path, [1, 2])
        assert state_batches(case, self._given("partial"), {"operators": ["aggregate"]}) == []
        assert state_batches(case, self._given(), {"operators": ["aggregate", "join"]}) == []
        assert state_batches(tmp_path / "nowhere", self._given(), {"operators": ["aggregate"]}) == []

    def test_a_mid_run_batch_is_judged_against_the_answer_up_to_it(self, tmp_path):
        """The answer up to batch 1 is what the state after batch 1 must hold; a batch with no
        answer is said unchecked."""
        from harness.check.batch_oracle.oracle import STATE_AFTER

        case = tmp_path / "case"
        (case / "oracle").mkdir(parents=True)
        pd.DataFrame({"user": ["u"], "clicks": [2]}).to_parquet(case / "oracle" / f"{STATE_AFTER}1.parquet")
        pd.DataFrame({"user": ["u"], "clicks": [5]}).to_parquet(case / "oracle" / "with-flush.parquet")
        held = pd.DataFrame({"key.user": ["u"], "value.count": [2]})
        answer = {"aggregates": [{"output": "clicks", "function": "count", "buffer": ["count"]}]}
        from harness.scenario.job import JobSpec

        columns = MappingProxyType({"user": "STRING", "clicks": "LONG"})
        job = JobSpec(kind="job", oracle="batch", columns=columns)
        (case / "plan.json").write_text(json.dumps({"operators": ["aggregate"], "watermarks": []}))
        expected, got, key, values = state_check._job(case, answer, held, job, state_check.Outcome(), 1)
        assert state_check.compare(expected, got, key, values).empty
        expected, got, key, values = state_check._job(case, answer, held, job, state_check.Outcome())
        differ = state_check.compare(expected, got, key, values)
        assert differ[["expected", "held"]].values.tolist() == [["5", "2"]]
        assert state_check._answered(case, 1) and not state_check._answered(case, 2)


class TestReadInTheDriver:
    """The driver reads the state at its end when asked (workloads/pipelines/state_read.py serve);
    the check uses those reads only when they cover every batch it wants."""

    def _commits(self, checkpoint: Path, at: dict[int, float]) -> None:
        import os

        (checkpoint / "commits").mkdir(parents=True)
        for batch, t_s in at.items():
            path = checkpoint / "commits" / str(batch)
            path.write_text("v1\n{}")
            os.utime(path, (t_s, t_s))

    def test_the_driver_picks_the_first_batch_after_each_landing_and_the_last(self, tmp_path):
        from workloads.pipelines.state_read import batches_after

        self._commits(tmp_path, {0: 100.0, 1: 101.0, 2: 102.0, 3: 103.0, 4: 104.0})
        assert batches_after(tmp_path, [100_500.0, 102_000.0]) == [1, 3, 4]   # 102.0 s is not after 102.0 s
        assert batches_after(tmp_path, []) == [4]
        assert batches_after(tmp_path, [200_000.0]) == [4]   # nothing after it: the last only

    def test_its_reads_count_only_when_they_cover_every_batch_wanted(self, tmp_path):
        from workloads.pipelines.state_read import ANSWER

        out = tmp_path / state_check.STATE_DIR
        out.mkdir()
        pd.DataFrame({"operatorId": [0]}).to_parquet(out / "metadata.parquet")
        (out / ANSWER).write_text(json.dumps({"in_driver": True, "batches": [3, 9], "files": []}))
        assert state_check.in_driver(out, [3, 9]) is not None
        assert state_check.in_driver(out, [9]) is not None
        assert state_check.in_driver(out, [3, 8, 9]) is None   # batch 8 wanted, not read: its own reader
        (out / ANSWER).write_text(json.dumps({"batches": [3, 9], "files": []}))   # the reader's own answer
        assert state_check.in_driver(out, [3, 9]) is None

    def test_the_ask_names_the_live_checkpoint_the_landings_and_where_to_write(self, tmp_path):
        from workloads.pipelines.state_read import REQUEST

        state_check.ask(tmp_path, tmp_path / "case", tmp_path / "case" / "checkpoint", [1_000.5], job=True)
        asked = json.loads((tmp_path / REQUEST).read_text())
        assert asked == {"checkpoint": str(tmp_path / "case" / "checkpoint"), "after_ms": [1000.5],
                         "last_only": False, "driver": str(tmp_path / "case" / "driver.json"),
                         "out": str(tmp_path / "case" / state_check.STATE_DIR)}


class TestJudgedAgainUnderARecheck:
    """`python -m harness check` judges the state the run read again (issue 49: a verdict
    re-checkable from the run directory): from the run's reads, at the batches the run chose,
    with no Spark process, writing its files in the re-check's directory, not over the run's."""

    def _run_case(self, tmp_path: Path, held_count_a4: int) -> Path:
        """A run's case whose driver read operator 0's state after batch 2: right but for key a's
        window [4 s, 6 s), whose count is `held_count_a4` (1 is right)."""
        from workloads.pipelines.state_read import ANSWER

        case = tmp_path / "run" / "cases" / "windows"
        (case / "checkpoint" / "state").mkdir(parents=True)
        reads = case / state_check.STATE_DIR
        reads.mkdir()
        pd.DataFrame({"operatorId": [0], "operatorName": [state_check.AGGREGATE]}).to_parquet(
            reads / "metadata.parquet")
        rows = [("a", 2.0, 1, 7), ("b", 4.0, 1, 2), ("a", 4.0, held_count_a4, 3)]
        pd.DataFrame({"key.key": [r[0] for r in rows], "key.window.start": [_ms(r[1]) for r in rows],
                      "key.window.end": [_ms(r[1] + 2) for r in rows], "value.count": [r[2] for r in rows],
                      "value.sum": [r[3] for r in rows], "partition_id": 0}).to_parquet(reads / "b2.parquet")
        files = [{"operator": 0, "batch": 2, "file": "b2.parquet"}]
        answer = {"in_driver": True, "batches": [2], "failed": [], "files": files}
        (reads / ANSWER).write_text(json.dumps(answer))
        return case

    def _again(self, tmp_path: Path, case: Path) -> state_check.Outcome | None:
        from harness.check.batch_oracle import spark_run

        with spark_run.rechecking(tmp_path / "check" / "cases"):
            return state_check.check(case, WINDOWS, TRUTH, BATCHES, [], 0.0, [case / "checkpoint"],
                                     wanted={2: "final"})

    def test_a_lost_update_in_the_run_s_reads_is_found_again(self, tmp_path):
        case = self._run_case(tmp_path, held_count_a4=2)
        outcome = self._again(tmp_path, case)
        assert outcome is not None and outcome.count == 1, outcome
        assert outcome.diverged.iloc[0][["column", "expected", "held"]].to_list() == ["count", "1", "2"]
        assert outcome.checked == [{"operator": 0, "batch": 2, "after": "final", "keys": 3,
                                    "columns": ["count", "sum_amount"], "diverged": 1}]
        assert any("judged again from the state the run read" in n for n in outcome.notes)
        written = tmp_path / "check" / "cases" / "windows" / state_check.STATE_DIR
        assert len(pd.read_parquet(written / state_check.DIVERGED)) == 1
        assert not (case / state_check.STATE_DIR / state_check.DIVERGED).exists()   # the run's as they were

    def test_the_right_state_has_no_divergence(self, tmp_path):
        outcome = self._again(tmp_path, self._run_case(tmp_path, held_count_a4=1))
        assert outcome is not None and outcome.count == 0 and outcome.checked

    def test_reads_that_miss_a_batch_wanted_are_not_used(self, tmp_path):
        case = self._run_case(tmp_path, held_count_a4=1)
        assert state_check.kept_reads(case / state_check.STATE_DIR, [2]) is not None
        assert state_check.kept_reads(case / state_check.STATE_DIR, [1, 2]) is None
        assert state_check.kept_reads(tmp_path / "nowhere", [2]) is None


LOGINS = Pipeline(kind="failed_logins",
                  values=MappingProxyType({"attempts": 3, "within_ms": 1000, "watermark_ms": 0}),
                  columns=MappingProxyType({"user_id": "LONG", "alert_seq": "LONG",
                                            "first_failure_ms": "LONG", "last_failure_ms": "LONG",
                                            "failures": "LONG"}))
# user 7's failures at 100, 300 (sent twice), 600 and 10,000 ms: batch 0 reads the first two,
# batch 1 the rest (the copy, the third failure: an alert of three, and one kept), then a batch
# whose watermark closes everything
LOGIN_TRUTH = pd.DataFrame({"event_id": [0, 1, 1, 2, 3], "user": 7, "event_type": "login-failed",
                            "event_time_ms": [100, 300, 300, 600, 10_000], "key": "u7", "amount": 0,
                            "partition": 0, "offset": np.arange(5), "control": False})
LOGIN_BATCHES = [Batch(0, 0, {0: 2}, True), Batch(1, 0, {0: 5}, True), Batch(2, 10**12, {0: 5}, True)]


def _held(model: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The model's frames as the state reader writes them (flattened, one row per list element)."""
    back = {var: {v: k for k, v in names.items()} for var, (names, _, _) in state_check.LOGINS_VARS.items()}
    out = {}
    for var, frame in model.items():
        rows = frame.loc[frame.index.repeat(frame["copies"])] if "copies" in frame else frame
        rows = rows.drop(columns=["copies"], errors="ignore")
        out[var] = rows.rename(columns=back[var]).assign(partition_id=0)
    return out


def _answer(tmp_path: Path, batch: int, held: dict[str, pd.DataFrame]) -> dict:
    files = []
    for var, frame in held.items():
        name = f"state-0-default-{batch}-{var}.parquet"
        frame.to_parquet(tmp_path / name, index=False)
        files.append({"operator": 0, "store": "default", "batch": batch, "var": var, "file": name})
    return {"files": files, "failed": []}


class TestLoginsState:
    """failed_logins' transformWithState state: the list, map and value state and the timers
    (harness/check/logins.py `state_after`), against what the reader writes of each."""

    def test_before_the_alert_every_failure_is_pending_seen_and_has_its_timer(self):
        got = state_check_logins(0)
        pending = got["pending"][["event_time_ms", "event_id", "copies"]].values.tolist()
        assert pending == [[100, 0, 1], [300, 1, 1]]
        assert sorted(got["seen"]["event_id"]) == [0, 1] and got["raised"].empty
        assert got["registered-timers"]["expiration_timestamp_ms"].tolist() == [1100, 1300]

    def test_the_alert_consumes_its_failures_and_the_copy_counts_once(self):
        got = state_check_logins(1)
        assert got["pending"][["event_time_ms", "event_id"]].values.tolist() == [[10_000, 3]]
        assert sorted(got["seen"]["event_id"]) == [0, 1, 2, 3]
        assert got["raised"].values.tolist() == [[7, 1]]
        assert got["registered-timers"]["expiration_timestamp_ms"].tolist() == [1100, 1300, 1600, 11_000]

    def test_a_timer_at_exactly_the_watermark_has_fired_and_forgotten_its_failure(self):
        """Batch 1's watermark at 1,300 ms: the timers at 1,100 and 1,300 fired (Spark fires a timer
        at or below the watermark), forgetting the failures at 100 and 300 (consumed by the alert
        already, but kept in the map until then)."""
        from harness.check import logins

        batches = [LOGIN_BATCHES[0], Batch(1, 1300, {0: 5}, True), LOGIN_BATCHES[2]]
        got = logins.state_after(LOGIN_TRUTH, batches, 3, 1000, 1)
        assert sorted(got["seen"]["event_id"]) == [2, 3]
        assert got["registered-timers"]["expiration_timestamp_ms"].tolist() == [1600, 11_000]

    def test_the_watermark_past_every_timer_leaves_only_the_alert_count(self):
        got = state_check_logins(2)
        assert got["pending"].empty and got["seen"].empty and got["registered-timers"].empty
        assert got["raised"].values.tolist() == [[7, 1]]

    def test_the_state_as_modelled_holds_and_a_lost_map_entry_diverges(self, tmp_path):
        """The model's own state, written as the reader writes it, gives no divergence; the same
        with one event id gone from the map state gives one, named by its variable and key."""
        held = _held(state_check_logins(1))
        outcome = state_check.Outcome()
        same = state_check._logins(tmp_path, _answer(tmp_path, 1, held), 0, 1, "final", LOGINS, LOGIN_TRUTH,
                                   LOGIN_BATCHES, outcome)
        assert same is not None and same.empty
        assert {c["store"] for c in outcome.checked} == set(state_check.LOGINS_VARS)
        held["seen"] = held["seen"][held["seen"]["user_map_key.event_id"] != 2]
        lost = state_check._logins(tmp_path, _answer(tmp_path, 1, held), 0, 1, "final", LOGINS, LOGIN_TRUTH,
                                   LOGIN_BATCHES, state_check.Outcome())
        assert lost[["store", "key", "column", "expected", "held"]].values.tolist() == [
            ["seen", "user_id=7 event_id=2", "(the key)", "600", "none"]], lost

    def test_a_timer_registered_twice_diverges_as_two_copies(self, tmp_path):
        held = _held(state_check_logins(1))
        held["registered-timers"] = pd.concat([held["registered-timers"], held["registered-timers"].head(1)])
        found = state_check._logins(tmp_path, _answer(tmp_path, 1, held), 0, 1, "final", LOGINS, LOGIN_TRUTH,
                                    LOGIN_BATCHES, state_check.Outcome())
        assert found[["store", "key", "column", "expected", "held"]].values.tolist() == [
            ["registered-timers", "user_id=7 expiration_timestamp_ms=1100", "copies", "1", "2"]]


def state_check_logins(batch: int) -> dict[str, pd.DataFrame]:
    from harness.check import logins

    return logins.state_after(LOGIN_TRUTH, LOGIN_BATCHES, 3, 1000, batch)


JOIN = Pipeline(kind="order_payment_join", values=MappingProxyType({"bound_ms": 1000, "watermark_ms": 0}),
                columns=MappingProxyType({}))
# user 5's order at 1,000 ms, paid at 1,500 (batch 1); user 6's order at 1,200, never paid, and a
# payment of user 6 at 900 (before the order: no pair); a control event (both sides) at 3,000
JOIN_TRUTH = pd.DataFrame({"event_id": [0, 1, 2, 3, 4], "user": [5.0, 6.0, 6.0, 5.0, np.nan],
                           "event_type": ["order", "order", "payment", "payment", "control"],
                           "event_time_ms": [1000, 1200, 900, 1500, 3000], "key": "k", "amount": 0,
                           "partition": 0, "offset": np.arange(5), "control": [False] * 4 + [True]})


def _join_batches(water_2: int) -> list[Batch]:
    ends = ({0: 3}, {0: 4}, {0: 5})
    marks = (0, 0, water_2)
    return [Batch(n, marks[n], ends[n], True, {0: 0} if n == 0 else None, source_ends=(ends[n], ends[n]),
                  source_starts=({0: 0}, {0: 0}) if n == 0 else (None, None)) for n in range(3)]


class TestJoinState:
    """order_payment_join's stream-stream join state (harness/check/join.py `state_after`):
    each side's buffered rows, with `matched`, until the batch's watermark evicts them."""

    def test_every_row_read_is_buffered_and_a_pair_marks_both(self):
        from harness.check import join

        got = join.state_after(JOIN_TRUTH, _join_batches(0), 1000, 1)
        left, right = got["left"], got["right"]
        assert left[["user_id", "order_id", "matched"]].values.tolist() == [[5, 0, True], [6, 1, False]]
        assert right[["user_id", "payment_id", "matched"]].values.tolist() == [[5, 3, True], [6, 2, False]]

    def test_the_watermark_evicts_orders_after_the_bound_and_payments_at_once(self):
        """Watermark 2,200 at batch 2: an order stays while its time + bound >= it (1,200 + 1,000),
        a payment while its time >= it (none); the control event (user -1, 3,000) stays on both
        sides, matched by its own copy."""
        from harness.check import join

        got = join.state_after(JOIN_TRUTH, _join_batches(2200), 1000, 2)
        assert got["left"][["user_id", "order_id", "copies", "matched"]].values.tolist() == [
            [-1, 4, 1, True], [6, 1, 1, False]]
        assert got["right"][["user_id", "payment_id"]].values.tolist() == [[-1, 4]]
        got = join.state_after(JOIN_TRUTH, _join_batches(2201), 1000, 2)
        assert got["left"]["order_id"].tolist() == [4]

    def _answer(self, tmp_path: Path, model: dict[str, pd.DataFrame], batch: int) -> dict:
        files = []
        for side, prefix, name in (("left", "o", "order"), ("right", "p", "payment")):
            frame = model[side]
            rows = frame.loc[frame.index.repeat(frame["copies"])]
            at = rows[f"{name}_time_ms"]
            ident = rows[f"{name}_id"]
            held = pd.DataFrame({"key.field0": rows["user_id"], "key.index": 0, f"value.{prefix}_id": ident,
                                 f"value.{prefix}_user": rows["user_id"],
                                 f"value.{prefix}_time": at, f"value.{prefix}_time_ms": at,
                                 "value.matched": rows["matched"], "partition_id": 0})
            counts = held.groupby("key.field0").size().rename("value.value").reset_index()
            for store, frame_ in ((f"{side}-keyWithIndexToValue", held), (f"{side}-keyToNumValues", counts)):
                name = f"state-0-{store}-{batch}.parquet"
                frame_.to_parquet(tmp_path / name, index=False)
                files.append({"operator": 0, "store": store, "batch": batch, "file": name})
        return {"files": files, "failed": []}

    def test_the_state_as_modelled_holds_and_a_lost_order_diverges_in_two_stores(self, tmp_path):
        from harness.check import join

        model = join.state_after(JOIN_TRUTH, _join_batches(0), 1000, 1)
        outcome = state_check.Outcome()
        same = state_check._join(tmp_path, self._answer(tmp_path, model, 1), 0, 1, "final", JOIN, JOIN_TRUTH,
                                 _join_batches(0), outcome)
        assert same is not None and same.empty
        assert len(outcome.checked) == 4
        model["left"] = model["left"][model["left"]["order_id"] != 1]
        lost = state_check._join(tmp_path, self._answer(tmp_path, model, 1), 0, 1, "final", JOIN, JOIN_TRUTH,
                                 _join_batches(0), state_check.Outcome())
        assert lost[["store", "key", "column", "expected", "held"]].values.tolist() == [
            ["left-keyWithIndexToValue", "user_id=6 order_id=1 order_time_ms=1200", "(the key)", "1", "none"],
            ["left-keyToNumValues", "user_id=6", "(the key)", "1", "none"]], lost


STREAKS = Pipeline(kind="streak_count", values=MappingProxyType({"ttl_ms": 1000}),
                   columns=MappingProxyType({}))
# users 1 and 2; batch 0 (at 10,000 ms) reads events 0-2, batch 1 (10,500) event 3 of user 2,
# batch 2 (11,400: user 1's count, set at 10,000, expired at 11,000; user 2's lives until 11,500)
# events 4-5 of users 1 and 2
STREAK_TRUTH = pd.DataFrame({"event_id": [0, 1, 2, 3, 4, 5], "user": [1, 2, 1, 2, 1, 2], "key": "k",
                             "event_time_ms": 0, "amount": 0, "partition": 0, "offset": np.arange(6),
                             "control": False})
STREAK_BATCHES = [Batch(0, 0, {0: 3}, True, {0: 0}, timestamp_ms=10_000),
                  Batch(1, 0, {0: 4}, True, timestamp_ms=10_500),
                  Batch(2, 0, {0: 6}, True, timestamp_ms=11_400)]


class TestStreaks:
    """streak_count's oracle and its count state with a TTL (harness/check/streaks.py)."""

    def test_a_count_goes_on_within_its_ttl_and_starts_again_after_it(self):
        from harness.check import streaks

        emitted, _ = streaks.mirror(STREAK_TRUTH, STREAK_BATCHES, 1000)
        assert emitted[["event_id", "user_id", "n"]].values.tolist() == [
            [0, 1, 1], [2, 1, 2], [1, 2, 1], [3, 2, 2], [4, 1, 1], [5, 2, 3]]

    def test_a_ttl_runs_out_when_the_batch_s_timestamp_reaches_it(self):
        """Spark takes a value as gone once the batch's timestamp is at or past its expiry:
        batch 2 at exactly 11,000 starts user 1 again."""
        from dataclasses import replace

        from harness.check import streaks

        at = [*STREAK_BATCHES[:2], replace(STREAK_BATCHES[2], timestamp_ms=11_000)]
        emitted, _ = streaks.mirror(STREAK_TRUTH, at, 1000)
        assert emitted.set_index("event_id").at[4, "n"] == 1
        at = [*STREAK_BATCHES[:2], replace(STREAK_BATCHES[2], timestamp_ms=10_999)]
        assert streaks.mirror(STREAK_TRUTH, at, 1000)[0].set_index("event_id").at[4, "n"] == 3

    def test_the_state_holds_each_count_until_its_expiry(self):
        from harness.check import streaks

        after_1 = streaks.state_after(STREAK_TRUTH, STREAK_BATCHES, 1000, 1)
        assert after_1.values.tolist() == [[1, 2, 11_000, 0], [2, 2, 11_500, 1]]
        after_2 = streaks.state_after(STREAK_TRUTH, STREAK_BATCHES, 1000, 2)
        assert after_2.values.tolist() == [[1, 1, 12_400, 2], [2, 3, 12_400, 2]]

    def _answer(self, tmp_path: Path, held: pd.DataFrame, batch: int) -> dict:
        back = {v: k for k, v in state_check.STREAK_COLUMNS.items()}
        name = f"state-0-default-{batch}-count.parquet"
        held.rename(columns=back).assign(partition_id=0).to_parquet(tmp_path / name, index=False)
        return {"files": [{"operator": 0, "store": "default", "batch": batch, "var": "count", "file": name}],
                "failed": []}

    def test_the_modelled_state_holds_and_a_count_gone_early_is_expired_early(self, tmp_path):
        from harness.check import streaks

        model = streaks.state_after(STREAK_TRUTH, STREAK_BATCHES, 1000, 1)[["user_id", "n", "expires_ms"]]
        outcome = state_check.Outcome()
        same = state_check._streaks(tmp_path, self._answer(tmp_path, model, 1), 0, 1, "final", STREAKS,
                                    STREAK_TRUTH, STREAK_BATCHES, outcome)
        assert same is not None and same.empty and not outcome.expired_early
        outcome = state_check.Outcome()
        only_2 = self._answer(tmp_path, model[model["user_id"] == 2], 1)
        lost = state_check._streaks(tmp_path, only_2, 0, 1, "after kill-driver at 3 s", STREAKS, STREAK_TRUTH,
                                    STREAK_BATCHES, outcome)
        said = lost[["store", "key", "expected", "held"]].values.tolist()
        assert said == [["count", "user_id=1", "2", "none"]]
        (early,) = outcome.expired_early
        assert (early["key"], early["expires_ms"], early["set_batch"], early["batch_timestamp_ms"]) == (
            "user_id=1", 11_000, 0, 10_500)

    def test_a_count_held_past_its_expiry_diverges_but_is_not_early(self, tmp_path):
        from harness.check import streaks

        model = streaks.state_after(STREAK_TRUTH, STREAK_BATCHES, 1000, 1)[["user_id", "n", "expires_ms"]]
        late = pd.concat([model, pd.DataFrame([{"user_id": 3, "n": 1, "expires_ms": 10_400}])])
        outcome = state_check.Outcome()
        found = state_check._streaks(tmp_path, self._answer(tmp_path, late, 1), 0, 1, "final", STREAKS,
                                     STREAK_TRUTH, STREAK_BATCHES, outcome)
        assert found[["key", "expected", "held"]].values.tolist() == [["user_id=3", "none", "1"]]
        assert not outcome.expired_early

    def test_the_finding_tells_how_early(self, tmp_path):
        case = tmp_path / "case"
        (case / "checkpoint").mkdir(parents=True)
        (case / state_check.STATE_DIR).mkdir()
        pd.DataFrame([{"operator": 0, "store": "count", "batch": 1, "after": "final", "key": "user_id=1",
                       "key_values": json.dumps({"user_id": 1}), "expires_ms": 11_000, "set_batch": 0,
                       "batch_timestamp_ms": 10_500}]).to_parquet(case / state_check.STATE_DIR
                                                                   / state_check.EXPIRED_EARLY)
        checked = CheckResult({"lost": 0, "duplicated": 0, "unexpected": 0}, np.array([]), np.array([]))
        fault = FaultRecord("kill-driver", 0.2, 0.2, 0.4, "driver", True, landed_s=0.2)
        inputs = Inputs(truth=STREAK_TRUTH, sink=pd.DataFrame(), batches=STREAK_BATCHES, checked=checked,
                        pipeline=STREAKS, faults=[fault], checkpoints=[case / "checkpoint"], t0_s=10.0)
        (found,) = [f for f in build(inputs) if f.cls == "expired-early"]
        assert "expired-early" in CLASSES and found.count == 1
        (w,) = found.witness
        assert (w["set_batch"], w["early_s"]) == (0, 0.5)
        assert "held no value for user_id=1, set in batch 0" in found.story, found.story
        # read after the run's last batch, not the first after the fault: said so
        assert found.story.startswith("After batch 1, the run's last committed batch (the last fault before "
                                      "it: kill-driver at 0.2 s)"), found.story
        assert "ran until 1.0 s" in found.story and "batch 1 ran at 0.5 s: 0.5 s early" in found.story
        assert "To fix:" in found.story


class TestTransformWithStateReads:
    """Which reads the state reader makes of an operator (workloads/pipelines/state_read.py)."""

    @staticmethod
    def _op(name: str, props: dict | None):
        from collections import namedtuple

        Op = namedtuple("Op", "operatorId operatorName stateStoreName operatorProperties")
        return Op(0, name, "default", json.dumps(props) if props is not None else None)

    def test_each_variable_by_name_and_the_timers_of_an_event_time_processor(self):
        from workloads.pipelines.state_read import TIMERS, state_variables

        props = {"timeMode": "EventTime", "stateVariables": [
            {"stateName": "pending", "stateVariableType": "ListState"},
            {"stateName": "seen", "stateVariableType": "MapState"},
            {"stateName": "$eventTimers_keyToTimestamp", "stateVariableType": "TimerState"}]}
        op = self._op("transformWithStateInPySparkExec", props)
        assert state_variables(op) == ["pending", "seen", TIMERS]
        no_time = self._op("transformWithStateInPySparkExec", {**props, "timeMode": "NoTime"})
        assert state_variables(no_time) == ["pending", "seen"]

    def test_another_operator_is_read_as_its_store(self):
        from workloads.pipelines.state_read import state_variables

        assert state_variables(self._op("stateStoreSave", None)) == [None]

    def test_a_variable_not_read_is_said(self, tmp_path):
        held = _held(state_check_logins(1))
        del held["seen"]
        outcome = state_check.Outcome()
        state_check._logins(tmp_path, _answer(tmp_path, 1, held), 0, 1, "final", LOGINS, LOGIN_TRUTH,
                            LOGIN_BATCHES, outcome)
        assert outcome.notes == ["not checked: seen after batch 1 was not read"]
