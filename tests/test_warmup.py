"""When the warm-up ends (its batch times settled) and what is then measured: the one rule the
run's progress anchors and the measured window share (harness/metrics/warmup.py, window.py)."""

from __future__ import annotations

import pytest

from harness.check.checkpoint import Batch
from harness.metrics import window as measured_window
from harness.metrics.warmup import Done, warm

pytestmark = pytest.mark.unit


def _done(durations_ms: list[float], start_ms: float = 0.0, gap_ms: float = 100.0) -> list[Done]:
    """Batches one after the other, each `gap_ms` after the last ended."""
    out, at = [], start_ms
    for k, d in enumerate(durations_ms):
        out.append(Done(0, k, at, at + d, 100))
        at += d + gap_ms
    return out


class TestWarm:
    def test_the_warm_up_ends_when_three_batches_agree_and_stopped_getting_faster(self):
        """One core's first batches (6.0, 3.9, 8.4, 5.8 s), which agree among themselves, and then
        ~1 s: warm once three steady batches follow three that were no slower, not at the third
        cold one (the rule without the comparison called 6.0, 3.9, 8.4 s settled)."""
        done = _done([6000, 3900, 8400, 5800, 1100, 960, 850, 900, 880])
        w = warm(done, since_ms=0, limit_ms=1e9)
        assert w is not None and w.settled and w.at_ms == done[8].committed_ms, w
        assert "batches 6 to 8 (0.8, 0.9, 0.9 s)" in w.why, w.why

    def test_never_before_the_declared_warm_up(self):
        """Settled from the start, warm at `[measure] warmup` all the same."""
        done = _done([900, 950, 1000, 980, 990, 970, 960])
        assert warm(done, since_ms=7500, limit_ms=1e9).at_ms == 7500

    def test_a_query_that_never_settles_ends_its_warm_up_at_the_limit_and_says_so(self):
        """Batch times that keep growing (a query falling behind): the limit, not settled."""
        done = _done([1000, 2000, 4000, 8000, 16000])
        w = warm(done, since_ms=0, limit_ms=20_000)
        assert not w.settled and w.at_ms == 20_000 and "had not settled" in w.why, w

    def test_it_is_not_known_while_the_query_is_still_cold(self):
        """Before the limit, with no three agreeing batches yet: not known (None), so a fault
        anchored at it waits."""
        assert warm(_done([6000, 3900]), since_ms=0, limit_ms=60_000, now_ms=10_000) is None


class TestWindow:
    def _batches(self, commits_ms: list[float]) -> list[Batch]:
        return [Batch(k, 0, {0: (k + 1) * 10}, True, {0: k * 10}, committed_ms=int(c),
                      planned_ms=int(c - 500)) for k, c in enumerate(commits_ms)]

    def test_a_window_with_fewer_than_three_batches_measures_nothing_from_them(self):
        """Six steady batches warm it at 3.1 s; then the driver was down until after the last
        event at 26 s: two batches in the window, so its throughput is no figure, with why."""
        w = measured_window.of(self._batches([600, 1100, 1600, 2100, 2600, 3100, 3600, 25_000]), 0.0, 0.0,
                               26.0, 26_000)
        assert w.batches == 2
        assert w.too_few_batches == ("2 batches with input committed in the measured window [4 s, 26 s): "
                                     "fewer than 3")

    def test_enough_batches_are_measured(self):
        commits = [600 + 500 * k for k in range(30)]
        w = measured_window.of(self._batches(commits), 0.0, 0.0, 16.0, 15_500)
        assert w.too_few_batches is None and w.to_json()["settled"]
