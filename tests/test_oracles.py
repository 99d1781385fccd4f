"""The oracles of every pipeline against planted bugs, on small hand-made runs.

Each test builds ground truth and the checkpoint's batches by hand, takes the oracle's
own expected output as a perfect sink, checks that it passes, then plants one bug and
checks that it is caught as the right kind of discrepancy.
"""

import numpy as np
import pandas as pd
import pytest

from harness.check import dedup, passthrough, sessions, topn, watermark, windows
from harness.check.checkpoint import Batch
from workloads.wire import CONTROL_KEY

pytestmark = pytest.mark.unit


def _truth(times, keys, amounts=None, ids=None, partition=0):
    n = len(times)
    return pd.DataFrame({
        "event_id": np.arange(n) if ids is None else ids, "key": keys, "event_time_ms": times,
        "amount": np.full(n, 20) if amounts is None else amounts, "partition": partition,
        "offset": np.arange(n), "append_ms": np.full(n, 100_000), "control": False,
    })


def _batches(*cuts, final_wm=10**12):
    """Batches ending at each offset in `cuts` (watermark 0), then a no-data batch whose
    watermark closes everything."""
    out = [Batch(i, 0, {0: c}, True) for i, c in enumerate(cuts)]
    return out + [Batch(len(cuts), final_wm, {0: cuts[-1]}, True)]


def _committed(df, ms=106_000):
    return df.assign(committed_ms=ms, batch_id=0)


class TestPassthrough:
    truth = _truth([100, 200, 300, 400], ["a", "b", "a", "c"], amounts=[5, 20, 60, 30])

    def perfect(self):
        kept, _ = passthrough.expected(self.truth, _batches(4))
        return _committed(kept[["event_id", "key", "event_time_ms", "amount", "tier", "partition", "offset"]])

    def test_the_filter_and_the_enrichment_pass(self):
        r = passthrough.check(self.truth, self.perfect(), _batches(4), {})
        c = r.counts
        assert (c["lost"], c["duplicated"], c["unexpected"], c["filtered"]) == (0, 0, 0, 1)
        assert r.problems == [] and len(r.discrepancies) == 0

    def test_a_dropped_row_is_lost_and_named(self):
        r = passthrough.check(self.truth, self.perfect().iloc[1:], _batches(4), {})
        assert r.counts["lost"] == 1 and r.discrepancies.iloc[0]["item"] == "event_id 1"

    def test_a_batch_written_twice_is_duplicated(self):
        sink = self.perfect()
        r = passthrough.check(self.truth, pd.concat([sink, sink]), _batches(4), {})
        assert (r.counts["duplicated"], r.counts["lost"]) == (3, 0)

    def test_a_row_never_sent_is_unexpected(self):
        ghost = self.perfect().iloc[:1].assign(event_id=99)
        r = passthrough.check(self.truth, pd.concat([self.perfect(), ghost]), _batches(4), {})
        assert r.counts["unexpected"] == 1

    def test_a_wrong_enrichment_is_wrong(self):
        sink = self.perfect()
        sink.loc[sink.index[0], "tier"] = "high"
        r = passthrough.check(self.truth, sink, _batches(4), {})
        assert r.problems == ["1 event came out with wrong values"]
        assert list(r.discrepancies["kind"]) == ["wrong"]


SINK = ["key", "window_start_ms", "window_end_ms", "count", "sum_amount", "committed_ms"]


class TestTumblingWindowShifted:
    def test_a_window_shifted_by_1ms_is_lost_and_unexpected(self):
        truth = _truth([100, 200], ["a", "a"])
        sink = pd.DataFrame([("a", 1, 5001, 2, 40, 106_000)],
                            columns=SINK)
        r = windows.check(truth, sink, _batches(2), {"window_ms": 5000, "slide_ms": 5000})
        assert (r.counts["lost"], r.counts["unexpected"]) == (2, 2)
        assert sorted(r.discrepancies["kind"]) == ["lost", "unexpected"]

    def test_late_groups_are_counted_the_way_spark_counts_them(self):
        """Three late events of one key in one window of one batch are one row for Spark."""
        truth = _truth([12_000, 1_000, 1_100, 1_200, 6_000], ["a", "a", "a", "a", "b"])
        batches = [Batch(0, 0, {0: 1}, True), Batch(1, 8_000, {0: 1}, True), Batch(2, 8_000, {0: 5}, True),
                   Batch(3, 10**12, {0: 5}, True)]
        sink = pd.DataFrame([("a", 10_000, 15_000, 1, 20, 1), ("b", 5_000, 10_000, 1, 20, 1)],
                            columns=SINK)
        r = windows.check(truth, sink, batches, {"window_ms": 5000, "slide_ms": 5000})
        assert (r.counts["dropped_late"], r.counts["dropped_late_spark"], r.counts["lost"]) == (3, 1, 0)


