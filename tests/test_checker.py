"""Event-level accounting of a windowed-count sink against ground truth."""

import numpy as np
import pandas as pd
import pytest

from harness.check.checkpoint import Batch
from harness.check.windows import assign_windows, check, late_watermarks
from workloads.wire import CONTROL_KEY

pytestmark = pytest.mark.unit

W = 5000  # tumbling window size in ms
P = {"window_ms": W, "slide_ms": W}


def _truth(times, keys=None, partition=0):
    n = len(times)
    return pd.DataFrame({
        "event_id": np.arange(n), "key": keys or ["a"] * n, "event_time_ms": times,
        "amount": np.full(n, 2), "partition": partition, "offset": np.arange(n),
        "append_ms": np.full(n, 100_000), "control": False,
    })


def _with_control(truth, times):
    control = pd.DataFrame({"event_id": -1 - np.arange(len(times)), "key": CONTROL_KEY,
                            "event_time_ms": times, "amount": 0, "partition": 0, "offset": -1,
                            "append_ms": 100_000, "control": True})
    return pd.concat([truth, control], ignore_index=True)


def _sink(rows):
    cols = ["key", "window_start_ms", "window_end_ms", "count", "sum_amount", "committed_ms"]
    return pd.DataFrame(rows, columns=cols)


def _one_batch(n):
    """One batch that reads n events, then the no-data batch whose watermark closes every window."""
    return [Batch(0, 0, {0: n}, True), Batch(1, 10**12, {0: n}, True)]


