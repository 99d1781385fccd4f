"""Key choice: uniform, Zipf(s) over N keys, and a hot-key share on top of either.

Keys are ranks 0..count-1 (rank 0 the most popular under Zipf), named `k<rank>`
zero-padded to one width so that they sort by rank. The hot keys are ranks
0..hot_keys-1: a share `hot_share` of events goes to them uniformly, the rest follow
the distribution (Nexmark's hot-auction ratio, on any distribution).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, kw_only=True)
class KeySpec:
    distribution: str = "zipf"   # "zipf" or "uniform"
    count: int = 100
    zipf_s: float = 1.1
    hot_share: float = 0.0
    hot_keys: int = 1


DISTRIBUTIONS = ("zipf", "uniform")


def zipf_weights(count: int, s: float) -> np.ndarray:
    """P(rank k) proportional to 1 / k**s, k = 1..count."""
    weights = 1.0 / np.arange(1, count + 1, dtype=float) ** s
    return weights / weights.sum()


def probabilities(spec: KeySpec) -> np.ndarray:
    """The probability of each rank, hot share included: what the chooser draws from."""
    base = (zipf_weights(spec.count, spec.zipf_s) if spec.distribution == "zipf"
            else np.full(spec.count, 1.0 / spec.count))
    hot = np.zeros(spec.count)
    hot[:spec.hot_keys] = 1.0 / spec.hot_keys
    return (1 - spec.hot_share) * base + spec.hot_share * hot


class KeyChooser:
    """Draws key ranks with the spec's probabilities (inverse CDF: O(log N) per draw)."""

    def __init__(self, spec: KeySpec):
        self.spec = spec
        self.cdf = np.cumsum(probabilities(spec))
        self.cdf[-1] = 1.0
        width = len(str(spec.count - 1))
        self.names = np.array([f"k{i:0{width}d}" for i in range(spec.count)], dtype=object)

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.searchsorted(self.cdf, rng.random(n), side="right").astype(np.int64)
