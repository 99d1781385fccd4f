"""Shrinking a failing plan by delta debugging: try it without each fault, then with each
remaining fault earlier or shorter, then with a shorter workload; keep the first candidate
that still fails, and start over from it; stop when no smaller candidate fails.

Fault timing is not exact, so a candidate counts as failing when it fails in either of two
runs (the second is run only when the first passes); how often the two disagreed is the
flake rate the search reports.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from faults.registry import KINDS
from faults.spec import RESTART_MARGIN_S
from harness.hunt.plan import describe
from workloads.validate import parse_duration_ms

SHORTER = 0.75          # a shorter workload is this share of the last
MIN_WORKLOAD_S = 10.0


@dataclass(frozen=True)
class Candidate:
    plan: tuple[dict, ...]
    workload_s: float
    change: str          # what makes it smaller than the one it came from

    def size(self) -> tuple[int, float, float]:
        """Fewer faults, then less time in faults, then a shorter workload."""
        return (len(self.plan), sum(_lasts(t) + _seconds(t["at"]) for t in self.plan), self.workload_s)


@dataclass
class Shrunk:
    smallest: Candidate
    steps: list[dict] = field(default_factory=list)    # every candidate tried, failing or not
    runs: int = 0
    flaky: int = 0       # candidates whose two runs disagreed


def candidates(current: Candidate) -> Iterator[Candidate]:
    """The smaller candidates of `current`, in the order delta debugging tries them."""
    plan = list(current.plan)
    for i, table in enumerate(plan):
        yield Candidate(tuple(plan[:i] + plan[i + 1:]), current.workload_s, f"without {describe([table])}")
    for i, table in enumerate(plan):
        at = _seconds(table["at"])
        if at >= 2.0:
            earlier = {**table, "at": _text(round(at / 2, 1))}
            yield Candidate(tuple(plan[:i] + [earlier] + plan[i + 1:]), current.workload_s,
                            f"{table['kind']} at {earlier['at']} instead of {table['at']}")
        for key in ("duration", "downtime"):
            if key in table and _seconds(table[key]) >= 1.0:
                shorter = {**table, key: _text(round(_seconds(table[key]) / 2, 1))}
                yield Candidate(tuple(plan[:i] + [shorter] + plan[i + 1:]), current.workload_s,
                                f"{table['kind']} {key} {shorter[key]} instead of {table[key]}")
    workload = round(current.workload_s * SHORTER, 1)
    if workload >= MIN_WORKLOAD_S and all(_end(t) <= workload for t in plan):
        yield Candidate(current.plan, workload,
                        f"a {workload:g}s workload instead of {current.workload_s:g}s")


def shrink(start: Candidate, fails: Callable[[Candidate], bool],
           say: Callable[[str], None] = lambda _: None, valid: Callable[[Candidate], bool] = lambda _: True,
           ) -> Shrunk:
    """The smallest candidate reachable from `start` that still fails. `fails(candidate)` runs
    it once and says whether its verdict failed; each candidate gets a second run if the
    first passed. `valid` leaves out candidates the scenario would refuse."""
    out = Shrunk(start)
    current = start
    held: set[str] = set()   # candidates that passed both runs: never run again (the empty plan
    while True:              # came up again after each step that moved a fault)
        for cand in candidates(current):
            if not valid(cand) or _key(cand) in held:
                continue
            say(f"shrinking: trying {cand.change} ({len(cand.plan)} fault(s), {cand.workload_s:g}s workload)")
            first = fails(cand)
            second = None if first else fails(cand)
            out.runs += 1 if first else 2
            failing = first or bool(second)
            out.flaky += 1 if (not first and second) else 0
            out.steps.append({"change": cand.change, "plan": list(cand.plan), "workload_s": cand.workload_s,
                              "failed": failing, "runs": [first] + ([] if second is None else [second])})
            if not failing:
                held.add(_key(cand))
            if failing:
                current = cand
                say(f"shrinking: still fails {cand.change}: {describe(list(cand.plan))}")
                break
        else:
            out.smallest = current
            return out


def _key(cand: Candidate) -> str:
    return json.dumps([list(cand.plan), cand.workload_s], sort_keys=True)


def _seconds(value) -> float:
    return parse_duration_ms(value, "hunt") / 1000


def _text(seconds: float) -> str:
    return f"{seconds:g}s"


def _lasts(table: dict) -> float:
    return max((_seconds(table[k]) for k in ("duration", "downtime") if k in table), default=0.0)


def _end(table: dict) -> float:
    """When the fault must be over for the workload to hold it (a restart: its margin too)."""
    margin = RESTART_MARGIN_S if KINDS[table["kind"]].restarts else 1.0
    return _seconds(table["at"]) + _lasts(table) + margin
