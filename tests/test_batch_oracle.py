"""The batch oracle's pure parts: which records the stream read and which came late, the
comparison's mode from the plan, multiset comparison, and the rows set aside (the flush's,
and those a late record could have touched)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from harness.check import multiset
from harness.check.batch_oracle.job_input import EXACT, PARTIAL, WHOLE, Input, decide, ranges
from harness.check.batch_oracle.oracle import JobPipeline, flush_output, untouched
from harness.check.checkpoint import Batch

pytestmark = pytest.mark.unit

COLUMNS = {"user": "STRING", "start": "LONG", "clicks": "LONG", "avg": "DOUBLE"}


def _truth(times: list[int], partitions: int = 1) -> pd.DataFrame:
    n = len(times)
    return pd.DataFrame({"event_id": np.arange(n), "partition": np.arange(n) % partitions,
                         "offset": np.arange(n) // partitions, "event_time_ms": times,
                         "control": np.zeros(n, bool)})


class TestInput:
    def test_a_batch_run_again_reads_its_records_once(self):
        """Batch 1 planned twice (a restart re-ran it): each record in it counts once; an
        uncommitted batch's records are not read."""
        truth = _truth([1000] * 6)
        batches = [Batch(0, 0, {0: 2}, True, {0: 0}), Batch(1, 0, {0: 4}, True),
                   Batch(1, 0, {0: 4}, True), Batch(2, 0, {0: 6}, False)]
        given = Input.of(truth, batches, {"operators": []})
        assert given.read["offset"].tolist() == [0, 1, 2, 3] and given.ranges == [(0, 0, 4)]

    def test_late_is_at_or_below_the_previous_batch_s_watermark(self):
        """A record at or below the watermark of the batch before its own is late; the first
        batch filters with its own (0)."""
        truth = _truth([5000, 9000, 4000, 0, 4000, 8000])
        batches = [Batch(0, 0, {0: 2}, True, {0: 0}), Batch(1, 4000, {0: 4}, True),
                   Batch(2, 6000, {0: 6}, True)]
        given = Input.of(truth, batches, {"operators": ["dedupeWithinWatermark"]})
        assert given.late.tolist() == [False, False, False, True, True, False]
        assert given.mode == EXACT

    def test_ranges_are_runs_of_offsets_per_partition(self):
        """A gap in the offsets read (an at-most-once restart skipped some) splits a range."""
        read = pd.DataFrame({"partition": [0, 0, 0, 1, 1], "offset": [3, 4, 7, 0, 1]})
        assert ranges(read) == [(0, 3, 5), (0, 7, 8), (1, 0, 2)]

    @pytest.mark.parametrize("late, plan, mode", [
        (0, {"operators": ["aggregate"]}, WHOLE),
        (3, {"operators": []}, WHOLE),
        (3, {"operators": ["dedupe", "dedupeWithinWatermark"]}, EXACT),
        (3, {"operators": ["aggregate"]}, PARTIAL),
        (3, {"operators": ["dedupeWithinWatermark", "join"]}, PARTIAL),
        (3, None, PARTIAL),
    ])
    def test_the_mode_follows_the_late_records_and_the_operators(self, late, plan, mode):
        """Whole without late records or state; exact when the operators drop late records
        whole; partial otherwise (or without a plan)."""
        assert decide(late, plan)[0] == mode

    def test_the_flush_records_are_the_control_records_after_the_workload(self):
        """Control records with ids from the workload's count on are the flush; the warm-up's
        (negative ids) are the job's input like any record."""
        truth = _truth([1, 1, 5000, 5000, 90_000, 90_000])
        truth["control"] = [True, True, False, False, True, True]
        truth["event_id"] = [-2, -1, 0, 1, 2, 3]
        given = Input.of(truth, [Batch(0, 0, {0: 6}, True, {0: 0})], {"operators": []})
        assert given.flush_records["event_id"].tolist() == [2, 3]


