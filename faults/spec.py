"""Fault specs: what a scenario's `[[faults]]` entries say, before anything is injected.

    [[faults]]
    kind = "kill-driver"      # a kind of faults/registry.py
    at = "8s"                 # counted from the first event sent
    downtime = "3s"           # the kind's own keys (faults/kinds.py)

A spec is data (it serialises to JSON for summary.json); the injectors in this package
turn it into action against the processes the harness hands them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# a kind whose heal restarts a process (a driver takes ~16-20 s on 2 cores) needs this much
# workload after its heal, or the new process has nothing to show it is back
RESTART_MARGIN_S = 20.0


@dataclass(frozen=True)
class FaultSpec:
    """One fault of a scenario's schedule."""

    kind: str
    at_s: float
    target: str
    duration_s: float = 0.0
    downtime_s: float = 0.0
    via: str = "signal"
    mode: str = "hard"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def target_kind(self) -> str:
        """"executor" of "executor:1"."""
        return self.target.partition(":")[0]

    @property
    def target_index(self) -> str:
        """"1" of "executor:1", "random" of "executor:random", "" of "driver"."""
        return self.target.partition(":")[2]

    @property
    def lasts_s(self) -> float:
        """How long after `at` the fault is still in effect (its duration or downtime)."""
        return max(self.duration_s, self.downtime_s)

    def get(self, key: str, default: Any = None) -> Any:
        """A kind's own key from `extra` (its `store` name)."""
        return self.extra.get(key, default)

    def describe(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v not in ({}, "")}