class TestCheck:
    def test_an_exact_sink_has_nothing_lost_or_duplicated(self):
        """Two windows delivered once each with the right counts: 0 lost, 0 duplicated."""
        truth = _truth([100, 200, 5100])
        sink = _sink([("a", 0, 5000, 2, 4, 106_000), ("a", 5000, 10000, 1, 2, 111_000)])
        c = check(truth, sink, _one_batch(3), P).counts
        assert c == {"produced": 3, "expected": 3, "delivered": 3, "lost": 0, "duplicated": 0,
                     "unexpected": 0, "dropped_late": 0, "open": 0, "dropped_late_spark": 0}

    def test_a_missing_window_counts_its_events_as_lost(self):
        """A window that never reached the sink loses every event in it."""
        truth = _truth([100, 200, 5100])
        sink = _sink([("a", 5000, 10000, 1, 2, 111_000)])
        c = check(truth, sink, _one_batch(3), P).counts
        assert (c["lost"], c["delivered"]) == (2, 1)

    def test_a_window_written_twice_counts_its_events_as_duplicated(self):
        """A batch run again, written non-idempotently, shows every event of the window twice."""
        truth = _truth([100, 200])
        row = ("a", 0, 5000, 2, 4, 106_000)
        c = check(truth, _sink([row, row]), _one_batch(2), P).counts
        assert (c["lost"], c["duplicated"], c["delivered"]) == (0, 2, 4)

    def test_a_window_run_again_with_its_full_count_is_duplicated_not_lost(self):
        """At-least-once after a batch ran again: the window twice, each time complete."""
        truth = _truth([100, 200, 300])
        row = ("a", 0, 5000, 3, 6, 106_000)
        c = check(truth, _sink([row, row]), _one_batch(3), P).counts
        assert (c["lost"], c["duplicated"], c["unexpected"]) == (0, 3, 0)

    def test_partial_copies_after_a_stateless_restart_are_lost_not_duplicated(self):
        """At-most-once after a fresh-checkpoint restart: the window twice with partial counts
        (1 and 1 of 3) that sum to less than expected: 1 lost, nothing duplicated."""
        truth = _truth([100, 200, 300])
        sink = _sink([("a", 0, 5000, 1, 2, 106_000), ("a", 0, 5000, 1, 2, 109_000)])
        c = check(truth, sink, _one_batch(3), P).counts
        assert (c["lost"], c["duplicated"], c["unexpected"]) == (1, 0, 0)

    def test_a_full_copy_and_a_partial_one_are_duplicated_by_the_partial(self):
        """3 of 3, then 2 more: 2 effects beyond one full set."""
        truth = _truth([100, 200, 300])
        sink = _sink([("a", 0, 5000, 3, 6, 106_000), ("a", 0, 5000, 2, 4, 109_000)])
        c = check(truth, sink, _one_batch(3), P).counts
        assert (c["lost"], c["duplicated"], c["unexpected"]) == (0, 2, 0)

    def test_a_row_for_a_key_never_sent_is_unexpected(self):
        """A sink row that nobody sent (key `ghost`) is output ground truth cannot explain."""
        truth = _truth([100])
        sink = _sink([("a", 0, 5000, 1, 2, 106_000), ("ghost", 0, 5000, 1, 2, 106_000)])
        c = check(truth, sink, _one_batch(1), P).counts
        assert (c["unexpected"], c["lost"], c["delivered"]) == (1, 0, 2)

    def test_the_control_events_own_windows_are_set_aside(self):
        """The warm-up control event (event time 0) emits a __control__ row for window [0, 5s):
        that row, and only that, is not counted."""
        truth = _with_control(_truth([100]), [0])
        sink = _sink([("a", 0, 5000, 1, 2, 106_000), (CONTROL_KEY, 0, 5000, 1, 0, 106_000)])
        c = check(truth, sink, _one_batch(1), P).counts
        assert (c["unexpected"], c["delivered"]) == (0, 1)

    def test_a_control_key_row_in_a_window_no_control_event_fell_in_is_unexpected(self):
        """The rule is exact: a __control__ row for another window is not the harness's own."""
        truth = _with_control(_truth([100]), [0])
        sink = _sink([("a", 0, 5000, 1, 2, 106_000), (CONTROL_KEY, 5000, 10000, 1, 0, 111_000)])
        assert check(truth, sink, _one_batch(1), P).counts["unexpected"] == 1

    def test_a_count_above_ground_truth_is_unexpected(self):
        """A window that counts more events than were sent into it is unexplained output."""
        truth = _truth([100])
        c = check(truth, _sink([("a", 0, 5000, 3, 6, 106_000)]), _one_batch(1), P).counts
        assert c["unexpected"] == 2

    def test_a_wrong_sum_with_the_right_count_is_a_mismatch(self):
        """Counts can hide corruption; the sum of amounts must match too."""
        truth = _truth([100])
        result = check(truth, _sink([("a", 0, 5000, 1, 99, 106_000)]), _one_batch(1), P)
        assert result.problems == ["1 window has the right count but a wrong sum"]
        assert result.counts["lost"] == 0

    def test_events_read_after_the_watermark_passed_their_window_are_dropped_late(self):
        """An event in batch 2 whose window ended before batch 1's watermark is late, not lost."""
        truth = _truth([12_000, 13_000, 1_000])  # the last one arrives after the watermark moved
        batches = [Batch(0, 0, {0: 1}, True), Batch(1, 8_000, {0: 2}, True), Batch(2, 9_000, {0: 3}, True)]
        sink = _sink([("a", 10_000, 15_000, 2, 4, 120_000)])
        c = check(truth, sink, batches, P).counts
        assert (c["dropped_late"], c["expected"], c["lost"]) == (1, 2, 0)

    def test_latencies_are_measured_from_the_first_visible_copy(self):
        """Event-time latency = commit - window end; processing = commit - append time."""
        truth = _truth([100])
        result = check(truth, _sink([("a", 0, 5000, 1, 2, 106_000)]), _one_batch(1), P)
        assert list(result.event_time_latency_ms) == [101_000.0]
        assert list(result.processing_time_latency_ms) == [6_000.0]

    def test_karimovs_event_time_counts_from_the_newest_event_the_window_counted(self):
        """Two windows: [0, 5 s) with events at 100 ms and 3,000 ms, [5 s, 10 s) with one at
        6,500 ms; the late one (dropped by Spark) is not the window's newest."""
        truth = _truth([100, 3000, 6500, 4000])
        batches = [Batch(0, 0, {0: 3}, True), Batch(1, 9000, {0: 3}, True), Batch(2, 9000, {0: 4}, True),
                   Batch(3, 10**12, {0: 4}, True)]
        sink = _sink([("a", 0, 5000, 2, 4, 20_000), ("a", 5000, 10_000, 1, 2, 21_000)])
        result = check(truth, sink, batches, P)
        assert result.counts["dropped_late"] == 1 and result.counts["lost"] == 0
        assert sorted(result.event_time_newest_latency_ms) == [14_500.0, 17_000.0]
        assert sorted(result.event_time_latency_ms) == [11_000.0, 15_000.0]


class TestAssignWindows:
    @pytest.mark.parametrize("t, starts", [(0, [0]), (4999, [0]), (5000, [5000])])
    def test_tumbling_windows_are_left_closed_right_open(self, t, starts):
        """[0, 5s) holds 4999 ms but not 5000 ms."""
        pairs = assign_windows(_truth([t]), W, W)
        assert sorted(pairs["window_start_ms"]) == starts

    def test_a_sliding_window_copies_each_event_size_over_slide_times(self):
        """window 10 s sliding every 2 s: 5 windows per event, each containing it."""
        pairs = assign_windows(_truth([7_000]), 10_000, 2_000)
        assert sorted(pairs["window_start_ms"]) == [-2000, 0, 2000, 4000, 6000]
        assert ((pairs["window_start_ms"] <= 7000) & (pairs["window_end_ms"] > 7000)).all()


class TestLateWatermarks:
    def test_late_rows_are_filtered_with_the_previous_batch_watermark(self):
        """Spark >= 3.4 drops late rows with the previous batch's watermark."""
        batches = [Batch(0, 0, {}, True), Batch(1, 500, {}, True), Batch(2, 900, {}, True)]
        assert late_watermarks(batches) == {0: 0, 1: 0, 2: 500}
