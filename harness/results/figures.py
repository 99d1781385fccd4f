"""Every figure a case reports, registered once, as pyperf's `_metadata.py` registers its
metadata: its name, its label, its unit, how to read it from a CaseResult, how to print it,
which way is better, where a count is not judged, and whether it compares across machines.
The terminal table, report.html, compare, the nightly history, the pytest plugin's
`extra_info` and summary.json's `headline` all read FIGURES, so adding a figure is one entry,
and each prints the same value the same way.

    Figure("p99", "ev-time p99", "ms", lambda c: c.latency.p99)

- `name` is the figure's one key: compare's rules ("p99:+10%"), the history's series, and the
  pytest plugin's `extra_info` (`<case>.<name>`);
- `label` names it without its unit ("ev-time p99"), `unit` is the unit ("ms");
- `title` is how a chart names it, "ev-time p99 (ms)", and `column` how a table heads its
  column, label and unit once, "ev-time p99 ms" (a count of events is headed by its label);
- `text(v)` prints a value: "1,234", "25.7", or "-" when it was not measured.

A figure whose value is None was not measured: every renderer prints "-", and where the case
says why (`why_missing`), the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

HIGHER, LOWER = "higher", "lower"
TABLE, REPORT, COMPARE = "table", "report", "compare"
EVERYWHERE = frozenset({TABLE, REPORT, COMPARE})
PRINTED = frozenset({TABLE, REPORT})   # a count or a rate with no direction: printed, not compared
NOT_TERMINAL = frozenset({REPORT, COMPARE})   # a ratio: report.html, compare, the history; not the terminal
NOWHERE: frozenset[str] = frozenset()   # named for a chart's series, in no table


@dataclass(frozen=True)
class Figure:
    """One figure of a case."""

    name: str                         # its key: compare's rules, the history, extra_info
    label: str                        # what it is, without its unit
    unit: str
    get: Callable[[Any], float | int | None]   # CaseResult -> its value (None: not measured)
    digits: int = 0                   # decimals printed
    better: str | None = LOWER        # HIGHER, LOWER, or None: no direction (not compared)
    shown: frozenset[str] = EVERYWHERE
    # the headline field a reason for its absence is filed under (CaseResult.not_measured)
    headline: str | None = None
    heading: str | None = None        # the column's heading, when not "<label> <unit>"
    travels: bool = False             # may be compared across machines (not an absolute time or rate)
    allowed_under: str | None = None  # the guarantee that allows this count: not judged there
    why: Callable[[Any], str | None] | None = None   # why it has no value, its own rule
    # the value judged, from the value, the guarantee and the event counts, when not the value
    judged_as: Callable[[float, str | None, dict], float] | None = None

    @property
    def title(self) -> str:
        """A chart's name for it: "ev-time p99 (ms)"."""
        return f"{self.label} ({self.unit})"

    @property
    def column(self) -> str:
        """A table's heading for it, label and unit once: "ev-time p99 ms"."""
        return self.heading or f"{self.label} {self.unit}"

    def value(self, case) -> float | int | None:
        return self.get(case)

    def text(self, value: float | int | None) -> str:
        """`value` as every renderer prints it: "1,234", "25.7", or "-" when not measured."""
        if value is None:
            return "-"
        return f"{value:,.{self.digits}f}"

    def cell(self, case) -> str:
        return self.text(self.value(case))

    def judged_under(self, guarantee: str | None) -> bool:
        """Whether a case of `guarantee` is judged on this figure: lost is not where at-most-once
        allows losing, nor duplicated where at-least-once allows duplicates (compare and the
        history apply this one rule)."""
        return self.allowed_under is None or guarantee != self.allowed_under

    def judged(self, case) -> float | int | None:
        """The value compare and the history judge: None where the case's guarantee allows it."""
        return self.judged_value(self.value(case), case.guarantee, case.events)

    def judged_value(self, value: float | int | None, guarantee: str | None,
                     events: dict) -> float | int | None:
        """`judged` from a value read elsewhere (a history entry keeps the value, the guarantee
        and the counts)."""
        if value is None or not self.judged_under(guarantee):
            return None
        return self.judged_as(value, guarantee, events) if self.judged_as else value

    def why_missing(self, case) -> str | None:
        """Why the case has no value of this figure, when it says (a figure never reads 0 for it)."""
        if self.value(case) is not None:
            return None
        if self.why is not None:
            return self.why(case)
        return None if self.headline is None else case.not_measured(self.headline)


def _with_what_it_lost(value: float, guarantee: str | None, events: dict) -> float:
    """An at-most-once case's processed/s with what it lost counted back (x expected / (expected
    - lost)): it skips what it loses, so its processed/s moves with its losses (7.2% between the
    seven real quick benches of results/history, 3.9% counted back; harness/report/judge.py)."""
    lost, expected = events.get("lost"), events.get("expected")
    if guarantee == "at-most-once" and lost and expected and 0 < lost < expected:
        return value * expected / (expected - lost)
    return value


def _count(key: str) -> Callable[[Any], int | None]:
    return lambda c: c.events.get(key)


# -- the ratios to references measured on the same machine (sections["references"]) --------
def _references(case) -> dict:
    return case.sections.get("references") or {}


