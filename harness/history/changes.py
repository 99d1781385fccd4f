"""Change points in the speed figures of the history.

The method was chosen by measurement on planted histories built from real run noise
(benchmarks/changepoints.py; docs/results.md, "Nightly history"): PELT with an l2 cost on
each figure relative to its median, judged against the figure's relative noise
(harness/history/levels.py, harness/history/noise.py).

A change point sits at the first night at the new level (levels.place). A change is reported
with the medians and ranges of the nights before and after it (up to the neighbouring
changes), its size, and what changed from the last night before it to the first night at the
new level: the commits, the versions, the machine. It alarms once MIN_AFTER nights are at the new level.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from harness.history.levels import detect
from harness.history.noise import Noise
from harness.history.store import Night, Series, moved_versions
from harness.results import figures
from harness.results.machine import differences

# at levels.PENALTY, a step of DETECTABLE_SDS noise sd is caught within NEWEST nights in 95% of
# the histories of one figure whose noise is known (`calibrate`)
DETECTABLE_SDS = 3.3
# a change alarms once this many nights are at its new level (the night of the change and the
# one after it): a single night off is an outlier as often as a step (one night of 3 sd made a
# false alarm in 40 A/A nights)
MIN_AFTER = 2
NEWEST = 3          # a change among the newest NEWEST nights is a change `check` alarms on
# fewer nights than this in a series: its speed is not judged yet (a new machine's first nights
# never alarm; 4 made 0.82 false alarms in 30 nights where 6 makes 0.62)
MIN_NIGHTS = 6


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
    night: int            # the index of the first night at the new level
    before: Side
    after: Side
    worse: bool
    noise: Noise | None = None

    @property
    def size(self) -> float:
        """The change of the medians, as a share of the median before."""
        if not self.before.median:
            return math.inf
        return (self.after.median - self.before.median) / self.before.median

    @property
    def run(self) -> Night:
        """The first night at the new level."""
        return self.series.nights[self.night]

    @property
    def previous(self) -> Night:
        """The last night before the change."""
        return self.series.nights[self.night - 1]

    @property
    def settled(self) -> bool:
        """Whether enough nights are at the new level to alarm (MIN_AFTER)."""
        return self.after.nights >= MIN_AFTER

    @property
    def newest(self) -> bool:
        """Among the series' newest NEWEST nights."""
        return self.night >= len(self.series.nights) - NEWEST

    @property
    def alarm(self) -> bool:
        """What `check` alarms on: a change for the worse among the newest nights, settled."""
        return self.worse and self.newest and self.settled

    def between(self) -> str:
        """What changed from the last night before it to the first night at the new level: the
        commits, the versions, the machine."""
        a, b = self.previous, self.run
        parts = [f"commits {_short(a.commit)}..{_short(b.commit)}" if a.commit != b.commit
                 else f"the same commit {_short(b.commit)}"]
        parts += [f"{k} {a.versions.get(k)} -> {b.versions.get(k)}"
                  for k in moved_versions(a.versions, b.versions)]
        parts += [f"machine: {d}" for d in differences(a.on, b.on)]
        return "; ".join(parts)


def _short(sha: str | None) -> str:
    return (sha or "?")[:7]


def speed_changes(series: Series, noise: dict[str, Noise]) -> list[Change]:
    """Every change point of every figure the series judges (harness/history/store.py)."""
    out: list[Change] = []
    for f in figures.compared():
        told = noise.get(f.name)
        if not series.judges(f) or told is None or told.sd is None:
            continue
        kept = [(i, v) for i, v in enumerate(series.values(f.name)) if v is not None]
        if len(kept) < MIN_NIGHTS or not statistics.median(v for _, v in kept):
            continue
        points = detect([v for _, v in kept], told.sd)
        edges = [0, *points, len(kept)]
        for k, p in enumerate(points):
            b = _side([v for _, v in kept[edges[k]:p]])
            a = _side([v for _, v in kept[p:edges[k + 2]]])
            worse = (a.median < b.median) if f.better == figures.HIGHER else (a.median > b.median)
            out.append(Change(series, f.name, kept[p][0], b, a, worse, told))
    return out


def _side(values: list[float]) -> Side:
    return Side(statistics.median(values), min(values), max(values), len(values))


def detectable(sd: float | None) -> float | None:
    """The smallest step caught within NEWEST nights in 95% of histories at this noise (a
    multiple of the noise sd, measured on planted histories: DETECTABLE_SDS)."""
    return None if sd is None else DETECTABLE_SDS * sd
