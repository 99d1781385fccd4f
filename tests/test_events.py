"""Deterministic event plans: ids, keys, delays, late share."""

from types import SimpleNamespace

import numpy as np
import pytest

from workloads.events import plan, zipf_weights


def _workload(**overrides):
    base = dict(rate_eps=1000, duration_s=5, keys=20, key_distribution="zipf", zipf_s=1.1,
                max_delay_ms=2000, late_share=0.0, late_by_ms=60000, seed=7)
    return SimpleNamespace(**{**base, **overrides})


class TestPlan:
    def test_the_same_seed_and_start_give_the_same_events(self):
        """Reproducible: nothing in the plan depends on the machine's speed."""
        a, b = plan(_workload(), 1_000_000), plan(_workload(), 1_000_000)
        assert (a.key == b.key).all() and (a.event_time_ms == b.event_time_ms).all()

    def test_ids_are_unique_and_dense(self):
        """Event ids run 0..n-1, one per event, n = rate x duration."""
        p = plan(_workload(), 0)
        assert list(p.event_id) == list(range(5000))

    def test_delays_are_bounded_and_event_time_never_follows_send_time(self):
        """Without a late share every delay lies in [0, max_delay]."""
        p = plan(_workload(), 10_000_000)
        delay = p.intended_ms - p.event_time_ms
        assert delay.min() >= 0 and delay.max() <= 2000

    def test_the_late_share_is_delayed_beyond_the_late_bound(self):
        """About late_share of the events are later than late_by, and they are marked."""
        p = plan(_workload(late_share=0.1, duration_s=20), 10_000_000)
        delay = p.intended_ms - p.event_time_ms
        assert (delay[p.late_by_design] >= 60000).all()
        assert p.late_by_design.mean() == pytest.approx(0.1, abs=0.01)

    def test_the_most_popular_zipf_key_gets_its_share(self):
        """Rank 1 of Zipf(1.1) over 20 keys carries about its theoretical probability."""
        p = plan(_workload(duration_s=50), 0)
        _, counts = np.unique(p.key, return_counts=True)
        assert counts.max() / len(p) == pytest.approx(zipf_weights(20, 1.1)[0], abs=0.01)