class TestSessions:
    P = {"gap_ms": 1000}

    def test_sessions_merge_across_batches_and_touching_ones_join(self):
        # a: 0, 500 (batch 0) then 1500 (batch 1): one session [0, 2500); b: 0 and 1000 touch
        truth = _truth([0, 500, 0, 1500, 1000], ["a", "a", "b", "a", "b"])
        emitted, stored, late, _ = sessions.mirror(truth, _batches(3, 5), 1000)
        got = {(r.key, r.session_start_ms, r.session_end_ms, r.count) for r in emitted.itertuples()}
        assert got == {("a", 0, 2500, 3), ("b", 0, 2000, 2)} and stored.empty and late.empty

    def test_a_session_emitted_before_a_late_neighbour_is_not_reopened(self):
        """An event whose session would touch an emitted one, but is not late, starts a new one."""
        truth = _truth([0, 1500], ["a", "a"])
        batches = [Batch(0, 0, {0: 1}, True), Batch(1, 1000, {0: 1}, True), Batch(2, 1000, {0: 2}, True),
                   Batch(3, 10**12, {0: 2}, True)]
        emitted, _, late, _ = sessions.mirror(truth, batches, 1000)
        assert sorted(emitted["session_start_ms"]) == [0, 1500] and late.empty

    def test_a_perfect_sink_passes_and_a_wrong_sum_is_caught(self):
        truth = _truth([0, 500, 4000], ["a", "a", "a"])
        emitted, *_ = sessions.mirror(truth, _batches(3), 1000)
        sink = _committed(emitted.drop(columns="batch")).astype({"count": "int64", "sum_amount": "int64"})
        assert sessions.check(truth, sink, _batches(3), self.P).discrepancies.empty
        sink.loc[sink.index[0], "sum_amount"] = 1
        r = sessions.check(truth, sink, _batches(3), self.P)
        assert r.problems == ["1 row came out with wrong values"]

    def test_the_control_events_sessions_are_set_aside_but_only_theirs(self):
        truth = _truth([0, 500], ["a", CONTROL_KEY]).assign(control=[False, True])
        emitted, *_ = sessions.mirror(truth, _batches(2), 1000)
        sink = _committed(emitted.drop(columns="batch"))
        r = sessions.check(truth, sink, _batches(2), self.P)
        assert (r.counts["expected"], r.counts["unexpected"]) == (1, 0)


class TestDedup:
    def test_a_resent_copy_comes_out_once_and_a_second_row_is_duplicated(self):
        truth = _truth([100, 200, 100], ["a", "b", "a"], ids=[0, 1, 0])
        emitted, _ = dedup.mirror(truth, _batches(3), 1000)
        assert sorted(emitted["event_id"]) == [0, 1]
        sink = _committed(emitted[["event_id", "key", "event_time_ms", "amount"]])
        r = dedup.check(truth, sink, _batches(3), {"watermark_ms": 1000})
        assert (r.counts["lost"], r.counts["duplicated"], r.counts["resent"]) == (0, 0, 1)
        r = dedup.check(truth, pd.concat([sink, sink.iloc[:1]]), _batches(3), {"watermark_ms": 1000})
        assert r.counts["duplicated"] == 1

    def test_a_copy_arriving_after_the_watermark_is_late_not_output(self):
        truth = _truth([100, 5000, 100], ["a", "b", "a"], ids=[0, 1, 0])
        batches = [Batch(0, 0, {0: 2}, True), Batch(1, 4000, {0: 2}, True), Batch(2, 4000, {0: 3}, True)]
        emitted, late = dedup.mirror(truth, batches, 1000)
        assert sorted(emitted["event_id"]) == [0, 1] and late == 1


class TestTopN:
    def test_ties_rank_the_larger_key_first_and_only_n_are_kept(self):
        truth = _truth([100, 200, 300, 400, 500], ["a", "b", "b", "c", "c"])
        top, *_ = topn.ranking(truth, _batches(5), {"window_ms": 5000, "slide_ms": 5000, "n": 2})
        assert list(top[["key", "rank"]].itertuples(index=False, name=None)) == [("c", 1), ("b", 2)]

    def test_a_wrong_rank_is_caught(self):
        truth = _truth([100, 200, 300], ["a", "b", "b"])
        p = {"window_ms": 5000, "slide_ms": 5000, "n": 2}
        top, *_ = topn.ranking(truth, _batches(3), p)
        sink = _committed(top[["window_start_ms", "window_end_ms", "rank", "key", "count"]])
        assert topn.check(truth, sink, _batches(3), p).discrepancies.empty
        sink["key"] = sink["key"][::-1].to_numpy()
        assert topn.check(truth, sink, _batches(3), p).counts["lost"] == 0
        assert len(topn.check(truth, sink, _batches(3), p).problems) == 1


