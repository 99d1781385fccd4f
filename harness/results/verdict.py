"""The verdict of a case: which guarantee its counts are consistent with, and whether that
is the one it declared.

A verdict is three-valued, as Jepsen's checkers answer true, false or :unknown:

  PASS     the declared guarantee held, and nothing else went wrong;
  FAIL     it did not hold (lost or duplicated beyond it, rows ground truth cannot explain), or
           the case had a problem (a dead driver, a wrong sum, a fault not observed);
  UNKNOWN  nothing says it failed, but it could not be decided: a sink with nothing to read
           back (noop), a sink whose read() raised, an oracle that raised, a fault that never
           came (the run was cut at its cap).

UNKNOWN is never a pass (`Verdict.holds` is True for PASS alone), and a real failure stays
FAIL whatever else is unknown.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.results.model import FAIL, PASS, STATUSES, UNKNOWN, Verdict, worst

__all__ = ["FAIL", "PASS", "STATUSES", "UNKNOWN", "guarantee_holds", "observed_guarantee", "unchecked",
           "undecided", "verdict", "worst"]

UNCHECKED = "unchecked"   # the observed guarantee of a case whose output could not be checked

_HOLDS_IF_OBSERVED = {
    "exactly-once": {"exactly-once"},
    "at-least-once": {"exactly-once", "at-least-once"},
    "at-most-once": {"exactly-once", "at-most-once"},
}


def observed_guarantee(lost: int, duplicated: int) -> str:
    """The strongest guarantee the counts are consistent with."""
    if lost == 0 and duplicated == 0:
        return "exactly-once"
    if lost == 0:
        return "at-least-once"
    return "at-most-once" if duplicated == 0 else "none"


def guarantee_holds(expected: str, observed: str) -> bool:
    return observed in _HOLDS_IF_OBSERVED[expected]


def verdict(expected: str, lost: int, duplicated: int, unexpected: int, expected_count: int = 0,
            problems: Sequence[str] = (), unknowns: Sequence[str] = ()) -> Verdict:
    """The verdict. Output that ground truth cannot explain never holds, nor does a case with
    `problems` (a wrong sum, a dead driver): FAIL, and `detail` says first what failed, then
    the counts. Without a failure, `unknowns` (a fault missed at the run's cap) make it
    UNKNOWN: the counts held, but the case did not run what it was asked to."""
    observed = observed_guarantee(lost, duplicated)
    failures = list(problems)   # the cause (a dead driver, a wrong sum) before its effect
    if not guarantee_holds(expected, observed):
        failures.append(f"{expected} did not hold (observed {observed})")
    if unexpected:
        failures.append(f"{unexpected:,} unexpected in the sink")
    counts = (f"{lost:,} lost, {duplicated:,} duplicated, {unexpected:,} unexpected "
              f"of {expected_count:,} expected")
    if failures:
        also = f"; also unknown: {'; '.join(unknowns)}" if unknowns else ""
        detail = f"FAILED: {'; '.join(failures)}. Counts: {counts}{also}"
        return Verdict(expected, observed, False, detail, FAIL)
    if unknowns:
        detail = f"UNKNOWN: {'; '.join(unknowns)}. Counts: {counts}"
        return Verdict(expected, observed, False, detail, UNKNOWN)
    return Verdict(expected, observed, True, f"{expected} held (observed {observed}): {counts}", PASS)


def undecided(expected: str, why: str, failure: str | None = None) -> Verdict:
    """The verdict of a case whose output could not be checked (`why`: the sink's read() or the
    oracle raised): UNKNOWN, naming why; FAIL when the case itself failed (`failure`: a dead
    driver), which no check could have saved."""
    if failure:
        return Verdict(expected, UNCHECKED, False, f"FAILED: {failure}; also unknown: {why}", FAIL)
    return Verdict(expected, UNCHECKED, False, f"UNKNOWN: {why}", UNKNOWN)


def unchecked(expected: str, failure: str | None) -> Verdict:
    """The verdict of a speed run into a sink with nothing to read back (noop): delivery is not
    judged, so UNKNOWN; FAIL when the run itself failed."""
    return undecided(expected, "not checked: the sink keeps nothing to read back (a speed run)", failure)

