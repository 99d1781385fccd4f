"""Each figure's noise on the machine, calibrated, not assumed.

A/A: two nights of a series that ran the same commit (clean checkouts) differ by noise alone.
The relative noise of one night's value is sqrt(mean(d^2) / 2), d = (a - b) / mean(a, b) over
every such pair. Without A/A pairs, the spread of a night's --repeat runs about their mean is
used and said so; without either, the noise is unknown and `history check` says that no change
of that figure can be told from noise.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass

from harness.history.store import Series

AA, REPEATS, NONE = "A/A nights", "repeats within a night", "none"


@dataclass(frozen=True)
class Noise:
    figure: str
    sd: float | None      # relative standard deviation of one night's value
    samples: int          # A/A pairs, or runs of repeated nights
    source: str

    def text(self) -> str:
        if self.sd is None:
            return f"{self.figure}: noise unknown (no A/A nights nor repeats)"
        pairs = "pairs of " if self.source == AA else ""
        return f"{self.figure}: {self.sd:.1%} ({self.samples} {pairs}{self.source})"


def aa_pairs(series: list[Series]) -> dict[str, list[tuple[float, float]]]:
    """Per figure, the (a, b) values of every two nights of a series that ran the same clean commit
    (consecutive ones, when a commit ran three times or more)."""
    from harness.results import figures

    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for s in series:
        by_commit = defaultdict(list)
        for night in s.nights:
            if night.commit and night.dirty is False:
                by_commit[night.commit].append(night)
        for nights in by_commit.values():
            for a, b in zip(nights, nights[1:], strict=False):
                for f in figures.FIGURES:
                    x, y = a.value(f.name), b.value(f.name)
                    if x is not None and y is not None and x + y > 0:
                        out[f.name].append((x, y))
    return out


def calibrate(series: list[Series]) -> dict[str, Noise]:
    """Each figure's noise over the given series (one machine's), from A/A pairs, else repeats."""
    from harness.results import figures

    pairs = aa_pairs(series)
    out = {}
    for f in figures.FIGURES:
        got = pairs.get(f.name, [])
        if got:
            d = [(a - b) / ((a + b) / 2) for a, b in got]
            out[f.name] = Noise(f.name, math.sqrt(statistics.fmean(x * x for x in d) / 2), len(got), AA)
            continue
        residuals = [r for s in series for night in s.nights for r in _repeats(night, f.name)]
        sd = math.sqrt(statistics.fmean(r * r for r in residuals)) if len(residuals) >= 3 else None
        out[f.name] = (Noise(f.name, sd, len(residuals), REPEATS) if sd is not None
                       else Noise(f.name, None, 0, NONE))
    return out


def _repeats(night, figure: str) -> list[float]:
    values = [float(v) for v in (e.figures.get(figure) for e in night.entries) if v is not None]
    if len(values) < 2 or not statistics.fmean(values):
        return []
    mean, k = statistics.fmean(values), len(values)
    return [(v / mean - 1) * math.sqrt(k / (k - 1)) for v in values]


def wider(pooled: dict[str, Noise], own: dict[str, Noise]) -> dict[str, Noise]:
    """Per figure, the wider of a series' own A/A noise and its machine's pooled noise: a case
    noisier than the others (an at-most-once case's throughput moves with what it lost) is
    judged by its own, a quiet one never by less than the pool's."""
    out = dict(pooled)
    for name, n in own.items():
        base = pooled.get(name)
        if n.source == AA and n.sd is not None and (base is None or base.sd is None or n.sd > base.sd):
            out[name] = n
    return out

