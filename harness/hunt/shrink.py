"""Shrinking a failing plan, in two phases.

1. The smallest set of faults: each fault removed in turn, by removal only; a candidate runs
   until it fails once or holds twice (fault timing is not exact: a fault at a given second
   meets whatever batch runs then). The first that fails becomes the plan, and the removals
   start over from it.
2. The times, while the shrink has run fewer than SHRINK_RUNS in all and a candidate's two
   runs still fit, one run kept back: each fault earlier, each fault shorter, the workload
   shorter. A move cannot make a removed fault needed again, so the removals are not tried
   again after it. A two-fault plan that needs both faults takes at most 4 runs of removals,
   so at most 12.
3. A confirmation: where the moves ended, the plan runs once more; if it holds (it sat on the
   edge of its timing), the move before it is the answer, confirmed the same way while runs
   are left.

A candidate the budget cuts off is recorded as not run, never as held. How the shrinking ended
is said: every candidate tried, or the budget spent (the smallest plan so far is the answer).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from faults.registry import KINDS
from harness.hunt.plan import describe, lasts_s, seconds, seconds_text

SHORTER = 0.75          # a shorter workload is this share of the last
MIN_WORKLOAD_S = 10.0
SHRINK_RUNS = 12        # the timing moves stop where a candidate's two runs would pass this
SHRUNK, BUDGET = "shrunk", "budget"


@dataclass(frozen=True)
class Candidate:
    plan: tuple[dict, ...]
    workload_s: float
    change: str          # what makes it smaller than the one it came from

    def size(self) -> tuple[int, float, float]:
        """Fewer faults, then less time in faults, then a shorter workload."""
        return (len(self.plan), sum(lasts_s(t) + seconds(t["at"]) for t in self.plan), self.workload_s)


@dataclass
class Shrunk:
    smallest: Candidate
    steps: list[dict] = field(default_factory=list)    # every candidate considered, run or not
    runs: int = 0
    flaky: int = 0       # candidates whose first run held and second failed
    ended: str = SHRUNK  # SHRUNK: no smaller candidate fails; BUDGET: the budget cut it short

    @property
    def run_twice(self) -> int:
        return sum(1 for s in self.steps if len(s["runs"]) == 2)


def removals(current: Candidate) -> Iterator[Candidate]:
    """The plan without each fault, in turn."""
    plan = list(current.plan)
    for i, table in enumerate(plan):
        yield Candidate(tuple(plan[:i] + plan[i + 1:]), current.workload_s, f"without {describe([table])}")


def moves(current: Candidate, shorter_workload: bool = True) -> Iterator[Candidate]:
    """Each fault earlier (half its `at`), each fault shorter (its duration or downtime halved),
    the workload SHORTER (when every fault still fits, and `shorter_workload`: a hunt whose
    runs last as long as their plans has none to try)."""
    plan = list(current.plan)
    for i, table in enumerate(plan):
        at = seconds(table["at"])
        if at >= 2.0:
            earlier = {**table, "at": seconds_text(round(at / 2, 1))}
            yield Candidate(tuple(plan[:i] + [earlier] + plan[i + 1:]), current.workload_s,
                            f"{table['kind']} at {earlier['at']} instead of {table['at']}")
        for key in ("duration", "downtime"):
            if key in table and seconds(table[key]) >= 1.0:
                shorter = {**table, key: seconds_text(round(seconds(table[key]) / 2, 1))}
                yield Candidate(tuple(plan[:i] + [shorter] + plan[i + 1:]), current.workload_s,
                                f"{table['kind']} {key} {shorter[key]} instead of {table[key]}")
    workload = round(current.workload_s * SHORTER, 1)
    if shorter_workload and workload >= MIN_WORKLOAD_S and all(_end(t) <= workload for t in current.plan):
        yield Candidate(current.plan, workload,
                        f"a {workload:g}s workload instead of {current.workload_s:g}s")


# fails(candidate): True (its verdict broke the guarantee), False (it held), None (not run: the
# budget is spent)
Fails = Callable[[Candidate], bool | None]


def shrink(start: Candidate, fails: Fails, say: Callable[[str], None] = lambda _: None,
           valid: Callable[[Candidate], bool] = lambda _: True, most_runs: int = SHRINK_RUNS,
           shorter_workload: bool = True) -> Shrunk:
    """The smallest candidate reachable from `start` that still fails: the fewest faults first,
    then earlier, shorter faults and a shorter workload while the runs stay within `most_runs`
    (the removals are never cut short: the fewest faults come first). `valid` leaves
    out candidates the scenario would refuse."""
    out = Shrunk(start)
    held: set[str] = set()   # candidates that held twice: never run again
    current = _phase(out, start, removals, fails, say, valid, held, "remove", None)
    if out.ended == SHRUNK:
        accepted = [current]
        # one run is kept back to confirm where the moves end
        moved = lambda c: moves(c, shorter_workload)   # noqa: E731
        current = _phase(out, current, moved, fails, say, valid, held, "move", most_runs - 1, accepted)
        if out.ended == SHRUNK:
            current = _confirm(out, accepted, fails, say, most_runs)
    out.smallest = current
    return out


def _confirm(out: Shrunk, accepted: list[Candidate], fails: Fails, say, most_runs: int) -> Candidate:
    """A moved plan failed once; moved as far as it went, it may sit on the edge of its timing
    (the two-fault hunt's last move, a kill 0.7 s after partitions were added, held when its
    minimal.toml ran again). Run it once more: if it holds, the move before it is the answer,
    confirmed the same way while runs are left."""
    while len(accepted) > 1 and out.runs < most_runs:
        cand = accepted[-1]
        say(f"shrinking (confirm): running {describe(list(cand.plan))} again")
        result = fails(cand)
        if result is None:
            out.ended = BUDGET
            break
        out.runs += 1
        out.steps.append({"phase": "confirm", "change": f"again: {cand.change}", "plan": list(cand.plan),
                          "workload_s": cand.workload_s, "failed": result, "runs": [result],
                          "not_run": False})
        if result:
            return cand
        out.flaky += 1
        say(f"shrinking: {cand.change} held when run again; back to the plan before it")
        accepted.pop()
    return accepted[-1]


def _phase(out: Shrunk, current: Candidate, smaller, fails: Fails, say, valid, held: set[str], phase: str,
           until_runs: int | None, accepted: list[Candidate] | None = None) -> Candidate:
    """Try `smaller(current)` in order; the first that fails becomes current (appended to
    `accepted`), and the phase starts over from it; done when none fails, or the runs run out
    (`until_runs`), or the budget."""
    while True:
        for cand in smaller(current):
            if not valid(cand) or _key(cand) in held:
                continue
            if until_runs is not None and out.runs + 2 > until_runs:
                return current   # the moves' runs are spent: what is found so far is the answer
            say(f"shrinking ({phase}): trying {cand.change} ({len(cand.plan)} fault(s), "
                f"{cand.workload_s:g}s workload)")
            failing = _judge(out, cand, fails, phase)
            if failing is None:
                out.ended = BUDGET
                return current
            if failing:
                say(f"shrinking: still fails {cand.change}: {describe(list(cand.plan))}")
                current = cand
                if accepted is not None:
                    accepted.append(cand)
                break
            held.add(_key(cand))
        else:
            return current


def _judge(out: Shrunk, cand: Candidate, fails: Fails, phase: str) -> bool | None:
    """Run `cand` until it fails once or holds twice; record every run. None: the budget was
    spent before the candidate was settled (recorded as not run, never as held)."""
    runs: list[bool] = []
    verdict: bool | None = None
    for _ in range(2):
        result = fails(cand)
        if result is None:
            break
        runs.append(result)
        out.runs += 1
        if result:
            verdict = True
            break
    else:
        verdict = False
    if verdict and runs == [False, True]:
        out.flaky += 1
    out.steps.append({"phase": phase, "change": cand.change, "plan": list(cand.plan),
                      "workload_s": cand.workload_s, "failed": verdict, "runs": runs,
                      "not_run": verdict is None})
    return verdict


def _key(cand: Candidate) -> str:
    return json.dumps([list(cand.plan), cand.workload_s], sort_keys=True)


def _end(table: dict) -> float:
    """When the fault must be over for the workload to hold it (a restart: its margin too)."""
    return seconds(table["at"]) + KINDS[table["kind"]].margin_s(lasts_s(table)) + 1.0
