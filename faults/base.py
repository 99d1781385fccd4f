"""The base of every injector: its spec, its targets, when it acted, and what was seen."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from faults.spec import FaultSpec
from faults.targets import Targets


@dataclass
class Observation:
    """Whether the fault's effect was seen, in a sentence, with figures for recovery.

    `landed` is the proof that it hit the window it aims at, not just that it ran ("the
    exception came after the sink's write of batch 7 returned and before commits/7"): None
    for a kind that aims at no window of its own (then observed is the proof). A fault that
    did not land fails its case, as an unobserved one does. `outcome` is what Spark did with
    a restart the fault made it take: "accepted", "ignored" or "refused" (with Spark's
    sentence in `outcome_detail`): a refused restart is a finding, not a harness error."""

    observed: bool
    detail: str
    facts: dict = field(default_factory=dict)
    landed: bool | None = None
    proof: str = ""
    outcome: str | None = None
    outcome_detail: str = ""
    more: dict = field(default_factory=dict)   # kind-specific records for summary.json


class Fault:
    """inject() makes it happen, heal() undoes it (once, always), observe() checks the effect."""

    def __init__(self, spec: FaultSpec, targets: Targets):
        self.spec, self.targets = spec, targets
        self.injected_at: float | None = None   # wall-clock seconds
        self.healed_at: float | None = None
        self.target = spec.target               # what it acted on, as recorded ("executor:0 (pid 123)")
        self._healing = False

    def inject(self) -> None:
        self.injected_at = time.time()
        self._inject()

    def heal(self) -> None:
        """Undo the fault, once; `healed_at` is when it is undone (a restarted driver is ready)."""
        if self.healed_at is None and not self._healing:
            self._healing = True
            try:
                self._heal()
            finally:
                self.healed_at = time.time()

    def _inject(self) -> None:
        raise NotImplementedError

    def _heal(self) -> None:
        """Nothing to undo by default (a kill is over once it happened)."""

    def restore(self) -> bool:
        """At the case's end: put back what the fault left down for the rest of the case (a
        node killed without `downtime`), so that the next case starts on the whole cluster.
        Whether anything was put back (nothing by default)."""
        return False

    def observe(self) -> Observation:
        raise NotImplementedError


def held_text(held: dict) -> str:
    """"batch 4 (85 rows)", or "batch 4" when the sink does not count its rows (counting a
    DataFrame would run the batch twice)."""
    rows = held.get("rows")
    return f"batch {held['batch_id']}" + (f" ({rows:,} rows)" if rows is not None else "")