class TestMultiset:
    def test_equal_multisets_compare_clean_with_doubles_rounded(self):
        """Doubles that differ in their last bits (another summation order) are equal."""
        e = pd.DataFrame({"user": ["a", "b"], "start": [1, 2], "clicks": [3, 4], "avg": [0.1 + 0.2, 1 / 3]})
        s = e.assign(avg=[0.3, 0.3333333333333333])
        found = multiset.compare(e, s, COLUMNS)
        assert (found.lost, found.duplicated, found.unexpected, found.delivered) == (0, 0, 0, 2)

    def test_doubles_an_ulp_apart_across_a_rounding_boundary_are_equal(self):
        """200,000 averages against the next double up: formatted to 12 digits, 12 pairs straddled
        a rounding boundary and read as 12 lost and 12 unexpected (a false FAIL); a real change in
        the value, or in another column, is still lost and unexpected."""
        rng = np.random.default_rng(3)
        avg = rng.random(200_000) * 1000
        e = pd.DataFrame({"user": [f"u{i}" for i in range(len(avg))], "start": 1, "clicks": 2, "avg": avg})
        s = e.assign(avg=np.nextafter(avg, np.inf))
        found = multiset.compare(e, s, COLUMNS)
        assert (found.lost, found.unexpected, found.delivered) == (0, 0, 200_000)
        wrong = s.copy()
        wrong.loc[0, "avg"] = wrong.loc[0, "avg"] * 1.001
        wrong.loc[1, "clicks"] = 7
        found = multiset.compare(e, wrong, COLUMNS)
        assert (found.lost, found.unexpected, found.delivered) == (2, 2, 199_998)
        assert sorted(found.lost_rows["user"]) == ["u0", "u1"] and len(found.extra_rows) == 2

    def test_lost_duplicated_and_unexpected_are_told_apart(self):
        """A missing row is lost; a second copy of an expected row duplicated; a row never
        expected unexpected; nulls equal nulls."""
        e = pd.DataFrame({"user": ["a", "b", "c"], "start": [1, 2, 3], "clicks": [1, 1, 1],
                          "avg": [None, 1.0, 2.0]})
        s = pd.DataFrame({"user": ["a", "a", "c", "d"], "start": [1, 1, 3, 4], "clicks": [1, 1, 1, 9],
                          "avg": [None, None, 2.0, 0.5], "batch_id": [1, 2, 2, 3]})
        found = multiset.compare(e, s, COLUMNS)
        assert (found.lost, found.duplicated, found.unexpected) == (1, 1, 1)
        assert found.lost_rows["user"].tolist() == ["b"]
        assert sorted(found.extra_rows["extra"]) == ["duplicated", "unexpected"]
        assert found.extra_rows.set_index("extra").loc["unexpected", "batch_id"] == 3


class TestSetAside:
    def test_the_flush_s_own_output_is_set_aside_in_the_sink(self):
        """A row the batch gives only with the flush's records is not unexpected in the sink."""
        expected = pd.DataFrame({"user": ["a"], "start": [1], "clicks": [2], "avg": [1.0]})
        with_flush = pd.concat([expected, pd.DataFrame({"user": ["__control__7"], "start": [9], "clicks": [1],
                                                        "avg": [-7.0]})])
        sink = with_flush.copy()
        assert flush_output(with_flush, expected, sink, COLUMNS).tolist() == [False, True]
        # a second copy of the flush's row in the sink is the sink's own duplicate, left to be
        # counted (every copy was set aside)
        twice = pd.concat([sink, sink.iloc[[1]]])
        assert flush_output(with_flush, expected, twice, COLUMNS).tolist() == [False, True, False]

    def test_rows_a_late_record_could_touch_are_left_out(self):
        """Rows that differ with and without the late records, the rows of their key, and rows of
        the late records' user are left out on both sides; the rest is compared."""
        everything = pd.DataFrame({"user": ["a", "b", "c"], "start": [1, 1, 1], "clicks": [3, 2, 5],
                                   "avg": [1.0, 1.0, 1.0]})
        without = everything.assign(clicks=[2, 2, 5])            # a's session lost a late click
        sink = pd.DataFrame({"user": ["a", "a", "b", "c"], "start": [1, 7, 1, 1], "clicks": [2, 1, 2, 5],
                             "avg": [1.0, 1.0, 1.0, 1.0]})       # the stream split a's session in two
        late = pd.DataFrame({"user": ["a"], "ts": [123]})
        keep_e, keep_s = untouched(everything, without, sink, COLUMNS, ["user", "start"], late)
        assert keep_e.tolist() == [False, True, True] and keep_s.tolist() == [False, False, True, True]


