"""Fault plans drawn from a seed, as TigerBeetle's VOPR and Jepsen's nemesis draw them: the
same seed and run number give the same plan, every time.

A plan is a plain list of `[[faults]]` tables (FaultKind.draw), so any plan can be
written out as a scenario and run again by hand.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from faults.kinds import describe
from faults.registry import KINDS, drawable
from faults.spec import RESTART_MARGIN_S
from harness.errors import ScenarioError
from harness.scenario import fault_specs

MAX_FAULTS = 3
MIN_SPAN_S = 1.0


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
            why = _why_not(name, ctx)
            if why is None:
                kinds.append(name)
            elif name in wanted:
                raise ScenarioError(f"--kinds: {name} cannot run in this case: {why}",
                                    f"drop it from --kinds, or choose from {', '.join(cls.of(ctx).kinds)}")
        if not kinds:
            raise ScenarioError("no fault kind can run in this case", "give the case a foreachBatch sink, or "
                                "the harness's own services")
        return cls(tuple(kinds), ctx.workload_s, ctx)


def _why_not(name: str, ctx: fault_specs.Context) -> str | None:
    """Why a kind cannot run in the case, trying it on a sample of its draws."""
    kind = KINDS[name]
    if not kind.drawable:
        return kind.why_not_drawable
    rng = random.Random(0)
    reasons = []
    for target in kind.nemesis_targets or (kind.default_target,):
        table = {**kind.draw(rng, 0.0, 1.0), "target": target} if "target" in kind.key_names else kind.draw(
            rng, 0.0, 1.0)
        try:
            fault_specs.fault(table, f"hunt.{name}", _long(ctx))
            return None
        except ScenarioError as exc:
            reasons.append(exc.problem)
    return reasons[0] if reasons else None


def _long(ctx: fault_specs.Context) -> fault_specs.Context:
    """The context with workload enough for any one fault (preconditions are what is asked)."""
    from dataclasses import replace

    return replace(ctx, workload_s=max(ctx.workload_s, RESTART_MARGIN_S * 10))


DRAWS = 20   # tries per fault to draw one the case accepts (a target it has, keys that fit)


def draw(space: Space, seed: int, run: int) -> list[dict]:
    """Run `run`'s plan under `seed`: 1 to MAX_FAULTS faults at times that fit the workload,
    each kind drawn among those that still fit (a restart needs RESTART_MARGIN_S after it),
    keys drawn by the kind, each one checked as the loader checks it. Faults do not overlap:
    each is over before the next starts."""
    rng = random.Random(f"hunt:{seed}:{run}")
    count = rng.randint(1, MAX_FAULTS)
    plan: list[dict] = []
    at = rng.uniform(1.0, max(1.0, space.workload_s / 4))
    for _ in range(count):
        fits = [k for k in space.kinds if _fits(k, at, space.workload_s)]
        if not fits:
            break
        for _ in range(DRAWS):
            name = rng.choice(fits)
            room = space.workload_s - at - (RESTART_MARGIN_S if KINDS[name].restarts else 1.0)
            span = round(min(max(MIN_SPAN_S, rng.uniform(1.0, 6.0)), max(MIN_SPAN_S, room)), 1)
            table = KINDS[name].draw(rng, round(at, 1), span)
            if accepted(table, space):
                plan.append(table)
                break
        else:
            break
        at += span + rng.uniform(2.0, 8.0) + (RESTART_MARGIN_S if KINDS[name].restarts else 0.0)
    return plan


def accepted(table: dict, space: Space) -> bool:
    """Whether the loader takes `table` for this case."""
    try:
        fault_specs.fault(table, "hunt", space.ctx)
    except ScenarioError:
        return False
    return True


def _fits(name: str, at: float, workload_s: float) -> bool:
    margin = RESTART_MARGIN_S + 2.0 if KINDS[name].restarts else 2.0
    return at + MIN_SPAN_S + margin <= workload_s


__all__ = ["Space", "accepted", "describe", "draw"]
