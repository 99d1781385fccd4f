"""Which rate a sustain search tries next, and what it may report (no services).

A rate that kept up once may have held by luck: on services warmed by the trials before
it, or with the broker's and PostgreSQL's share of the cores low for those seconds. A
Nexmark search's median rates, each tried once more on freshly started services, fell
behind for 6 of 10 queries (docs/performance.md). So the search reports a rate only when
it held twice in a row at that rate, the second time on freshly started services, and
it narrows the span between the last rate held and the first that failed to `precision`
(10%), so the figure is within 10% of the rate the query falls behind at, not within
the doubling grid's factor of 2.

The plan: double from `min_eps` until a trial fails (or `max_eps` held); bisect between
the highest rate held below the lowest that failed and that failure until
failed / held <= 1 + precision (or `steps` bisections ran); then confirm the rate held on
fresh services. A confirmation that fails makes that rate a failure, and the search goes
on below it. `record` takes each trial's outcome, `next` says what to run, `result` what
the search may report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

PRECISION = 0.10        # the bracket: the first rate that failed over the last that held, at most 1.10

# why a bracket is wider than `precision`, or open at one end
AT_MAX = "max-eps"      # every rate held up to --max-eps: the rate is a lower bound
AT_MIN = "min-eps"      # no rate held twice, down to the lowest tried (--min-eps or above)
BY_STEPS = "steps"      # --steps ran out before the bracket was within precision


@dataclass
class Plan:
    min_eps: float
    max_eps: float
    steps: int | None = None          # at most this many bisections; None: until `precision`
    precision: float = PRECISION
    passed: list[float] = field(default_factory=list)     # rates that held on the services as they were
    failed: list[float] = field(default_factory=list)     # rates that fell behind, fresh or not
    confirmed: float | None = None                        # the rate that held again on fresh services
    bisections: int = 0

    def next(self) -> tuple[float, bool] | None:
        """The next trial: (rate, on fresh services), or None when the search is done."""
        if self.confirmed is not None:
            return None
        if not self.failed:
            top = max(self.passed, default=None)
            if top is None:
                return self.min_eps, False
            return (min(top * 2, self.max_eps), False) if top < self.max_eps else (top, True)
        low, high = self.span()
        if low is None:
            return None
        if not self.narrow_enough(low, high) and (self.steps is None or self.bisections < self.steps):
            middle = _round(low, high)
            if middle is not None:
                return middle, False
        return low, True

    def record(self, eps: float, held: bool, fresh: bool) -> None:
        """A trial's outcome. A trial tried after the first failure is a bisection."""
        if fresh and held:
            self.confirmed = eps
            return
        if not fresh and self.failed:
            self.bisections += 1
        (self.passed if held else self.failed).append(eps)

    def span(self) -> tuple[float | None, float]:
        """(the highest rate held below the lowest that failed, that failure)."""
        high = min(self.failed)
        return max((p for p in self.passed if p < high), default=None), high

    def narrow_enough(self, low: float, high: float) -> bool:
        return high <= low * (1 + self.precision) * (1 + 1e-9)

    def result(self) -> dict:
        """What the search may report: `rate_eps`, the rate held twice (None: none did);
        `bracket` [held, failed], the rate held twice and the lowest rate above it that failed
        (null at an end the search never reached); `bracket_ratio`, failed / held; and
        `bracket_limit`, why the bracket is open or wider than `precision` (AT_MAX, AT_MIN,
        BY_STEPS), else None."""
        rate = self.confirmed
        above = [f for f in self.failed if rate is None or f > rate]
        failed = min(above, default=None)
        limit = None
        if rate is None:
            limit = AT_MIN
        elif failed is None:
            limit = AT_MAX
        elif not self.narrow_enough(rate, failed):
            limit = BY_STEPS
        return {"rate_eps": rate, "bracket": [rate, failed],
                "bracket_ratio": round(failed / rate, 3) if rate and failed else None,
                "bracket_limit": limit}


def _round(low: float, high: float) -> float | None:
    """The middle of (low, high) to three significant figures (42,500 rather than 42,437.5),
    unrounded when rounding would leave the span; None when nothing lies strictly inside."""
    middle = (low + high) / 2
    digits = 2 - int(math.floor(math.log10(middle)))
    rounded = round(middle, digits)
    if low < rounded < high:
        return float(rounded)
    middle = round(middle, 1)
    return middle if low < middle < high else None
