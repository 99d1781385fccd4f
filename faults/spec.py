"""Fault specs: what a scenario's `[[faults]]` entries say, before anything is injected.

    [[faults]]
    kind = "kill-driver"      # a kind of faults/registry.py
    at = "8s"                 # from the first event sent; or by the query's progress:
                              #   "warmup"         when the warm-up ends (batch times settled)
                              #   "warmup + 5s"    that long after it
                              #   "batch 3"        when the 3rd batch with input after it commits
    downtime = "3s"           # the kind's own keys (faults/kinds.py)

A spec is data (it serialises to JSON for summary.json); the injectors in this package
turn it into action against the processes the harness hands them.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

# a kind whose heal restarts a process (a driver takes ~16-20 s on 2 cores) needs this much
# workload after its heal, or the new process has nothing to show it is back (the loader's
# check of a time written in seconds; at run time the harness checks the driver's measured
# start-up instead: harness/run/schedule.py)
RESTART_MARGIN_S = 20.0

START, WARMUP, BATCH = "start", "warmup", "batch"
_WARMUP = re.compile(r"warm-?up(?:\s*\+\s*(?P<plus>\S+))?", re.IGNORECASE)
_BATCH = re.compile(r"batch\s+(?P<n>\d+)", re.IGNORECASE)
FORMS = ('"8s" (from the first event sent), "warmup", "warmup + 5s" or "batch 3" (the 3rd batch after the '
         'warm-up)')


@dataclass(frozen=True)
class Anchor:
    """When a fault comes, by the query's progress rather than the clock.

    after = "start": `plus_s` after the first event sent (a plain `at = "8s"`)
    after = "warmup": `plus_s` after the warm-up ended (the query's batch times settled)
    after = "batch": when the `batches`-th batch with input after the warm-up committed
    """

    after: str = START
    plus_s: float = 0.0
    batches: int = 0

    @property
    def by_progress(self) -> bool:
        return self.after != START

    def text(self) -> str:
        """As a scenario writes it: "8s", "warmup", "warmup + 5s", "batch 3"."""
        if self.after == START:
            return _seconds(self.plus_s)
        if self.after == WARMUP:
            return "warmup" + (f" + {_seconds(self.plus_s)}" if self.plus_s else "")
        return f"batch {self.batches}"


def parse_anchor(text: str, duration_ms) -> Anchor:
    """`at` as written: a duration, or a progress anchor; `duration_ms(text)` reads a duration
    (and raises with the field's path). ValueError names the forms."""
    text = str(text).strip()
    m = _WARMUP.fullmatch(text)
    if m:
        plus = m["plus"]
        return Anchor(WARMUP, duration_ms(plus) / 1000 if plus else 0.0)
    m = _BATCH.fullmatch(text)
    if m:
        if int(m["n"]) < 1:
            raise ValueError("batch 0 is the warm-up's end: write \"warmup\", or batch 1 or more")
        return Anchor(BATCH, batches=int(m["n"]))
    return Anchor(START, duration_ms(text) / 1000)


def _seconds(s: float) -> str:
    return f"{round(s, 3):g}s"


@dataclass(frozen=True)
class FaultSpec:
    """One fault of a scenario's schedule."""

    kind: str
    at_s: float                # seconds from the first event sent; for a progress anchor, its plus_s
    target: str
    duration_s: float = 0.0
    downtime_s: float = 0.0
    via: str = "signal"
    mode: str = "hard"
    extra: dict[str, Any] = field(default_factory=dict)
    anchor: Anchor | None = None   # None: at_s after the first event sent

    @property
    def when(self) -> Anchor:
        """When the fault comes, as an anchor (a plain `at` is one from the start)."""
        return self.anchor if self.anchor is not None else Anchor(START, self.at_s)

    @property
    def at(self) -> str:
        """`at` as the scenario wrote it: "8s", "warmup + 5s", "batch 3"."""
        return self.when.text()

    @property
    def by_progress(self) -> bool:
        return self.when.by_progress

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
        """How long after its injection the fault is still in effect (its duration or downtime)."""
        return max(self.duration_s, self.downtime_s)

    def salt(self) -> str:
        """What makes this fault's random choices its own: its kind and when it comes."""
        return f"{self.kind}@{self.at if self.by_progress else self.at_s}"

    def get(self, key: str, default: Any = None) -> Any:
        """A kind's own key from `extra` (its `store` name). A duration key other than `duration`
        and `downtime` (which are `duration_s` and `downtime_s`) is kept in milliseconds: read it
        in seconds with `seconds`."""
        return self.extra.get(key, default)

    def seconds(self, key: str, default: float | None = None) -> float | None:
        """A kind's own duration key (`Key(name, "duration", ...)`), in seconds."""
        ms = self.extra.get(key)
        return default if ms is None else ms / 1000

    def describe(self) -> dict:
        out = {k: v for k, v in asdict(self).items() if v not in ({}, "", None) and k != "anchor"}
        if self.by_progress:
            out["at"] = self.at
        return out
