"""Change points in the speed figures of the history.

The method was chosen by measurement on planted histories built from real run noise
(benchmarks/changepoints.py; docs/results.md, "Nightly history"): PELT (Killick, Fearnhead and
Eckley, 2012) with an l2 cost, through `ruptures` (its KernelCPD with a linear kernel: the
same search in C), on each figure relative to its median, with
a penalty of PENALTY x sd^2 x ln(n), sd being the figure's relative noise measured on A/A nights
(harness/history/noise.py). A change is reported with the medians and ranges of the nights
before and after it (up to the previous and next change), its size, and what changed between
its two nights: the commits and the versions.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from harness.history.noise import Noise
from harness.history.store import Night, Series, moved_versions
from harness.results import figures

# calibrated on planted histories of real noise (benchmarks/changepoints.py, the quick bench's
# noise from ten two-core runs and the full baseline's repeats: throughput 1.3%, p99 9.1%), with
# levels of at least MIN_SIZE nights: 0.31 false alarms in 30 A/A nights of throughput and 0.26
# of p99 (a penalty of 1.5 made 0.69 and 0.60, and caught a 10% p99 step in 38% of histories
# where 2 catches it in 26%) ...
PENALTY = 2.0
# ... at which a step of 3.2 noise sd is caught within NEWEST nights in 95% of the histories
# (4% for the quick bench's throughput; 29% for its p99)
DETECTABLE_SDS = 3.2
# a change alarms once this many nights are past it: a single night off is an outlier as often
# as a step (one night of 3 sd made a false alarm in 40 A/A nights)
MIN_AFTER = 2
# a level lasts at least this many nights: one night off alone is never a level of its own
# (the real history of ten A/A quick benches, results/history, had a night 4 sd off in four
# figures at once, which a level of one night made four false alarms)
MIN_SIZE = 2
NEWEST = 3          # a change among the newest NEWEST nights is a change `check` alarms on
MIN_NIGHTS = 4      # fewer nights than this: no change point is looked for


@dataclass(frozen=True)
class Side:
    median: float
    low: float
    high: float
    nights: int


@dataclass(frozen=True)
class Change:
    series: Series
    figure: str
    night: int            # the index of the first night after the change
    before: Side
    after: Side
    worse: bool

    @property
    def size(self) -> float:
        """The change of the medians, as a share of the median before."""
        if not self.before.median:
            return math.inf
        return (self.after.median - self.before.median) / self.before.median

    @property
    def run(self) -> Night:
        return self.series.nights[self.night]

    @property
    def previous(self) -> Night:
        return self.series.nights[self.night - 1]

    def between(self) -> str:
        """The commits and the versions that changed between the two nights."""
        a, b = self.previous, self.run
        parts = [f"commits {_short(a.commit)}..{_short(b.commit)}" if a.commit != b.commit
                 else f"the same commit {_short(b.commit)}"]
        moved = [f"{k} {a.versions.get(k)} -> {b.versions.get(k)}"
                 for k in moved_versions(a.versions, b.versions)]
        return "; ".join(parts + moved)


def _short(sha: str | None) -> str:
    return (sha or "?")[:7]


def detect(values: list[float], sd: float) -> list[int]:
    """Indices where a new level starts (PELT, l2 cost, on the values relative to their median)."""
    import numpy as np
    import ruptures as rpt

    y = np.asarray(values, dtype=float)
    y = y / np.median(y) - 1
    pen = PENALTY * max(sd, 1e-4) ** 2 * math.log(len(y))
    # KernelCPD with a linear kernel is PELT with the l2 cost, in C: the same change points as
    # Pelt(model="l2"), 0.4 ms for 365 nights where Pelt's Python cost takes 110-260 ms
    search = rpt.KernelCPD(kernel="linear", min_size=MIN_SIZE, jump=1).fit(y)
    return [int(b) for b in search.predict(pen=pen) if b < len(y)]


def speed_changes(series: Series, noise: dict[str, Noise]) -> list[Change]:
    """Every change point of every compared figure of one series."""
    out: list[Change] = []
    for f in figures.shown_in(figures.COMPARE):
        if f.better is None or noise.get(f.name) is None or noise[f.name].sd is None:
            continue
        values = series.values(f.name)
        kept = [(i, v) for i, v in enumerate(values) if v is not None]
        if len(kept) < MIN_NIGHTS or not statistics.median(v for _, v in kept):
            continue
        sd = noise[f.name].sd
        assert sd is not None
        points = detect([v for _, v in kept], sd)
        edges = [0, *points, len(kept)]
        for k, p in enumerate(points):
            before = [v for _, v in kept[edges[k]:p]]
            after = [v for _, v in kept[p:edges[k + 2]]]
            b, a = _side(before), _side(after)
            worse = (a.median < b.median) if f.better == figures.HIGHER else (a.median > b.median)
            out.append(Change(series, f.name, kept[p][0], b, a, worse))
    return out


def _side(values: list[float]) -> Side:
    return Side(statistics.median(values), min(values), max(values), len(values))


def newest(change: Change) -> bool:
    """Whether `check` alarms on the change: among the series' newest NEWEST nights, with at
    least MIN_AFTER nights after it."""
    n = len(change.series.nights)
    return n - NEWEST <= change.night <= n - MIN_AFTER


def detectable(sd: float | None) -> float | None:
    """The smallest step caught within NEWEST nights in 95% of histories at this noise (a
    multiple of the noise sd, measured on planted histories: DETECTABLE_SDS)."""
    return None if sd is None else DETECTABLE_SDS * sd
