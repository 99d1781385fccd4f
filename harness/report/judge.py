"""How compare and the nightly history judge a figure: its name for what is judged, and
whether a change of it is larger than the noise.

The value judged is the registry's (`Figure.judged`, harness/results/figures.py): a count the
case's guarantee allows is not judged, and an at-most-once case's throughput is judged together
with what it lost. Restarting from the latest offsets, it skips what it lost and processes that
much less: on the seven real quick benches of results/history at 400 events/s offered, its
processed/s was within 3% of 400 x (1 - lost / expected) (293.4 events/s with 5,874 of 22,000
lost), and moved by 7.2% between runs (sd 2.3%) as the kills' timing made it lose more or less;
with what it skipped counted back (x expected / (expected - lost)), by 3.9% (sd 1.7%).

- `welch_p`: the two-sided p of Welch's t-test (pyperf's model), for repeats on both sides;
- `beyond_p`: one value a side against a noise measured elsewhere (a history's A/A nights).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

AT_MOST_ONCE = "at-most-once"


def judged_title(figure: Any, guarantee: str | None) -> str:
    """A chart's or a table's name for what is judged: "processed, with what it lost
    (events/s)" for an at-most-once case's throughput, the figure's title otherwise."""
    if figure.judged_as is not None and guarantee == AT_MOST_ONCE:
        return f"{figure.label}, with what it lost ({figure.unit})"
    return figure.title


# -- Welch's t-test ---------------------------------------------------------------------------
def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for aa in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                   -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x)
                     + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def welch_p(a: list[float], b: list[float]) -> float | None:
    """The two-sided p-value of Welch's t-test on the means of `a` and `b` (pyperf's model);
    None with fewer than two values on a side (the noise is unknown)."""
    if len(a) < 2 or len(b) < 2:
        return None
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return 0.0 if ma != mb else 1.0
    t = abs(ma - mb) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / ((va ** 2 / (len(a) - 1) if va else 0) + (vb ** 2 / (len(b) - 1) if vb else 0))
    return betainc(df / 2.0, 0.5, df / (df + t * t))


# -- one value a side, against a noise measured elsewhere --------------------------------------
def normal_p(z: float) -> float:
    """The two-sided p of a standard normal deviate `z`."""
    return math.erfc(abs(z) / math.sqrt(2.0))


def beyond_p(a: list[float], b: list[float], sd: float) -> float | None:
    """The two-sided p that the medians of `a` and `b` differ by noise alone, the relative noise
    of one value being `sd` (a history's A/A noise of one night): their relative difference over
    sd x sqrt(1/len(a) + 1/len(b)), a normal deviate. None without values or noise."""
    if not a or not b or not sd:
        return None
    ma, mb = statistics.median(a), statistics.median(b)
    if not ma:
        return None
    return normal_p((mb - ma) / abs(ma) / (sd * math.sqrt(1 / len(a) + 1 / len(b))))