def _why_reference(key: str, name: str) -> Callable[[Any], str | None]:
    def why(case) -> str | None:
        refs = _references(case)
        if not refs:
            return "no reference was measured in this run (the case has no `references`)"
        said = (refs.get("why") or {})
        return said.get(name) or said.get(key) or (None if refs.get(key) is not None
                                                  else f"{key} was not measured")
    return why


def _of_ceiling(case) -> float | None:
    """Processed/s over Spark's own ceiling on the same machine; None when the case kept up
    (processed/s is then the offered rate, not what Spark can do)."""
    ceiling, processed = _references(case).get("spark_ceiling_eps"), case.throughput
    if not ceiling or processed is None or case.backpressure.get("keeping_up") is True:
        return None
    return processed / ceiling


def _why_not_of_ceiling(case) -> str | None:
    if case.backpressure.get("keeping_up") is True and _references(case).get("spark_ceiling_eps"):
        return "the case kept up: processed/s is the offered rate, not a ceiling"
    if case.throughput is None and _references(case).get("spark_ceiling_eps"):
        return case.not_measured("throughput_eps")
    return _why_reference("spark_ceiling_eps", "throughput_of_ceiling")(case)


def _of_floor(case) -> float | None:
    """The recovery over the restart floor (the driver's measured start-up in the same case)."""
    floor, recovery = _references(case).get("restart_floor_s"), case.recovery_s
    return None if not floor or recovery is None else recovery / floor


def _why_not_of_floor(case) -> str | None:
    if case.recovery_s is None and _references(case).get("restart_floor_s"):
        return case.not_measured("recovery_s") or "the case has no recovery"
    return _why_reference("restart_floor_s", "recovery_of_floor")(case)


FIGURES: tuple[Figure, ...] = (
    Figure("produced", "produced", "events", _count("produced"), better=None, shown=PRINTED,
           heading="produced", travels=True),
    Figure("expected", "expected", "events", _count("expected"), better=None, shown=PRINTED,
           heading="expected", travels=True),
    Figure("lost", "lost", "events", _count("lost"), heading="lost", travels=True,
           allowed_under="at-most-once"),
    Figure("duplicated", "duplicated", "events", _count("duplicated"), heading="dup", travels=True,
           allowed_under="at-least-once"),
    Figure("late", "late", "events", _count("dropped_late"), better=None, shown=PRINTED, heading="late"),
    Figure("offered", "offered", "events/s", lambda c: c.offered, better=None, shown=PRINTED,
           heading="offered/s"),
    Figure("throughput", "processed", "events/s", lambda c: c.throughput, better=HIGHER,
           headline="throughput_eps", heading="processed/s", judged_as=_with_what_it_lost),
    Figure("p50", "ev-time p50", "ms", lambda c: c.latency.p50, headline="p99_ms"),
    Figure("p99", "ev-time p99", "ms", lambda c: c.latency.p99, headline="p99_ms"),
    Figure("processing_p99", "proc p99", "ms", lambda c: c.latency_of("processing_time").p99,
           headline="p99_ms"),
    Figure("max_lag", "max lag", "records", lambda c: c.backpressure.get("max_lag_records"),
           heading="max lag"),
    Figure("batch_p50", "batch p50", "ms", lambda c: c.batch_p50_ms),
    Figure("recovery", "recovery", "s", lambda c: c.recovery_s, digits=1, headline="recovery_s"),
    Figure("throughput_of_ceiling", "processed / Spark ceiling", "ratio", _of_ceiling, digits=2,
           better=HIGHER, shown=NOT_TERMINAL, heading="processed/ceiling", travels=True,
           why=_why_not_of_ceiling),
    Figure("recovery_of_floor", "recovery / restart floor", "ratio", _of_floor, digits=2,
           shown=NOT_TERMINAL, heading="recovery/floor", travels=True, why=_why_not_of_floor),
    # named for report.html's latency chart (a series per second), printed in no table
    Figure("processing_p50", "proc p50", "ms", lambda c: c.latency_of("processing_time").p50,
           better=None, shown=NOWHERE, headline="p99_ms"),
)

# summary.json's `headline` (and the pytest plugin's extra_info keys before the registry named
# them): its key -> the figure it holds. Public: keys are added, never renamed
HEADLINE = {"throughput_eps": "throughput", "p99_ms": "p99", "recovery_s": "recovery"}

# Deprecated: Figure.judged and Figure.judged_under are the rule; kept for readers not yet moved
JUDGED = {f.name: f.judged for f in FIGURES if f.allowed_under is not None}


def shown_in(where: str) -> tuple[Figure, ...]:
    return tuple(f for f in FIGURES if where in f.shown)


def compared() -> tuple[Figure, ...]:
    """The figures compare and the history judge: shown in compare, with a direction."""
    return tuple(f for f in shown_in(COMPARE) if f.better is not None)


def figure(name: str) -> Figure:
    """The figure `name` (a KeyError names an unknown one)."""
    for f in FIGURES:
        if f.name == name:
            return f
    raise KeyError(f"no figure {name!r} (figures: {', '.join(f.name for f in FIGURES)})")


def headline(case) -> dict[str, float | int | None]:
    """summary.json's `headline` of a case, read through the registry."""
    return {key: figure(name).value(case) for key, name in HEADLINE.items()}
