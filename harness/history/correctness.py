"""Correctness as a series, one per case on every machine (no machine excuses a lost event).
Unlike speed, no noise is allowed for, and no night is too early: the first night of a series
is judged like any other.

What a night is, on its own:
- its verdict FAIL (the declared guarantee did not hold, or the case had a problem), with the
  counts the guarantee forbids (lost, duplicated, unexpected above 0);
- its verdict UNKNOWN: the case could not be decided (a noop sink, a read or an oracle that
  raised, a fault that never came); never a pass, and `check` says "cannot judge".
What a night is against the night before it:
- the observed guarantee weaker (exactly-once, then at-least-once), though the verdict held;
- a count its guarantee allows (at-least-once's duplicates, at-most-once's losses) 0 the night
  before, above 0 now (one above 0 already changes only when it becomes 0 and back);
- faults: every fault asked was seen the night before, and one is not now;
- a hunt's flake rate: up by more than 10 points.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.history.store import Night, Series
from harness.results.verdict import FAIL, PASS, UNKNOWN

STRENGTH = {"exactly-once": 3, "at-least-once": 2, "at-most-once": 2, "none": 0}
COUNTS = ("lost", "duplicated", "unexpected")
# the count each guarantee allows above 0
ALLOWED = {"at-most-once": {"lost"}, "at-least-once": {"duplicated"}}
FLAKE_POINTS = 0.10


@dataclass(frozen=True)
class Flip:
    """One correctness finding on one night (its index in the series): what, and from what."""

    series: Series
    night: int
    what: str           # verdict, observed guarantee, lost, duplicated, unexpected, faults seen, ...
    before: str
    after: str
    unknown: bool = False   # a night that cannot be judged (UNKNOWN), not one that failed

    @property
    def run(self) -> Night:
        return self.series.nights[self.night]

    @property
    def fail(self) -> bool:
        return self.what == "verdict" and not self.unknown

    def text(self) -> str:
        return f"{self.series.label}: {self.what} {self.before} -> {self.after}"


def flips(series: Series) -> list[Flip]:
    """Every finding of every night of the series, the first night included."""
    out: list[Flip] = []
    for i, night in enumerate(series.nights):
        before = series.nights[i - 1] if i else None
        out += _alone(series, i, night, before)
        if before is not None:
            out += _between(series, i, before, night)
    return out


def _alone(series: Series, i: int, night: Night, before: Night | None) -> list[Flip]:
    was = before.status if before is not None else "first night of the series"
    if night.status == FAIL:
        return [Flip(series, i, "verdict", was, f"FAIL{_forbidden(night)}: {_detail(night, FAIL)}")]
    if night.status == UNKNOWN:
        return [Flip(series, i, "verdict", was, f"UNKNOWN: {_detail(night, UNKNOWN)}", unknown=True)]
    forbidden = _forbidden(night)
    if not forbidden:
        return []
    return [Flip(series, i, "verdict", was, f"PASS{forbidden}, counts its guarantee forbids")]


def _forbidden(night: Night) -> str:
    """" (603 duplicated)": the counts above 0 that the night's guarantee forbids."""
    allowed = ALLOWED.get(night.expected, set())
    counts = [f"{n:,} {k}" for k in COUNTS if k not in allowed and (n := night.count(k))]
    return f" ({', '.join(counts)})" if counts else ""


def _detail(night: Night, status: str) -> str:
    details = [(f"the run ({e.run_id}) ended {e.status} before all its cases had run"
                if e.passed_in_a_run_cut_short else
                str(e.verdict.get("detail") or "")) for e in night.entries if e.verdict_status == status]
    return next((d for d in details if d), f"{night.expected} {status.lower()}")[:200]


def _between(series: Series, i: int, a: Night, b: Night) -> list[Flip]:
    """What got worse since the night before, on a night that passed (a FAIL or an UNKNOWN is
    reported as such, once)."""
    if b.status != PASS:
        return []
    out = []
    seen_a, seen_b = _observed(a), _observed(b)
    if STRENGTH.get(seen_b, 0) < STRENGTH.get(seen_a, 0) and seen_a != seen_b:
        out.append(Flip(series, i, "observed guarantee", seen_a, seen_b))
    for key in ALLOWED.get(b.expected, set()):   # a count it forbids is a FAIL, reported alone
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
