"""The verdict of a case: which guarantee its counts are consistent with, and whether that
is the one it declared."""

from __future__ import annotations

from harness.results.model import Verdict

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
            problems: list[str] | tuple[str, ...] = ()) -> Verdict:
    """The verdict. Output that ground truth cannot explain never holds, nor does a case with
    `problems` (a wrong sum, a dead driver); when it fails, `detail` says first what failed,
    then the counts."""
    observed = observed_guarantee(lost, duplicated)
    failures = list(problems)   # the cause (a dead driver, a wrong sum) before its effect
    if not guarantee_holds(expected, observed):
        failures.append(f"{expected} did not hold (observed {observed})")
    if unexpected:
        failures.append(f"{unexpected:,} unexpected in the sink")
    counts = (f"{lost:,} lost, {duplicated:,} duplicated, {unexpected:,} unexpected "
              f"of {expected_count:,} expected")
    if failures:
        detail = f"FAILED: {'; '.join(failures)}. Counts: {counts}"
    else:
        detail = f"{expected} held (observed {observed}): {counts}"
    return Verdict(expected, observed, not failures, detail)


def unchecked(expected: str, failure: str | None) -> Verdict:
    """The verdict of a speed run into a sink with nothing to read back: delivery is not
    judged; it fails only when the run itself failed."""
    if failure:
        return Verdict(expected, "unchecked", False, f"FAILED: {failure}")
    return Verdict(expected, "unchecked", True,
                   "not checked: the sink keeps nothing to read back (a speed run)")