class TestFinalWatermark:
    def test_a_stateful_job_drains_an_hour_past_its_last_record(self, tmp_path):
        """A plan with a watermark and state: the drain waits for an hour past the last record."""
        (tmp_path / "plan.json").write_text(json.dumps({"watermarks": [{"column": "at", "delay_ms": 10}],
                                                        "operators": ["aggregate"]}))
        entry = JobPipeline(None).in_case(tmp_path)
        assert entry.final_watermark_ms(1000, None) == 1000 + 3_600_000 + 1

    def test_a_job_without_a_watermark_drains_by_offsets(self, tmp_path):
        """No watermark in the plan (a stateless enrichment): None, the offsets decide."""
        (tmp_path / "plan.json").write_text(json.dumps({"watermarks": [], "operators": []}))
        assert JobPipeline(None).in_case(tmp_path).final_watermark_ms(1000, None) is None

    MARK = [{"column": "ts", "delay_ms": 20_000}]

    @pytest.mark.parametrize(("stateful", "mode", "waits"), [
        # the false FAIL: a running count in Spark's state, NoTimeout, with a watermark
        ([{"operator": "applyInPandasWithState", "timeout": "NoTimeout"}], "update", False),
        ([{"operator": "applyInPandasWithState", "timeout": "EventTimeTimeout"}], "update", True),
        ([{"operator": "flatMapGroupsWithState", "timeout": "NoTimeout"}], "append", False),
        ([{"operator": "aggregate"}], "update", False),
        ([{"operator": "aggregate"}], "append", True),
        ([{"operator": "dedupeWithinWatermark"}], "append", False),
        ([{"operator": "dedupe"}, {"operator": "aggregate"}], "append", True),
        ([{"operator": "join"}], "append", True),
        ([{"operator": "transformWithState", "time_mode": "NoTime"}], "update", False),
        ([{"operator": "transformWithState", "time_mode": "EventTime"}], "update", True),
        ([], "append", False),   # a watermark and no state: nothing waits for it
    ])
    def test_the_drain_waits_for_the_watermark_only_where_an_output_does(self, tmp_path, stateful, mode,
                                                                         waits):
        """Update mode, NoTimeout state and dedup drain by offsets (once the input stops, Spark
        runs no further batch for them and the watermark stays); append-mode aggregates, joins
        and event-time timers by the watermark."""
        plan = {"watermarks": self.MARK, "operators": sorted({o["operator"] for o in stateful}),
                "stateful": stateful, "output_mode": mode}
        (tmp_path / "plan.json").write_text(json.dumps(plan))
        entry = JobPipeline(None).in_case(tmp_path)
        assert (entry.final_watermark_ms(1000, None) is not None) == waits
        assert (entry.drain_wait() is not None) == waits

    def test_a_plan_of_an_older_driver_keeps_waiting_for_the_watermark(self, tmp_path):
        """A plan.json without `stateful` (an older driver's): a state operator may have
        event-time timers, so the drain waits for the watermark as it did."""
        (tmp_path / "plan.json").write_text(json.dumps({"watermarks": self.MARK,
                                                        "operators": ["applyInPandasWithState"]}))
        assert JobPipeline(None).in_case(tmp_path).final_watermark_ms(1000, None) == 1000 + 3_600_000 + 1


