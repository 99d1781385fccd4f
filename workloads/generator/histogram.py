"""A log-bucketed histogram of non-negative microsecond values (HdrHistogram's idea, in numpy).

Bucket b >= 1 holds values in [2**((b-1)/8), 2**(b/8)) and bucket 0 the values below 1:
about 9% wide, so any percentile it reports (a bucket's upper edge) is at most 9% above
the true value, in constant memory whatever the count.
"""

from __future__ import annotations

import numpy as np

SUB = 8          # buckets per power of two
BUCKETS = 64 * SUB


class LogHistogram:
    def __init__(self):
        self.counts = np.zeros(BUCKETS + 1, dtype=np.int64)  # bucket 0: values < 1
        self.max = 0

    @staticmethod
    def bucket_of(values: np.ndarray) -> np.ndarray:
        v = np.maximum(np.asarray(values, dtype=np.float64), 0)
        b = np.zeros(len(v), dtype=np.int64)
        pos = v >= 1
        b[pos] = np.floor(np.log2(v[pos]) * SUB).astype(np.int64) + 1
        return np.minimum(b, BUCKETS)

    @staticmethod
    def upper(bucket: int) -> float:
        return 1.0 if bucket == 0 else 2 ** (bucket / SUB)

    def record(self, values: np.ndarray) -> None:
        if len(values):
            self.counts += np.bincount(self.bucket_of(values), minlength=BUCKETS + 1)
            # ceil, not int(): a truncated max would cap percentiles below fractional values
            self.max = max(self.max, int(np.ceil(np.max(values))))

    def merge(self, other: LogHistogram) -> None:
        self.counts += other.counts
        self.max = max(self.max, other.max)

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def percentile(self, q: float) -> float:
        """The upper edge of the bucket holding the q-th percentile (capped at the max seen)."""
        if not self.total:
            return float("nan")
        rank = np.ceil(q / 100 * self.total)
        bucket = int(np.searchsorted(np.cumsum(self.counts), max(rank, 1)))
        return min(self.upper(bucket), float(self.max))

    def to_dict(self, unit: str = "us") -> dict:
        nonzero = np.flatnonzero(self.counts)
        return {"unit": unit, "count": self.total, "max": self.max,
                **{f"p{q:g}": self.percentile(q) for q in (50, 90, 99, 99.9)},
                "buckets": [[self.upper(int(b)), int(self.counts[b])] for b in nonzero]}

    @classmethod
    def from_dict(cls, d: dict) -> LogHistogram:
        h = cls()
        for upper, count in d["buckets"]:
            b = 0 if upper <= 1 else int(round(np.log2(upper) * SUB))
            h.counts[b] += count
        h.max = d["max"]
        return h
