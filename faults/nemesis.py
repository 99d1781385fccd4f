"""A seeded nemesis, as in Jepsen: faults drawn at random from a list of kinds, one every
`interval`, each healed before the next, the last healed before the workload ends.

The plan is made before anything starts, from the seed alone: the same seed gives the
same faults at the same times. Each drawn fault is a plain `[[faults]]` table
(FaultKind.draw), which the scenario loader validates like one written by hand, and
summary.json records each as it was carried out.
"""

from __future__ import annotations

import random

from faults.registry import KINDS
from faults.spec import RESTART_MARGIN_S


def plan(kinds: tuple[str, ...], interval_s: float, seed: int, workload_s: float,
         span_s: float | None = None) -> tuple[dict, ...]:
    """One fault per interval, each lasting at most `span_s` (default: half of it), from half
    an interval in; alternating fault and heal, and none still in effect when the workload ends."""
    rng = random.Random(seed)
    half = interval_s / 2
    span = half if span_s is None else min(span_s, half)
    tables = []
    at = half
    while at + half <= workload_s:
        # a kind whose heal restarts a process needs workload after it (RESTART_MARGIN_S)
        fits = [k for k in kinds if not KINDS[k].restarts or at + half + RESTART_MARGIN_S <= workload_s]
        if not fits:
            break
        tables.append(KINDS[rng.choice(fits)].draw(rng, round(at, 3), span))
        at += interval_s
    return tuple(tables)