class TestUntouchedAsMultisets:
    def test_a_late_record_that_only_changes_how_often_a_row_appears_touches_it(self):
        """With the late record the batch gives row r twice, without it once: r is touched (a
        set would call the two answers equal and compare r anyway)."""
        cols = {"user": "STRING", "clicks": "LONG"}
        r = {"user": "a", "clicks": 1}
        everything = pd.DataFrame([r, r, {"user": "b", "clicks": 2}])
        without = pd.DataFrame([r, {"user": "b", "clicks": 2}])
        sink = pd.DataFrame([r, {"user": "b", "clicks": 2}])
        keep_e, keep_s = untouched(everything, without, sink, cols, [], None)
        assert keep_e.tolist() == [False, False, True] and keep_s.tolist() == [False, True]


class TestLateRecordsOfStateWithoutTimeouts:
    @pytest.mark.parametrize(("timeout", "mode"), [("NoTimeout", WHOLE), ("EventTimeTimeout", PARTIAL)])
    def test_state_without_an_event_time_timeout_drops_no_late_record(self, timeout, mode):
        """applyInPandasWithState filters late rows only with EventTimeTimeout: with NoTimeout the
        comparison is whole, every record reached the function."""
        plan = {"operators": ["applyInPandasWithState"],
                "stateful": [{"operator": "applyInPandasWithState", "timeout": timeout}]}
        assert decide(3, plan)[0] == mode


