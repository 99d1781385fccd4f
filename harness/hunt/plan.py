"""The hunt's fault plans: a covering set first, then seeded draws.

A run of the hunt costs minutes, so the plans cover the space systematically before any repeats
(combinatorial testing's covering arrays, as Microsoft's PICT builds them): every ordered pair
of choices the case can run appears in some plan, where a choice is a kind with a value of the
key the hunt covers (kill-driver at after-write, fail-task handing over 1 row: Key.cover), and
a plan of 2 or 3 faults covers the pairs of its faults in their order. Bugs that need two
faults need them in an order: partitions added, then a batch run again.

The pairs are covered in tiers, most telling first: those whose second fault restarts the
driver (a batch run again is where a sink's exactly-once breaks), then those whose first does,
then the rest. The seed orders the choices within a tier and draws each plan's times and
other keys; the same seed and scenario give the same plans. After the covering set, plans are
drawn at random from the seed, as Jepsen's nemesis draws them.

A plan is a plain list of `[[faults]]` tables (FaultKind.draw), so any plan can be written out
as a scenario and run again by hand.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any

from faults.kinds import describe
from faults.registry import KINDS, drawable
from harness.errors import ScenarioError
from harness.scenario import fault_specs

MAX_FAULTS = 3
MIN_SPAN_S = 1.0
# a plan's times (seconds): its first fault's start, each fault's span (a duration fills it, a
# downtime takes at most 2 s of it), the gap before the next. Close together: a run's workload
# goes on until every fault has landed and the query has read past it (the schedule waits for
# the query), so a plan needs no room of its own for a restart
START_S = (1.0, 4.0)
SPAN_S = (1.0, 3.0)
GAP_S = (1.0, 4.0)
DRAWS = 20   # tries per fault to draw one the case accepts (a target it has, keys that fit)


@dataclass(frozen=True)
class Choice:
    """One thing a plan's fault can be: a kind, with a value of the key the hunt covers."""

    kind: str
    key: str | None = None
    value: Any = None

    @property
    def label(self) -> str:
        """"kill-driver", "kill-driver at after-write", "fail-task with rows 1"."""
        if self.key is None:
            return self.kind
        if self.value is None:
            return f"{self.kind} without {self.key}"
        joined = "at" if self.key == "point" else f"with {self.key}"
        return f"{self.kind} {joined} {self.value}"

    @property
    def runs_again(self) -> bool:
        """Whether it kills the driver, which starts again and runs a batch again (or skips it)."""
        return KINDS[self.kind].kills_driver


Pair = tuple[Choice, Choice]


def choice_of(table: dict) -> Choice:
    """The choice a `[[faults]]` table makes."""
    key = KINDS[table["kind"]].covered()
    return Choice(table["kind"], key.name, table.get(key.name)) if key else Choice(table["kind"])


def tier(pair: Pair) -> int:
    """0: its second fault restarts the driver; 1: its first does; 2: neither."""
    return 0 if pair[1].runs_again else 1 if pair[0].runs_again else 2


def pairs_of(plan: list[Choice] | tuple[Choice, ...]) -> set[Pair]:
    """The ordered pairs a plan covers: each fault with each that comes after it."""
    return {(plan[i], plan[j]) for i in range(len(plan)) for j in range(i + 1, len(plan))}


@dataclass(frozen=True)
class Space:
    """What a plan may hold for one case: the kinds it may draw, and the workload's length."""

    kinds: tuple[str, ...]
    workload_s: float
    ctx: fault_specs.Context

    @classmethod
    def of(cls, ctx: fault_specs.Context, wanted: tuple[str, ...] = ()) -> Space:
        """The drawable kinds (or `wanted` of them) whose preconditions the case meets;
        ScenarioError when none is left, or one wanted cannot run here."""
        for name in wanted:
            if name not in KINDS:
                raise ScenarioError(f"--kinds: {name!r} is not a fault kind",
                                    f"choose from {', '.join(KINDS)}")
        kinds = []
        for name in wanted or drawable():
            why = _why_not(name, ctx, asked=name in wanted)
            if why is None:
                kinds.append(name)
            elif name in wanted:
                raise ScenarioError(f"--kinds: {name} cannot run in this case: {why}",
                                    f"drop it from --kinds, or choose from {', '.join(cls.of(ctx).kinds)}")
        if not kinds:
            raise ScenarioError("no fault kind can run in this case", "give the case a foreachBatch sink, or "
                                "the harness's own services")
        return cls(tuple(kinds), ctx.workload_s, ctx)

    @cached_property
    def choices(self) -> tuple[Choice, ...]:
        """Every choice of the space: each kind once per value of its covered key."""
        out = []
        for name in self.kinds:
            key = KINDS[name].covered()
            out += [Choice(name, key.name, v) for v in key.cover] if key else [Choice(name)]
        return tuple(out)

    @cached_property
    def possible(self) -> set[Pair]:
        """The ordered pairs some plan of this space can hold: both faults fit the workload, in
        that order (two restarts need room for both)."""
        return {(a, b) for a in self.choices for b in self.choices if fits([a, b], self.workload_s)}


