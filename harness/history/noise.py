"""Each figure's noise in a series, calibrated, not assumed; `history check` says which
estimates it used.

Two estimates of the noise of one night's value, each a relative sd with its degrees of freedom:
- A/A nights: two nights of a series that ran the same clean commit differ by noise alone:
  sqrt(mean(d^2) / 2), d = (a - b) / mean(a, b) over every such pair (one degree of freedom a
  pair), pooled over the cases of one workload on one machine; a case noisier than the pool
  is judged by its own A/A pairs.
- the series itself, from its night-to-night differences: the same formula over consecutive
  nights (two thirds of a degree of freedom each, as neighbours share a night), robust to
  steps: the differences across a change point that a first estimate finds are left out. It
  sees what A/A nights run back to back miss (the runner's drift from night to night), and
  needs no A/A night: at least MIN_DIFFS differences.
Both, where both are there, are pooled (weighted by their degrees of freedom). Without either,
the spread of a night's --repeat runs is used (it misses the drift between nights); without
that, the noise is unknown and the figure's speed is not judged.

The estimate is then raised to the upper CONFIDENCE bound of the sd it could be (chi-square on
its degrees of freedom): from three A/A pairs or six nights an sd is often half the true one,
and a series judged against a noise it happened to understate raises false alarms (planted
histories: benchmarks/changepoints.py `across`, docs/results.md).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass

from harness.history.levels import detect
from harness.history.store import Night, Series

AA, NIGHTS, REPEATS, NONE = "A/A nights", "night-to-night differences", "repeats within a night", "none"
MIN_DIFFS = 5       # night-to-night differences (six nights) before the series' own estimate is used
CONFIDENCE = 0.8    # the sd judged by is the upper bound at this confidence of the one measured
_WHAT = {AA: "pairs of A/A nights", NIGHTS: "night-to-night differences", REPEATS: "runs of repeated nights"}


@dataclass(frozen=True)
class Estimate:
    source: str
    sd: float           # relative sd of one night's value, as measured
    samples: int        # A/A pairs, night-to-night differences, or runs of repeated nights
    df: float           # its degrees of freedom

    def text(self) -> str:
        return f"{self.sd:.1%} from {self.samples} {_WHAT[self.source]}"


@dataclass(frozen=True)
class Noise:
    figure: str
    sd: float | None                    # the relative sd of one night's value judged by
    estimates: tuple[Estimate, ...] = ()

    @property
    def source(self) -> str:
        return " and ".join(e.source for e in self.estimates) or NONE

    @property
    def samples(self) -> int:
        return sum(e.samples for e in self.estimates)

    def text(self) -> str:
        if self.sd is None:
            return (f"{self.figure}: noise unknown (no A/A nights, fewer than {MIN_DIFFS + 1} nights, "
                    "no repeats)")
        measured = "; ".join(e.text() for e in self.estimates)
        return f"{self.figure}: {self.sd:.1%} ({measured}; its {CONFIDENCE:.0%} upper bound)"


def aa_pairs(series: list[Series], figure: str) -> list[tuple[float, float]]:
    """The (a, b) values of `figure` of every two nights of a series that ran the same clean
    commit (consecutive ones, when a commit ran three times or more)."""
    out = []
    for s in series:
        by_commit: dict[str, list[Night]] = defaultdict(list)
        for night in s.nights:
            if night.commit and night.dirty is False:
                by_commit[night.commit].append(night)
        for nights in by_commit.values():
            for a, b in zip(nights, nights[1:], strict=False):
                x, y = a.value(figure), b.value(figure)
                if x is not None and y is not None and x + y > 0:
                    out.append((x, y))
    return out


def from_aa(series: list[Series], figure: str) -> Estimate | None:
    pairs = aa_pairs(series, figure)
    if not pairs:
        return None
    return Estimate(AA, _rms([(a - b) / ((a + b) / 2) for a, b in pairs]), len(pairs), len(pairs))


def from_nights(s: Series, figure: str) -> Estimate | None:
    """The series' own noise from its consecutive nights' relative differences, those across a
    change point left out; None with fewer than MIN_DIFFS differences."""
    values = [v for v in s.values(figure) if v is not None]
    d = [(b - a) / ((a + b) / 2) for a, b in zip(values, values[1:], strict=False) if a + b > 0]
    if len(d) < MIN_DIFFS:
        return None
    first = _rms(d)
    if first > 0:
        steps = set(detect(values, first))
        d = [x for i, x in enumerate(d) if i + 1 not in steps] or d
    return Estimate(NIGHTS, _rms(d), len(d), 2 * len(d) / 3)


def from_repeats(s: Series, figure: str) -> Estimate | None:
    residuals, df = [], 0
    for night in s.nights:
        r = _repeats(night, figure)
        residuals += r
        df += max(len(r) - 1, 0)
    if len(residuals) < 3:
        return None
    return Estimate(REPEATS, math.sqrt(statistics.fmean(r * r for r in residuals)), len(residuals), df)


def _repeats(night: Night, figure: str) -> list[float]:
    values = night.values(figure)
    if len(values) < 2 or not statistics.fmean(values):
        return []
    mean, k = statistics.fmean(values), len(values)
    return [(v / mean - 1) * math.sqrt(k / (k - 1)) for v in values]


def _rms(d: list[float]) -> float:
    """The sd of one night's value from relative differences of two nights' values."""
    return math.sqrt(statistics.fmean(x * x for x in d) / 2)


def upper(sd: float, df: float) -> float:
    """The upper CONFIDENCE bound of an sd measured as `sd` on `df` degrees of freedom."""
    from scipy.stats import chi2

    df = max(df, 1.0)
    return sd * math.sqrt(df / chi2.ppf(1 - CONFIDENCE, df))


def repeats(s: Series, figure: str) -> float | None:
    """How many runs a night of the series holds for `figure` (its --repeat count; the median
    over its nights with a value, as a series may mix a --repeat 3 night and a single run)."""
    counts = [len(n.values(figure)) for n in s.nights if n.values(figure)]
    return statistics.median(counts) if counts else None


def one_run(noise: Noise, per_night: float) -> float | None:
    """The relative sd of ONE run, from the noise `calibrate` gives for one night's value of a
    series whose nights hold `per_night` runs each; what `compare --history` judges its sides by.

    Why scaled: A/A nights and night-to-night differences measure the spread of a night's value,
    and a night's value is the median of its --repeat runs: with three runs a night it spreads
    less than one run by about sqrt(3), since the spread of a mean of n runs is sigma / sqrt(n).
    Taken as one run's spread, it judged a single run against a third less noise than it has and
    called noise a change. So one run's sigma is the night's sd x sqrt(per_night), and compare
    then divides it by the square root of each side's own count (harness/report/judge.py
    `beyond_p`). A night's value is a median, which spreads a little more than a mean (for three
    runs, about 1.16 times): sigma derived through sqrt(n) is then that much too large, which
    errs toward "within the noise", never toward a false regression; for a side of as many runs
    as a night it is exact. The REPEATS estimate measures one run's spread already (each run
    about its night's mean): it is kept as it is."""
    if noise.sd is None:
        return None
    if noise.estimates and all(e.source == REPEATS for e in noise.estimates):
        return noise.sd
    return noise.sd * math.sqrt(max(per_night, 1.0))


def calibrate(s: Series, pooled: Estimate | None, figure: str) -> Noise:
    """The noise `figure` of series `s` is judged by: A/A nights of its pool (`pooled`: the
    cases of its workload on its machine, `from_aa`; its own where wider) and its own
    night-to-night differences, pooled; else repeats within its nights; else unknown. Raised to
    its upper bound."""
    own = from_aa([s], figure)
    aa = own if own is not None and pooled is not None and own.sd > pooled.sd else pooled
    found = tuple(e for e in (aa, from_nights(s, figure)) if e is not None) or tuple(
        e for e in (from_repeats(s, figure),) if e is not None)
    df = sum(e.df for e in found)
    if not found or df <= 0:
        return Noise(figure, None)
    variance = sum(e.df * e.sd ** 2 for e in found) / df
    return Noise(figure, upper(math.sqrt(variance), df), found)
