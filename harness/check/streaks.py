"""The oracle of `streak_count`: its processor's rule mirrored batch by batch, with its state TTL.

Each committed batch reads its events (by the offset log's ranges); per user, in event_id
order, each is numbered on from the user's count. A count lives `ttl` after the batch that set
it, by the batches' own timestamps (the offset log's batchTimestampMs: a batch run again after a
failure keeps its first one, so it counts as it did): in a batch whose timestamp has reached a
count's expiry the count is gone, and the user's next event is 1 again. Spark 4.2 takes a value
as expired once the batch's timestamp is at or past its expiry (`expired`). A fresh checkpoint
(an at-most-once restart) starts with no count.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from harness.check import rows
from harness.check.batch_reads import by_batch, committed_in_order
from harness.check.checkpoint import Batch
from harness.check.result import CheckResult
from workloads.pipelines.streak_count import COLUMNS

KEY = ["event_id", "n"]   # a re-sent copy is numbered again: each copy its own row


@dataclass
class Counts:
    """What the state holds after a batch: user -> (count, its expiry in ms, the batch that set it)."""

    held: dict[int, tuple[int, int, int]] = field(default_factory=dict)


def expired(expires_ms: int, timestamp_ms: int) -> bool:
    """Whether a value with a processing-time TTL is gone for a batch whose timestamp is
    `timestamp_ms`: once the timestamp has reached its expiry."""
    return expires_ms <= timestamp_ms


def timestamp(batch: Batch) -> int:
    if batch.timestamp_ms is None:
        raise ValueError(f"batch {batch.batch_id}'s offset log keeps no batchTimestampMs: the state TTL "
                         "cannot be followed without it")
    return batch.timestamp_ms


def mirror(truth: pd.DataFrame, batches: list[Batch], ttl_ms: int,
           until: int | None = None) -> tuple[pd.DataFrame, Counts]:
    """(the rows the query writes, with the batch that wrote each; the counts after batch
    `until`, or after the last committed batch)."""
    read_by = by_batch(truth[~truth["control"]], batches)
    state, out = Counts(), []
    for batch, fresh in committed_in_order(batches, until):
        if fresh:
            state = Counts()
        now = timestamp(batch)
        # gone for this batch's reads, and removed by it
        state.held = {u: c for u, c in state.held.items() if not expired(c[1], now)}
        read = read_by.get(batch.batch_id)
        if read is None:
            continue
        for user, group in read.groupby("user", sort=False):
            n = state.held.get(int(user), (0, 0, 0))[0]
            for event_id in sorted(int(e) for e in group["event_id"]):
                n += 1
                out.append((event_id, int(user), n, batch.batch_id))
            state.held[int(user)] = (n, now + ttl_ms, batch.batch_id)
    emitted = pd.DataFrame(out, columns=[*COLUMNS, "batch"]).astype("int64")
    return emitted, state


def state_after(truth: pd.DataFrame, batches: list[Batch], ttl_ms: int, batch: int) -> pd.DataFrame:
    """The count state after `batch` (the state check's model): user_id, n, expires_ms (when
    its TTL runs out), set_batch (the batch that last set it)."""
    held = mirror(truth, batches, ttl_ms, until=batch)[1].held
    return pd.DataFrame([(u, n, at, b) for u, (n, at, b) in sorted(held.items())],
                        columns=["user_id", "n", "expires_ms", "set_batch"]).astype("int64")


def check(truth: pd.DataFrame, sink: pd.DataFrame, batches: list[Batch], params: dict) -> CheckResult:
    emitted, _ = mirror(truth, batches, params["ttl_ms"])
    produced = int((~truth["control"]).sum())
    return rows.check(emitted.drop(columns="batch"), sink, KEY, produced, 0, time_col=None)


def final_watermark_ms(max_event_time_ms: int, params: dict) -> None:
    """No watermark: the output is final once the batches have read every offset."""
    return None