def _why_not(name: str, ctx: fault_specs.Context, asked: bool = False) -> str | None:
    """Why a kind cannot run in the case, trying it on a sample of its draws. A kind kept out of
    drawing for what it does to a run (lose-unsynced: every crash ends it) may be `asked` for by
    name, when a sample of its draws loads."""
    kind = KINDS[name]
    if not kind.drawable and not asked:
        return kind.why_not_drawable
    rng = random.Random(0)
    reasons = []
    for target in kind.nemesis_targets or (kind.default_target,):
        table = ({**kind.draw(rng, 0.0, 1.0, asked), "target": target} if "target" in kind.key_names
                 else kind.draw(rng, 0.0, 1.0, asked))
        try:
            fault_specs.fault(table, f"hunt.{name}", _long(ctx))
            return None
        except ScenarioError as exc:
            reasons.append(exc.problem)
    return reasons[0] if reasons else None


def _long(ctx: fault_specs.Context) -> fault_specs.Context:
    """The context with workload enough for any one fault (preconditions are what is asked)."""
    from dataclasses import replace

    return replace(ctx, workload_s=max(ctx.workload_s, 200.0), warmup_s=0.0)


def _least_s(plan: list[Choice]) -> float:
    """The least workload a plan needs: each fault's shortest span and gap, a restart's margin."""
    need = 1.0
    for c in plan:
        need += KINDS[c.kind].margin_s(MIN_SPAN_S) + 2.0
    return need


def fits(plan: list[Choice], workload_s: float) -> bool:
    return _least_s(plan) <= workload_s


# -- the covering set -------------------------------------------------------------------------------
def covering(space: Space, seed: int) -> list[list[Choice]]:
    """Plans of 2 or 3 choices that together cover every possible ordered pair, tier by tier,
    greedily: each plan the one that covers most pairs not yet covered of the lowest tier left
    (then of the next tiers), ties broken in the seed's order of the choices."""
    return [list(p) for p in _covering(space.choices, space.workload_s, seed)]


@cache
def _covering(choices: tuple[Choice, ...], workload_s: float, seed: int) -> tuple[tuple[Choice, ...], ...]:
    rng = random.Random(f"cover:{seed}")
    order = list(choices)
    rng.shuffle(order)
    left = {(a, b) for a in choices for b in choices if fits([a, b], workload_s)}
    plans: list[tuple[Choice, ...]] = []
    candidates: list[tuple[Choice, ...]] = [t for t in triples(order) if fits(list(t), workload_s)]
    candidates += [(a, b) for a in order for b in order if fits([a, b], workload_s)]
    while left:
        best = max(candidates, key=lambda p: _score(p, left))
        gained = pairs_of(best) & left
        if not gained:
            break
        plans.append(best)
        left -= gained
    return tuple(plans)


def triples(order: list[Choice]) -> Iterator[tuple[Choice, Choice, Choice]]:
    for a in order:
        for b in order:
            for c in order:
                yield a, b, c


def _score(plan: tuple[Choice, ...], left: set[Pair]) -> tuple[int, int, int]:
    """New pairs per tier, the lowest tier first: a plan that covers a telling pair wins."""
    new = pairs_of(plan) & left
    return (sum(tier(p) == 0 for p in new), sum(tier(p) == 1 for p in new), sum(tier(p) == 2 for p in new))


# -- plans as fault tables ----------------------------------------------------------------------------
def plans(space: Space, seed: int, runs: int) -> list[list[dict]]:
    """The first `runs` plans under `seed`: the covering set's, each timed and keyed from the seed,
    then drawn ones."""
    out = [timed_plan(space, seed, i, choices) for i, choices in enumerate(covering(space, seed)[:runs])]
    out += [draw(space, seed, i) for i in range(len(out), runs)]
    return out


def timed_plan(space: Space, seed: int, i: int, choices: list[Choice]) -> list[dict]:
    """The `i`th covering plan's choices as fault tables, timed and keyed from the seed: at one of
    TIMINGS seeded timings, else at its tightest, else (it cannot fit) a drawn plan."""
    rng = random.Random(f"hunt:{seed}:{i}")
    timed = next((p for p in (_timed(space, choices, rng) for _ in range(TIMINGS)) if p is not None),
                 None) or _timed(space, choices, rng, tight=True)
    return timed if timed is not None else draw(space, seed, i)


