"""When a case's warm-up ended: the first moment, at or after `[measure] warmup`, at which the
query's batch times had settled; at the latest a third of the workload in (or the declared
warm-up, if longer), said so: a query that cannot keep up never settles, and the faults
anchored to the warm-up's end need the rest of the workload (on one core, a 55 s quick case
that ended its warm-up at 27.5 s had no room left for its restart: run 20261126T055150).
The harness applies this one rule while a case runs (harness/run/pace.py: faults anchored at
"warmup" or "batch N") and after it, to the same batches (the measured window:
harness/metrics/window.py).

"Settled": the last SETTLE_BATCHES batches with input agree (each took at most SETTLE_SPREAD
times their median, plus SETTLE_SLACK_MS), and they are no longer getting faster (their median
is not below the median of the SETTLE_BATCHES before them divided by SETTLE_SPREAD). A cold
query's first batches (class loading, the JIT, the backlog of a slow start) take several times
its steady ones, and may agree with each other: on one core 6.0, 3.9 and 8.4 s, then near 1 s.
A query that cannot keep up takes longer and longer, and never settles.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

SETTLE_BATCHES = 3       # batches with input whose times must agree
SETTLE_SPREAD = 1.5      # the largest of them at most this share of their median...
SETTLE_SLACK_MS = 250.0  # ... plus this (a batch of 200 ms and one of 400 ms have settled)
LIMIT_SHARE = 3          # the warm-up ends at the latest this share of the workload in


@dataclass(frozen=True)
class Done:
    """A committed batch with input: when offsets/N and commits/N were written, and its rows."""

    query: int
    batch_id: int
    planned_ms: float
    committed_ms: float
    rows: int

    @property
    def duration_ms(self) -> float:
        return max(0.0, self.committed_ms - self.planned_ms)


@dataclass(frozen=True)
class Warm:
    """When the warm-up ended (epoch ms) and how: settled after which batches, or at its limit."""

    at_ms: float
    settled: bool
    why: str


def settled(window: list[Done], before: list[Done]) -> bool:
    """Whether the batch times of `window` have settled: the largest within SETTLE_SPREAD of their
    median, and that median not SETTLE_SPREAD times faster than that of the batches `before` them
    (still getting faster is still warming up)."""
    if len(window) < SETTLE_BATCHES or len(before) < SETTLE_BATCHES:
        return False
    times = [d.duration_ms for d in window]
    middle = statistics.median(times)
    earlier = statistics.median(d.duration_ms for d in before)
    return max(times) <= SETTLE_SPREAD * middle + SETTLE_SLACK_MS and middle * SETTLE_SPREAD >= earlier


def warm(done: list[Done], since_ms: float, limit_ms: float, now_ms: float | None = None) -> Warm | None:
    """When the warm-up ended: the first moment at or after `since_ms` at which the last
    SETTLE_BATCHES batches committed by then had settled; `limit_ms` if none had by then. None:
    not yet known at `now_ms` (None: the run is over, so the limit applies).
    `done`: committed batches with input, in commit order."""
    done = sorted(done, key=lambda d: d.committed_ms)
    moments = [since_ms, *(d.committed_ms for d in done if since_ms < d.committed_ms < limit_ms)]
    k = 0
    for t in moments:
        while k < len(done) and done[k].committed_ms <= t:
            k += 1
        window = done[max(0, k - SETTLE_BATCHES):k]
        before = done[max(0, k - 2 * SETTLE_BATCHES):max(0, k - SETTLE_BATCHES)]
        if settled(window, before):
            first, last = window[0], window[-1]
            times = ", ".join(f"{d.duration_ms / 1000:.1f}" for d in window)
            return Warm(t, True, f"batch times settled over batches {_named(first)} to {_named(last)} "
                                 f"({times} s)")
    if now_ms is not None and now_ms < limit_ms:
        return None
    recent = done[max(0, k - SETTLE_BATCHES):k]
    times = ", ".join(f"{d.duration_ms / 1000:.1f}" for d in recent) or "none"
    return Warm(limit_ms, False, f"batch times had not settled by the warm-up's limit (the last batches "
                                 f"took {times} s)")


def _named(d: Done) -> str:
    return str(d.batch_id) if d.query == 0 else f"{d.batch_id} of query {d.query}"


def limit_ms(t0_ms: float, warmup_s: float, workload_s: float) -> float:
    """The latest the warm-up may end: a third of the workload, or the declared warm-up if longer."""
    return t0_ms + max(warmup_s, workload_s / LIMIT_SHARE) * 1000
