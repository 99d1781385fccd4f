"""A case's measured window: from the end of its warm-up (harness/metrics/warmup.py, the same
rule the run's progress anchors follow) to the last event sent. The throughputs, the lag trend
and the latency after the warm-up are measured over it.

A figure is measured only over enough of the query's work: a window in which fewer than
MIN_BATCHES batches with input committed (a driver down for most of it, a query that never
settled) gives no throughput, and an output written by fewer than MIN_BATCHES commits no
percentile. Such a figure is None in summary.json, with the reason in
`measured_window.not_measured`; it is never 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from harness.metrics.warmup import Done, Warm, limit_ms, warm

MIN_BATCHES = 3


def done(batches) -> list[Done]:
    """The committed batches with input of a case's checkpoints (harness.check.checkpoint.Batch),
    as the warm-up rule reads them."""
    out = [Done(b.query, b.batch_id, float(b.planned_ms), float(b.committed_ms), b.rows) for b in batches
           if b.committed and b.rows > 0 and b.planned_ms is not None and b.committed_ms is not None]
    return sorted(out, key=lambda d: d.committed_ms)


@dataclass
class Window:
    """The measured window, in epoch ms, and how its start was found."""

    t0_ms: float
    from_ms: float
    to_ms: float
    warm: Warm
    batches: int                     # batches with input that committed inside it
    not_measured: dict[str, str] = field(default_factory=dict)   # figure -> why it was not measured

    @property
    def seconds(self) -> tuple[int, int]:
        """Its whole seconds from the first event sent, [first, last)."""
        first = math.ceil((self.from_ms - self.t0_ms) / 1000)
        last = max(math.floor((self.to_ms - self.t0_ms) / 1000), first + 1)
        return first, last

    @property
    def too_few_batches(self) -> str | None:
        """Why nothing measured from the query's batches can be trusted, or None."""
        if self.batches >= MIN_BATCHES:
            return None
        first, last = self.seconds
        return (f"{self.batches} batch{'es' if self.batches != 1 else ''} with input committed in the "
                f"measured window [{first} s, {last} s): fewer than {MIN_BATCHES}")

    def skip(self, figure: str, why: str) -> None:
        self.not_measured[figure] = why

    def to_json(self) -> dict:
        first, last = self.seconds
        return {"from_s": first, "to_s": last,
                "warmup_ended_s": round((self.warm.at_ms - self.t0_ms) / 1000, 3),
                "settled": self.warm.settled, "why": self.warm.why, "batches": self.batches,
                "not_measured": dict(self.not_measured)}


def of(batches, t0_ms: float, warmup_s: float, workload_s: float, last_sent_ms: float) -> Window:
    """The measured window of a case whose first event was sent at `t0_ms`."""
    committed = done(batches)
    w = warm(committed, t0_ms + warmup_s * 1000, limit_ms(t0_ms, warmup_s, workload_s))
    assert w is not None, "after the run the limit applies"
    end = max(last_sent_ms, w.at_ms)
    inside = sum(1 for d in committed if w.at_ms < d.committed_ms <= end)
    return Window(t0_ms, w.at_ms, end, w, inside)
