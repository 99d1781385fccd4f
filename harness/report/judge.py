"""How compare and the nightly history judge a figure: its name for what is judged, and
whether a change of it is larger than the noise.

The value judged is the registry's (`Figure.judged`, harness/results/figures.py): a count the
case's guarantee allows is not judged, and an at-most-once case's throughput is judged together
with what it lost. Restarting from the latest offsets, it skips what it lost and processes that
much less: on the seven real quick benches of results/history at 400 events/s offered, its
processed/s was within 3% of 400 x (1 - lost / expected) (293.4 events/s with 5,874 of 22,000
lost), and moved by 7.2% between runs (sd 2.3%) as the kills' timing made it lose more or less;
with what it skipped counted back (x expected / (expected - lost)), by 3.9% (sd 1.7%).

- `welch_p`: the two-sided p of Welch's t-test (pyperf's model, scipy's `ttest_ind`), for
  repeats on both sides;
- `beyond_p`: one value a side against a noise measured elsewhere (a history's, one run's).
"""

from __future__ import annotations

import math
import statistics
import warnings
from typing import Any

AT_MOST_ONCE = "at-most-once"


def judged_title(figure: Any, guarantee: str | None) -> str:
    """A chart's or a table's name for what is judged: "processed, with what it lost
    (events/s)" for an at-most-once case's throughput, the figure's title otherwise."""
    if figure.judged_as is not None and guarantee == AT_MOST_ONCE:
        return f"{figure.label}, with what it lost ({figure.unit})"
    return figure.title


# -- Welch's t-test ---------------------------------------------------------------------------
def welch_p(a: list[float], b: list[float]) -> float | None:
    """The two-sided p-value of Welch's t-test on the means of `a` and `b` (pyperf's model):
    `scipy.stats.ttest_ind(equal_var=False)`. None with fewer than two values on a side (the noise
    is unknown). Both sides without spread: scipy's p is nan (t is 0/0 or x/0); here it is 0 when
    the means differ (no noise at all, and a difference) and 1 when they do not, as a count that
    is 0 in every run (`lost`) must read "within the noise", not "cannot say"."""
    if len(a) < 2 or len(b) < 2:
        return None
    if statistics.variance(a) + statistics.variance(b) == 0:
        return 0.0 if statistics.fmean(a) != statistics.fmean(b) else 1.0
    from scipy.stats import ttest_ind

    with warnings.catch_warnings():
        # a side with no spread (a count 0 in every run) is exact, not the "catastrophic
        # cancellation" scipy warns of for nearly identical values
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(ttest_ind(a, b, equal_var=False).pvalue)


# -- one value a side, against a noise measured elsewhere --------------------------------------
def normal_p(z: float) -> float:
    """The two-sided p of a standard normal deviate `z`."""
    return math.erfc(abs(z) / math.sqrt(2.0))


def beyond_p(a: list[float], b: list[float], sd: float) -> float | None:
    """The two-sided p that the medians of `a` and `b` differ by noise alone, `sd` being the
    relative noise of ONE run (harness/history/noise.py `one_run`: a history's noise of one
    night, which is a median of its --repeat runs, taken back to one run): their relative
    difference over sd x sqrt(1/len(a) + 1/len(b)), a normal deviate, since the spread of a side
    of n runs is sd / sqrt(n). None without values or noise."""
    if not a or not b or not sd:
        return None
    ma, mb = statistics.median(a), statistics.median(b)
    if not ma:
        return None
    return normal_p((mb - ma) / abs(ma) / (sd * math.sqrt(1 / len(a) + 1 / len(b))))
