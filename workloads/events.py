"""Deterministic event plans: ids, keys, event times and intended send times.

A plan is computed from the workload and a seed before anything is sent, so the
same seed and start time give the same events whatever the machine's speed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class EventPlan:
    """Column arrays, one row per event, in send order."""

    event_id: np.ndarray       # int64, dense from 0
    key: np.ndarray            # object (str)
    event_time_ms: np.ndarray  # int64: when the event "happened"
    intended_ms: np.ndarray    # int64: when the open-loop schedule sends it
    amount: np.ndarray         # int64
    late_by_design: np.ndarray  # bool: delayed beyond the late bound on purpose

    def __len__(self) -> int:
        return len(self.event_id)


def zipf_weights(n_keys: int, s: float) -> np.ndarray:
    """P(rank k) proportional to 1 / k**s, k = 1..n_keys."""
    weights = 1.0 / np.arange(1, n_keys + 1, dtype=float) ** s
    return weights / weights.sum()


def plan(workload, start_ms: int) -> EventPlan:
    """The events of `workload` (a scenario Workload) starting at `start_ms`, constant rate."""
    rng = np.random.default_rng(workload.seed)
    n = int(round(workload.rate_eps * workload.duration_s))
    intended = start_ms + (np.arange(n) * 1000.0 / workload.rate_eps).astype(np.int64)
    probs = (zipf_weights(workload.keys, workload.zipf_s)
             if workload.key_distribution == "zipf" else np.full(workload.keys, 1.0 / workload.keys))
    key_index = rng.choice(workload.keys, size=n, p=probs)
    delay = rng.uniform(0, workload.max_delay_ms, size=n).astype(np.int64)
    late = rng.random(n) < workload.late_share
    delay[late] = workload.late_by_ms + delay[late]
    return EventPlan(
        event_id=np.arange(n, dtype=np.int64),
        key=np.array([f"k{i:05d}" for i in key_index], dtype=object),
        event_time_ms=intended - delay,
        intended_ms=intended,
        amount=rng.integers(1, 101, size=n, dtype=np.int64),
        late_by_design=late,
    )