class TestWatermarkOracle:
    truth = _truth([1_000, 9_000, 5_000, 20_000], ["a"] * 4)

    def test_the_declared_watermark_passes(self):
        batches = [Batch(0, 0, {0: 2}, True), Batch(1, 8_000, {0: 4}, True), Batch(2, 19_000, {0: 4}, True)]
        assert watermark.check(self.truth, batches, 1_000) == []

    def test_a_watermark_tighter_than_declared_fails_with_both_values(self):
        batches = [Batch(0, 0, {0: 2}, True), Batch(1, 8_500, {0: 4}, True), Batch(2, 19_500, {0: 4}, True)]
        [problem] = watermark.check(self.truth, batches, 1_000)
        assert "batch 1 ran with 8,500 ms where the declared delay gives 8,000 ms" in problem

    def test_event_time_from_kafka_timestamps_fails(self):
        """The broker's append time is far ahead of the events' own time."""
        batches = [Batch(0, 0, {0: 2}, True), Batch(1, 99_000, {0: 4}, True), Batch(2, 99_500, {0: 4}, True)]
        [problem] = watermark.check(self.truth, batches, 1_000)
        assert "2 of 3 batches differ" in problem

    def test_a_fresh_checkpoint_starts_again_from_zero(self):
        batches = [Batch(0, 0, {0: 2}, True), Batch(1, 8_000, {0: 2}, True, query=0),
                   Batch(1_000_000, 0, {0: 4}, True, {0: 2}, query=1),
                   Batch(1_000_001, 19_000, {0: 4}, True, query=1)]
        assert watermark.check(self.truth, batches, 1_000) == []


class TestFailedLogins:
    def test_the_scan_raises_on_attempts_within_the_bound_and_consumes_them(self):
        from workloads.pipelines.failed_logins import alerts

        found, kept = alerts([(0, 1), (500, 2), (900, 3), (950, 4), (5000, 5)], 3, 1000)
        assert found == [(0, 900, 3)] and kept == [(950, 4), (5000, 5)]
        found, kept = alerts([(0, 1), (1000, 2), (1500, 3)], 3, 1000)
        assert found == [] and kept == [(0, 1), (1000, 2), (1500, 3)]

    def test_failures_across_batches_and_a_resent_copy(self):
        from harness.check import logins

        times = [100, 300, 300, 600, 10_000]
        truth = _truth(times, ["a"] * 5, ids=[0, 1, 1, 2, 3]).assign(
            user=[7] * 5, event_type=["login-failed"] * 5)
        emitted, late, _ = logins.mirror(truth, _batches(2, 5), 3, 1000)
        assert list(emitted.itertuples(index=False, name=None)) == [(7, 1, 100, 600, 3, 1)] and late.empty
        sink = _committed(emitted.drop(columns="batch"))
        r = logins.check(truth, sink, _batches(2, 5), {"attempts": 3, "within_ms": 1000})
        assert r.discrepancies.empty and r.counts["expected"] == 1


class TestOrderPaymentJoin:
    def test_pairs_within_the_bound_and_unpaid_orders_with_nulls(self):
        from harness.check import join

        truth = _truth([1_000, 1_500, 9_000, 1_200, 20_000], ["k"] * 5).assign(
            user=[1, 1, 1, 2, 2], event_type=["order", "payment", "payment", "order", "payment"])
        # one source per side, both reading every offset in the same batches
        both = [Batch(0, 0, {0: 5}, True, {}, 0, ({0: 5}, {0: 5}), ({}, {})),
                Batch(1, 10**12, {0: 5}, True, None, 0, ({0: 5}, {0: 5}), ({0: 5}, {0: 5}))]
        want, _, late = join.expected(truth, both, 5_000)
        got = {tuple(r) for r in want.itertuples(index=False, name=None)}
        assert got == {(0, 1, 1_000, 1, 1_500), (3, 2, 1_200, -1, -1)} and late == 0
        sink = _committed(want.replace(-1, pd.NA).astype("Int64"))
        r = join.check(truth, sink, both, {"bound_ms": 5_000})
        assert r.discrepancies.empty and r.counts["expected"] == 2
