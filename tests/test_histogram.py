"""The log-bucketed histogram of microsecond values."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from workloads.generator.histogram import SUB, LogHistogram

BUCKET_WIDTH = 2 ** (1 / SUB)   # one bucket spans a factor of 2**(1/8), about 9%


def _recorded(values) -> LogHistogram:
    h = LogHistogram()
    h.record(np.asarray(values))
    return h


def _sample(seed: int, n: int = 50_000) -> np.ndarray:
    """Latency-like integer microseconds over five decades."""
    return np.round(np.random.default_rng(seed).lognormal(np.log(5_000), 1.5, n)).astype(np.int64) + 1


class TestLogHistogram:
    @pytest.mark.parametrize("q", [1, 10, 50, 90, 99, 99.9, 100])
    def test_percentiles_are_within_one_bucket_above_numpy(self, q):
        """A percentile is never below numpy's and at most one bucket (~9%) above it."""
        values = _sample(1)
        got = _recorded(values).percentile(q)
        exact = float(np.percentile(values, q, method="inverted_cdf"))
        assert exact <= got <= exact * BUCKET_WIDTH, f"p{q}: {got:.1f} vs numpy {exact:.1f}"

    def test_percentiles_agree_with_numpy_default_interpolation(self):
        """Against numpy's default (linear) percentile the error is within one bucket either way."""
        values = _sample(2)
        h = _recorded(values)
        for q in (50, 75, 90, 95, 99):
            got, exact = h.percentile(q), float(np.percentile(values, q))
            assert abs(got / exact - 1) <= BUCKET_WIDTH - 1, f"p{q}: {got:.1f} vs numpy {exact:.1f}"

    def test_percentiles_are_capped_at_the_largest_value(self):
        """p100 is the largest value recorded, not the top of its bucket."""
        h = _recorded([10, 20, 1234])
        assert (h.percentile(100), h.max) == (1234.0, 1234)

    def test_bucket_edges_are_consistent_with_upper(self):
        """Every value lies below the upper edge of its bucket and at or above the previous edge."""
        values = np.unique(_sample(3))
        b = LogHistogram.bucket_of(values)
        upper = np.array([LogHistogram.upper(int(x)) for x in b])
        lower = np.array([0.0 if x == 0 else LogHistogram.upper(int(x) - 1) for x in b])
        assert np.all(values < upper), f"{int(np.sum(values >= upper))} values at or above their bucket"
        assert np.all(values >= lower * (1 - 1e-12)), f"{int(np.sum(values < lower))} below their bucket"

    def test_values_below_one_and_negative_values_land_in_bucket_zero(self):
        """Sub-microsecond and negative values (a send ahead of schedule) count in bucket 0."""
        h = _recorded([-5, 0, 0.5])
        assert (h.counts[0], h.total) == (3, 3), f"bucket 0 holds {h.counts[0]} of {h.total}"

    def test_an_empty_histogram_has_no_percentile(self):
        """With no values every percentile is NaN, not 0."""
        assert math.isnan(LogHistogram().percentile(50))

    def test_merge_equals_recording_everything_in_one(self):
        """Merging two histograms gives the counts and max of one that saw both samples."""
        a_values, b_values = _sample(4, 1000), _sample(5, 3000) * 3
        a, b = _recorded(a_values), _recorded(b_values)
        a.merge(b)
        both = _recorded(np.concatenate([a_values, b_values]))
        assert np.array_equal(a.counts, both.counts) and a.max == both.max
        assert a.total == 4000, f"total {a.total}"

    def test_dict_round_trip_keeps_counts_and_percentiles(self):
        """from_dict(to_dict()) through JSON gives back the same buckets, max and percentiles."""
        h = _recorded(np.concatenate([_sample(6, 5000), [0, 0]]))
        d = json.loads(json.dumps(h.to_dict()))
        back = LogHistogram.from_dict(d)
        assert np.array_equal(back.counts, h.counts) and back.max == h.max
        assert back.to_dict() == d
        assert d["count"] == 5002 and d["unit"] == "us"
        assert d["p99"] == h.percentile(99), f"p99 {d['p99']} vs {h.percentile(99)}"

    def test_fractional_values_are_not_under_reported(self):
        """With fractional microseconds the percentile still covers the value (the max is rounded up)."""
        h = _recorded([1.7, 1.8, 250.4])
        assert h.percentile(50) >= 1.8 and h.percentile(100) >= 250.4, f"p50 {h.percentile(50)}, p100 {h.max}"