class TestReference:
    COLS = {"user": "STRING", "start": "LONG", "clicks": "LONG"}

    def test_rows_of_late_keys_that_differ_are_tolerated_and_listed(self):
        """A key with a late record in either run may be decided differently: its differing rows
        are tolerated and listed (both sides); every other row is compared."""
        from harness.check.batch_oracle.reference import tolerance

        ref = pd.DataFrame({"user": ["a", "b", "c"], "start": [1, 1, 1], "clicks": [3, 2, 5]})
        run = pd.DataFrame({"user": ["a", "a", "b", "c"], "start": [1, 9, 1, 1], "clicks": [2, 1, 2, 4]})
        keep_e, keep_s, tolerated = tolerance(ref, run, self.COLS, "user", {"a"})
        assert keep_e.tolist() == [False, True, True] and keep_s.tolist() == [False, False, True, True]
        assert sorted(tolerated["side"]) == ["reference", "this run", "this run"]
        found = multiset.compare(ref[keep_e], run[keep_s], self.COLS)
        assert (found.lost, found.unexpected) == (1, 1)   # c differs, and no late record explains it

    def test_without_late_records_nothing_is_tolerated(self):
        """No late record in either run: the comparison is whole."""
        from harness.check.batch_oracle.reference import tolerance

        ref = pd.DataFrame({"user": ["a"], "start": [1], "clicks": [3]})
        keep_e, keep_s, tolerated = tolerance(ref, ref, self.COLS, "user", set())
        assert keep_e.all() and keep_s.all() and tolerated.empty

    def test_the_reference_run_is_the_case_without_faults_and_unjudged(self, tmp_path):
        """oracle = "reference" runs `<case>-reference` first: no faults, its oracle "none"."""
        from harness.run import reference_run
        from harness.scenario import load
        from tests.test_job import _scenario

        scenario = load(_scenario(tmp_path, 'build = "my_job:noisy"\noracle = "reference"'))
        seen = []
        reference_run.first(scenario, scenario.cases[0], lambda s, c: seen.append((s, c)))
        (quiet, spec), = seen
        assert spec.name == "eo-reference" and quiet.faults == () and spec.pipeline.oracle == "none"
        assert reference_run.first(load(_scenario(tmp_path)), scenario.cases[0], lambda s, c: 1) is None


    def test_a_comparison_that_left_every_row_out_is_unknown_not_a_pass(self):
        """A late record for every user of a groupBy(user) job: every expected row could be
        touched, so nothing is compared, and the empty comparison "held" (0 lost of 0 expected).
        Now the result says why it cannot decide, which the verdict makes UNKNOWN."""
        from harness.check.batch_oracle import job_result
        from harness.results import verdict as verdicts

        cols = {"user": "STRING", "clicks": "LONG"}
        none = pd.DataFrame({"user": pd.Series([], dtype=object), "clicks": pd.Series([], dtype="int64")})
        given = Input(pd.DataFrame({"event_time_ms": [1, 2]}), np.array([True, True]), [], PARTIAL,
                      "a late record could change an aggregate")
        result = job_result.of(multiset.compare(none, none, cols), given, cols, ["user"], left_out=7)
        assert result.counts["expected"] == 0 and result.counts["left_out"] == 7
        (why,) = result.unknowns
        assert "compared nothing: every one of the 7 expected rows" in why
        v = verdicts.verdict("exactly-once", 0, 0, 0, expected_count=0, unknowns=list(result.unknowns))
        assert v.status == "UNKNOWN" and not v.holds
        some = pd.DataFrame({"user": ["a"], "clicks": [3]})
        assert job_result.of(multiset.compare(some, some, cols), given, cols, ["user"], 7).unknowns == ()

    def test_a_reference_run_that_did_not_pass_makes_the_case_unknown(self):
        """The reference run's drain timed out (FAIL): its sink holds a prefix, so the case with
        faults, compared with it, read "N unexpected" and failed, blaming its faults. Now the
        case is UNKNOWN, names why, and keeps no finding drawn from that comparison; a case that
        failed on its own stays FAIL."""
        from harness.results.model import Finding, Verdict
        from harness.run import reference_run
        from tests.test_hunt_landed import _case

        reference = _case([])
        reference.name = "eo-reference"
        reference.verdict = Verdict("exactly-once", "exactly-once", False,
                                    "FAILED: the drain timed out after 180 s", "FAIL")
        case = _case([("kill-driver", True, None)], observed="at-least-once")
        case.verdict = Verdict("exactly-once", "at-least-once", False, "FAILED: 40 unexpected", "FAIL")
        case.findings = [Finding(cls="unexpected", count=40, witness=[], story="...")]
        reference_run.attach(case, reference)
        assert case.verdict.status == "UNKNOWN" and not case.findings
        said = case.verdict.detail
        assert "the reference run (eo-reference, the case without its faults) ended FAIL" in said
        assert case.sections["reference_run"]["status"] == "FAIL"

        case.error = "the driver died"
        case.verdict = Verdict("exactly-once", "at-least-once", False, "x", "FAIL")
        reference_run.attach(case, reference)
        assert case.verdict.status == "FAIL"

        passed = _case([])
        passed.verdict = Verdict("exactly-once", "exactly-once", True, "held", "PASS")
        case = _case([("kill-driver", True, None)])
        before = case.verdict
        reference_run.attach(case, passed)
        assert case.verdict is before


class TestBatchMeanings:
    def test_apply_in_pandas_with_state_runs_once_per_key_with_empty_state(self):
        """In the batch run, applyInPandasWithState's function gets each key's rows at once and
        a state that does not exist yet (Spark's batch meaning of flatMapGroupsWithState)."""
        from workloads.pipelines.job_batch import _once

        seen = []

        def func(key, frames, state):
            frames = list(frames)
            seen.append((key, len(frames), state.exists))
            yield pd.DataFrame({"user": [key[0]], "clicks": [sum(len(f) for f in frames)]})

        from pyspark.sql.types import LongType, StructField, StructType

        once = _once(func, StructType([StructField("n", LongType())]), "NoTimeout")
        out = once(("a",), pd.DataFrame({"ts": [1, 2, 3]}))
        assert out.to_dict("records") == [{"user": "a", "clicks": 3}]
        assert seen == [(("a",), 1, False)]
