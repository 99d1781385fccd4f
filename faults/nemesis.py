"""A seeded nemesis, as in Jepsen: faults drawn at random from a list of kinds, one every
`interval`, each healed before the next, the last healed before the workload ends.

The plan is made before anything starts, from the seed alone: the same seed gives the
same faults at the same times, and summary.json records each as it was carried out.
"""

from __future__ import annotations

import random

from faults.spec import KINDS, RESTART_MARGIN_S, RESTARTING, FaultSpec

# what a nemesis may aim a pause at: Spark's processes (the broker and Postgres have
# faults of their own: restart-broker, stall-sink)
_PAUSE_TARGETS = ("executor:random", "driver")
_KILL_DOWNTIME_S = 2.0


def plan(kinds: tuple[str, ...], interval_s: float, seed: int, workload_s: float) -> tuple[FaultSpec, ...]:
    """One fault per interval, each lasting at most half of it, from half an interval in;
    alternating fault and heal, and none still in effect when the workload ends."""
    rng = random.Random(seed)
    half = interval_s / 2
    specs = []
    at = half
    while at + half <= workload_s:
        # a kind whose heal restarts a process needs workload after it (RESTART_MARGIN_S)
        fits = [k for k in kinds if k not in RESTARTING or at + half + RESTART_MARGIN_S <= workload_s]
        if not fits:
            break
        specs.append(_fault(rng.choice(fits), round(at, 3), half, rng))
        at += interval_s
    return tuple(specs)


def _fault(kind: str, at_s: float, half_s: float, rng: random.Random) -> FaultSpec:
    keys = KINDS[kind].keys
    target = rng.choice(_PAUSE_TARGETS) if kind == "pause" else KINDS[kind].default_target
    if kind == "kill-executor":
        target = "executor:random"
    return FaultSpec(kind=kind, at_s=at_s, target=target,
                     duration_s=half_s if "duration" in keys else 0.0,
                     downtime_s=min(_KILL_DOWNTIME_S, half_s) if "downtime" in keys else 0.0,
                     mode=rng.choice(("clean", "hard")) if kind == "restart-broker" else "hard")
