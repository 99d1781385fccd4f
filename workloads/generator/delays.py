"""Out-of-orderness: how long after it "happened" each event is sent.

An event sent at t happened at t - delay (in event-time milliseconds). The delay comes
from one distribution, then a share `late_share` of events gets `late_by` added on top:
these are the events late by design, beyond any sane watermark. Heavy-tailed
distributions (lognormal, pareto) can make other events very late as well; only the
drawn share is marked late_by_design.

"groups" is Nexmark's out-of-order groups: the event times of each run of `group_size`
consecutive events are shuffled among themselves, so disorder stays within a group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DISTRIBUTIONS = ("none", "uniform", "exponential", "lognormal", "pareto", "groups")


@dataclass(frozen=True, kw_only=True)
class DelaySpec:
    distribution: str = "none"
    max_ms: int = 0            # uniform(0, max)
    mean_ms: float = 0.0       # exponential(mean)
    median_ms: float = 0.0     # lognormal: exp(mu) = median
    sigma: float = 1.0         # lognormal: the sd of log(delay)
    scale_ms: float = 0.0      # pareto (Lomax): scale * ((1 - u) ** (-1 / alpha) - 1)
    alpha: float = 1.5         # pareto tail index (smaller = heavier)
    group_size: int = 1        # groups
    late_share: float = 0.0
    late_by_ms: int = 60_000


def draw(spec: DelaySpec, rng: np.random.Generator, n: int) -> np.ndarray:
    """`n` delays in milliseconds (float) from the spec's distribution, without the late share."""
    d = spec.distribution
    if d in ("none", "groups"):
        return np.zeros(n)
    if d == "uniform":
        return rng.uniform(0, spec.max_ms, n)
    if d == "exponential":
        return rng.exponential(spec.mean_ms, n)
    if d == "lognormal":
        return rng.lognormal(np.log(spec.median_ms), spec.sigma, n)
    if d == "pareto":
        return spec.scale_ms * rng.pareto(spec.alpha, n)   # numpy's pareto is Lomax (starts at 0)
    raise ValueError(f"unknown delay distribution {d!r}")


def cdf(spec: DelaySpec, x: np.ndarray) -> np.ndarray:
    """P(delay <= x) of the spec's distribution (for goodness-of-fit checks)."""
    x = np.asarray(x, dtype=float)
    d = spec.distribution
    if d == "uniform":
        return np.clip(x / spec.max_ms, 0, 1)
    if d == "exponential":
        return 1 - np.exp(-np.clip(x, 0, None) / spec.mean_ms)
    if d == "lognormal":
        from math import erf, sqrt
        z = (np.log(np.clip(x, 1e-300, None)) - np.log(spec.median_ms)) / (spec.sigma * sqrt(2))
        return 0.5 * (1 + np.vectorize(erf)(z))
    if d == "pareto":
        return 1 - (1 + np.clip(x, 0, None) / spec.scale_ms) ** (-spec.alpha)
    raise ValueError(f"no closed-form CDF for delay distribution {d!r}")


def late_mask(spec: DelaySpec, rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.random(n) < spec.late_share


def shuffle_groups(values: np.ndarray, group_size: int, rng: np.random.Generator) -> np.ndarray:
    """`values` with each run of `group_size` consecutive entries permuted among themselves.

    len(values) must be a multiple of group_size (the planner's blocks are)."""
    if group_size <= 1:
        return values
    groups = values.reshape(-1, group_size)
    return rng.permuted(groups, axis=1).reshape(-1)
