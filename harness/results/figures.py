"""Every figure a case reports, registered once, as pyperf's `_metadata.py` registers its
metadata: its name, its label, its unit, how to read it from a CaseResult, how to print it,
and which way is better. The terminal table, report.html and compare all loop over FIGURES,
so adding a figure is one entry, and the three print the same value the same way.

    Figure("throughput", "processed/s", "events/s", lambda c: c.throughput, better=HIGHER)

A figure whose value is None was not measured: the table and the report print "-", and where
the case says why (`CaseResult.not_measured`), the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

HIGHER, LOWER = "higher", "lower"
TABLE, REPORT, COMPARE = "table", "report", "compare"
EVERYWHERE = frozenset({TABLE, REPORT, COMPARE})
PRINTED = frozenset({TABLE, REPORT})   # a count or a rate with no direction: printed, not compared


@dataclass(frozen=True)
class Figure:
    """One figure of a case."""

    name: str                         # its name in compare's rules ("p99:+10%") and in extra_info
    label: str                        # its column in the terminal table and report.html
    unit: str
    get: Callable[[Any], float | int | None]   # CaseResult -> its value (None: not measured)
    digits: int = 0                   # decimals printed
    better: str | None = LOWER        # HIGHER, LOWER, or None: no direction (not compared)
    shown: frozenset[str] = EVERYWHERE
    # the headline field a reason for its absence is filed under (CaseResult.not_measured)
    headline: str | None = None

    def value(self, case) -> float | int | None:
        return self.get(case)

    def text(self, value: float | int | None) -> str:
        """`value` as every renderer prints it: "1,234", "25.7", or "-" when not measured."""
        if value is None:
            return "-"
        return f"{value:,.{self.digits}f}"

    def cell(self, case) -> str:
        return self.text(self.value(case))

    def why_missing(self, case) -> str | None:
        """Why the case has no value of this figure, when it says (a figure never reads 0 for it)."""
        if self.value(case) is not None or self.headline is None:
            return None
        return case.not_measured(self.headline)


def _count(key: str) -> Callable[[Any], int | None]:
    return lambda c: c.events.get(key)


def _forbidden(key: str, allowed: str) -> Callable[[Any], int | None]:
    """A count that matters only where the case's guarantee forbids it (compare judges it there)."""
    return lambda c: c.events.get(key) if c.guarantee != allowed else None


FIGURES: tuple[Figure, ...] = (
    Figure("produced", "produced", "events", _count("produced"), better=None, shown=PRINTED),
    Figure("expected", "expected", "events", _count("expected"), better=None, shown=PRINTED),
    Figure("lost", "lost", "events", _count("lost")),
    Figure("duplicated", "dup", "events", _count("duplicated")),
    Figure("late", "late", "events", _count("dropped_late"), better=None, shown=PRINTED),
    Figure("offered", "offered/s", "events/s", lambda c: c.offered, better=None,
           shown=PRINTED),
    Figure("throughput", "processed/s", "events/s", lambda c: c.throughput, better=HIGHER,
           headline="throughput_eps"),
    Figure("p50", "ev-time p50 ms", "ms", lambda c: c.latency.p50, headline="p99_ms"),
    Figure("p99", "ev-time p99 ms", "ms", lambda c: c.latency.p99, headline="p99_ms"),
    Figure("processing_p99", "proc p99 ms", "ms", lambda c: c.latency_of("processing_time").p99,
           headline="p99_ms"),
    Figure("max_lag", "max lag", "records", lambda c: c.backpressure.get("max_lag_records")),
    Figure("batch_p50", "batch p50 ms", "ms", lambda c: c.batch_p50_ms),
    Figure("recovery", "recovery s", "s", lambda c: c.recovery_s, digits=1, headline="recovery_s"),
)

# compare judges lost and duplicated only where the guarantee forbids them: at-most-once may
# lose, at-least-once may duplicate
JUDGED = {"lost": _forbidden("lost", "at-most-once"), "duplicated": _forbidden("duplicated", "at-least-once")}


def shown_in(where: str) -> tuple[Figure, ...]:
    return tuple(f for f in FIGURES if where in f.shown)


def figure(name: str) -> Figure:
    """The figure `name` (a KeyError names an unknown one)."""
    for f in FIGURES:
        if f.name == name:
            return f
    raise KeyError(f"no figure {name!r} (figures: {', '.join(f.name for f in FIGURES)})")
