"""Correctness as a series: a change is one night that differs from the night before it, in
the worse direction. Unlike speed, no noise is allowed for: a single flip is a change.

- the verdict: held, then failed; or the observed guarantee weaker (exactly-once, then
  at-least-once);
- lost, duplicated and unexpected: 0 the night before, above 0 now (a count that was above 0
  already, as an at-least-once case's duplicates, changes only when it becomes 0 and back);
- faults: every fault asked was seen the night before, and one is not now;
- a hunt's flake rate: up by more than 10 points.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.history.store import Night, Series

STRENGTH = {"exactly-once": 3, "at-least-once": 2, "at-most-once": 2, "none": 0}
COUNTS = ("lost", "duplicated", "unexpected")
FLAKE_POINTS = 0.10


@dataclass(frozen=True)
class Flip:
    """One correctness change: what, on which night (its index in the series), and from what."""

    series: Series
    night: int
    what: str           # verdict, guarantee, lost, duplicated, unexpected, faults, flake_rate
    before: str
    after: str

    @property
    def run(self) -> Night:
        return self.series.nights[self.night]

    def text(self) -> str:
        return f"{self.series.label}: {self.what} {self.before} -> {self.after}"


def flips(series: Series) -> list[Flip]:
    out: list[Flip] = []
    for i in range(1, len(series.nights)):
        out += _between(series, i, series.nights[i - 1], series.nights[i])
    return out


def _between(series: Series, i: int, a: Night, b: Night) -> list[Flip]:
    out = []
    if a.holds and not b.holds:
        out.append(Flip(series, i, "verdict", "PASS", "FAIL"))
    seen_a, seen_b = _observed(a), _observed(b)
    if STRENGTH.get(seen_b, 0) < STRENGTH.get(seen_a, 0) and seen_a != seen_b:
        out.append(Flip(series, i, "observed guarantee", seen_a, seen_b))
    for key in COUNTS:
        x, y = a.count(key), b.count(key)
        if x == 0 and y is not None and y > 0:
            out.append(Flip(series, i, key, "0", f"{y:,}"))
    asked_a, asked_b = _faults(a), _faults(b)
    if asked_a[0] and asked_a[0] == asked_a[1] and asked_b[1] < asked_b[0]:
        not_seen = sorted({k for e in b.entries for k in e.faults.get("not_seen", [])})
        out.append(Flip(series, i, "faults seen", f"{asked_a[1]}/{asked_a[0]}",
                        f"{asked_b[1]}/{asked_b[0]} (not seen: {', '.join(not_seen) or '?'})"))
    fa, fb = _flake(a), _flake(b)
    if fa is not None and fb is not None and fb - fa > FLAKE_POINTS:
        out.append(Flip(series, i, "hunt flake rate", f"{fa:.0%}", f"{fb:.0%}"))
    return out


def _observed(night: Night) -> str:
    """The weakest guarantee any of the night's runs of the case observed."""
    seen = [e.verdict.get("observed") or "none" for e in night.entries]
    return min(seen, key=lambda s: STRENGTH.get(s, 0))


def _faults(night: Night) -> tuple[int, int]:
    return (sum(int(e.faults.get("asked") or 0) for e in night.entries),
            sum(int(e.faults.get("seen") or 0) for e in night.entries))


def _flake(night: Night) -> float | None:
    rates = [e.flake_rate for e in night.entries if e.flake_rate is not None]
    return max(rates) if rates else None