TIMINGS = 5   # seeded timings tried for a covering plan before the tightest one


def _timed(space: Space, choices: list[Choice], rng: random.Random, tight: bool = False) -> list[dict] | None:
    """The choices as fault tables, in that order, close together (the run's workload waits for
    each to land and be read past: no room is left for it); keys drawn as each kind draws them,
    the covered key set to the choice's value. `tight`: the earliest start, the shortest spans
    and gaps. None: the loader refuses one in every draw."""
    plan: list[dict] = []
    at = START_S[0] if tight else rng.uniform(*START_S)
    for c in choices:
        kind = KINDS[c.kind]
        for _ in range(DRAWS):
            span = MIN_SPAN_S if tight else round(rng.uniform(*SPAN_S), 1)
            table = kind.draw(rng, round(at, 1), span, asked=True)   # in the space: drawable, or asked
            if c.key is not None:
                table.pop(c.key, None)
                if c.value is not None:
                    table[c.key] = c.value
            if accepted(table, space):
                plan.append(table)
                break
        else:
            return None
        at += span + (GAP_S[0] if tight else rng.uniform(*GAP_S))
    return plan


def draw(space: Space, seed: int, run: int) -> list[dict]:
    """A random plan, run `run`'s under `seed`: 1 to MAX_FAULTS faults close together (as the
    covering plans are timed), each kind drawn among the space's, keys drawn by the kind, each
    one checked as the loader checks it. Each fault's span is over before the next starts."""
    rng = random.Random(f"hunt:{seed}:{run}")
    count = rng.randint(1, MAX_FAULTS)
    plan: list[dict] = []
    at = rng.uniform(*START_S)
    for _ in range(count):
        for _ in range(DRAWS):
            name = rng.choice(space.kinds)
            span = round(rng.uniform(*SPAN_S), 1)
            table = KINDS[name].draw(rng, round(at, 1), span, asked=True)
            if accepted(table, space):
                plan.append(table)
                break
        else:
            break
        at += span + rng.uniform(*GAP_S)
    return plan


def accepted(table: dict, space: Space) -> bool:
    """Whether the loader takes `table` for this case."""
    try:
        fault_specs.fault(table, "hunt", space.ctx)
    except ScenarioError:
        return False
    return True


def seconds(value) -> float:
    """A duration of a fault table ("2.5s") in seconds."""
    from workloads.validate import parse_duration_ms

    return parse_duration_ms(value, "hunt") / 1000


def seconds_text(s: float) -> str:
    """Seconds as a fault table writes them: "2.5s"."""
    return f"{s:g}s"


def lasts_s(table: dict) -> float:
    """How long a fault table's fault lasts: its duration or downtime (0: neither)."""
    return max((seconds(table[k]) for k in ("duration", "downtime") if k in table), default=0.0)


def coverage(space: Space, plans_: list[list[dict]], landed: list[list[bool]] | None = None,
             decided: list[bool] | None = None) -> dict:
    """How much of the space the plans cover: ordered pairs covered out of those possible, and
    after how many runs each tier was covered whole (None: not within these plans). With
    `landed` (for each plan, whether each of its faults landed, in the order of their `at`), only
    the pairs whose faults both landed count; with `decided` (for each plan, whether its run's
    verdict was decided), a run that was not (undecided: UNKNOWN) covers nothing."""
    possible = space.possible
    covered: set[Pair] = set()
    whole: dict[int, int | None] = {0: None, 1: None, 2: None}
    for i, plan in enumerate(plans_):
        ordered = sorted(plan, key=lambda t: seconds(t["at"]))
        ok = landed[i] if landed is not None else [True] * len(ordered)
        if decided is not None and not decided[i]:
            ok = [False] * len(ordered)
        covered |= pairs_of([choice_of(t) for t, hit in zip(ordered, ok, strict=False) if hit]) & possible
        for t in whole:
            if whole[t] is None and all(p in covered for p in possible if tier(p) == t):
                whole[t] = i + 1
    return {"pairs_possible": len(possible), "pairs_covered": len(covered),
            "choices": [c.label for c in space.choices],
            "tier_covered_by_run": {"second-restarts": whole[0], "first-restarts": whole[1],
                                    "rest": whole[2]}}


__all__ = ["Choice", "Pair", "Space", "accepted", "choice_of", "coverage", "covering", "describe", "draw",
           "fits", "lasts_s", "pairs_of", "plans", "seconds", "seconds_text", "timed_plan", "triples"]
