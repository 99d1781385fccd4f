"""When each record is sent: its place in the pace (a rate shape's, or the recorded event
time's at `speed`), then the workload's delay on top, in send order.

    Pacer(spec, start_ms).blocks(records) -> iterator of Paced, in send order

The k-th record of the file takes the k-th send time of the rate shape; at `speed`, a record
is due when the recorded event time, running ahead in file order, reaches its own running
maximum: (running max - first event time) / speed after the start. Either way the file's
order is the send order, out-of-order records and all. `[workload.delay]` then delays each
record by a draw of its distribution, and `late_share` of them by `late_by` more (marked
late_by_design), from one generator seeded by the workload's seed: the same file and seed
give the same send order. A delayed record waits in a pool until its time comes, so a block
goes out in send-time order, and no record ever goes before one due earlier.

Blocks cover at most BLOCK_S of the schedule, so that past the duration a sender can stop
between two of them (the harness's open-ended workload) without overshooting.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from workloads.generator import delays, shapes
from workloads.replay.records import Records

BLOCK_S = 1.0


@dataclass(frozen=True)
class Paced:
    """Records in send order, each with its row number, send time and partition."""

    row: np.ndarray            # int64: the record's row in the file (its id)
    values: list[bytes]
    keys: list[str] | None
    event_time_ms: np.ndarray  # int64
    nominal_us: np.ndarray     # int64 epoch µs: its place in the pace, before the delay
    intended_us: np.ndarray    # int64 epoch µs: when it is due, the delay included
    late: np.ndarray           # bool: sent late_by later by design
    partition: np.ndarray      # int32

    def __len__(self) -> int:
        return len(self.row)


class Pacer:
    """The send times of one replay workload from `start_ms` (a ReplaySpec)."""

    def __init__(self, spec, start_ms: int, horizon_s: float | None = None):
        self.spec, self.start_us = spec, start_ms * 1000
        self.horizon_s = max(spec.duration_s, horizon_s or spec.duration_s)
        self.rng = np.random.default_rng(spec.seed)
        self.pool: Paced | None = None
        self._offsets = _Offsets(spec, self.horizon_s) if spec.speed is None else None
        self._first_ms: int | None = None
        self._running_ms = np.iinfo(np.int64).min

    def blocks(self, records: Iterable[Records]) -> Iterator[Paced]:
        for block in records:
            nominal_s = self._nominal_s(block)
            keep = nominal_s <= self.horizon_s
            for part in self._cut(block, nominal_s, keep):
                yield from self._due(part)
            if not keep.all():
                break
        if self.pool is not None and len(self.pool):
            yield self._sorted(self.pool)

    def _nominal_s(self, block: Records) -> np.ndarray:
        """Each record's place in the pace, in seconds from the start (inf: beyond the schedule)."""
        n = len(block)
        if self.spec.speed is None:
            assert self._offsets is not None
            got = self._offsets.take(n)
            return np.concatenate([got, np.full(n - len(got), np.inf)])
        t = block.event_time_ms
        if self._first_ms is None and n:
            self._first_ms = int(t[0])
        running = np.maximum.accumulate(np.maximum(t, self._running_ms))
        self._running_ms = int(running[-1]) if n else self._running_ms
        return (running - (self._first_ms or 0)) / 1000.0 / self.spec.speed

    def _cut(self, block: Records, nominal_s: np.ndarray, keep: np.ndarray) -> Iterator[Paced]:
        """The kept records as Paced parts of at most BLOCK_S of the schedule each."""
        n = int(keep.sum())   # nominal times never go back: the kept ones are a prefix
        if not n:
            return
        rows = np.arange(block.first_row, block.first_row + n, dtype=np.int64)
        nominal_us = self.start_us + np.round(nominal_s[:n] * 1e6).astype(np.int64)
        extra_ms = delays.draw(self.spec.delay, self.rng, n)
        late = delays.late_mask(self.spec.delay, self.rng, n)
        extra_ms = extra_ms + np.where(late, self.spec.delay.late_by_ms, 0)
        intended = nominal_us + np.round(extra_ms * 1000).astype(np.int64)
        if self.spec.delay.distribution == "groups":
            intended = _shuffled(intended, self.spec.delay.group_size, self.rng)
        partition = self._partitions(block.keys[:n] if block.keys is not None else None, rows)
        slot = (nominal_s[:n] // BLOCK_S).astype(np.int64)
        edges = np.flatnonzero(np.diff(slot)) + 1
        for a, b in zip(np.concatenate([[0], edges]), np.concatenate([edges, [n]]), strict=True):
            yield Paced(rows[a:b], block.values[a:b], None if block.keys is None else block.keys[a:b],
                        block.event_time_ms[a:b], nominal_us[a:b], intended[a:b], late[a:b], partition[a:b])

    def _partitions(self, keys: list[str] | None, rows: np.ndarray) -> np.ndarray:
        """A key's hash mod the partitions (the same key, the same partition, run after run);
        without a key, the records in turn."""
        count = self.spec.partitions
        if keys is None:
            return (rows % count).astype(np.int32)
        return partition_of(keys, count)

    def _due(self, part: Paced) -> Iterator[Paced]:
        """The part and the pool's records due by the part's last place in the pace, in send
        order; the rest wait in the pool (a later part is never due before that place)."""
        cut = int(part.nominal_us.max())
        if (self.pool is None or not len(self.pool)) and int(part.intended_us.max()) <= cut \
                and bool((np.diff(part.intended_us) >= 0).all()):
            yield part   # no delay: the file's order is the send order
            return
        merged = part if self.pool is None else _concat([self.pool, part])
        now = merged.intended_us <= cut
        self.pool = _take(merged, ~now)
        if now.any():
            yield self._sorted(_take(merged, now))

    @staticmethod
    def _sorted(p: Paced) -> Paced:
        return _take(p, np.argsort(p.intended_us, kind="stable"))


def partition_of(keys: list[str], partitions: int) -> np.ndarray:
    """The partition of each key: a stable 64-bit hash of its text (pandas' SipHash) mod
    `partitions`."""
    import pandas as pd

    hashed = pd.util.hash_array(np.asarray(keys, dtype=object), categorize=False)
    return (hashed % np.uint64(partitions)).astype(np.int32)


class _Offsets:
    """A rate shape's send offsets (seconds), handed out `n` at a time: the duration's, then its
    continuation up to the horizon."""

    def __init__(self, spec, horizon_s: float):
        self._arrays = self._schedule(spec, horizon_s)
        self._rest = np.empty(0)

    @staticmethod
    def _schedule(spec, horizon_s: float) -> Iterator[np.ndarray]:
        yield from shapes.schedule(spec.shape)
        if horizon_s > spec.duration_s:
            yield from shapes.schedule(spec.rate, start_s=spec.duration_s, end_s=horizon_s)

    def take(self, n: int) -> np.ndarray:
        parts, have = [self._rest], len(self._rest)
        while have < n:
            a = next(self._arrays, None)
            if a is None:
                break
            parts.append(a)
            have += len(a)
        joined = np.concatenate(parts)
        self._rest = joined[n:]
        return joined[:n]


def _shuffled(values: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    full = len(values) // size * size
    head = delays.shuffle_groups(values[:full], size, rng)
    return np.concatenate([head, rng.permutation(values[full:])])


def _take(p: Paced, which: np.ndarray) -> Paced:
    index = np.flatnonzero(which) if which.dtype == bool else which
    pick = index.tolist()
    return Paced(p.row[index], [p.values[i] for i in pick],
                 None if p.keys is None else [p.keys[i] for i in pick], p.event_time_ms[index],
                 p.nominal_us[index], p.intended_us[index], p.late[index], p.partition[index])


def _concat(parts: list[Paced]) -> Paced:
    def joined(name: str) -> np.ndarray:
        return np.concatenate([getattr(p, name) for p in parts])

    keys = None if parts[0].keys is None else [k for p in parts for k in (p.keys or [])]
    return Paced(joined("row"), [v for p in parts for v in p.values], keys, joined("event_time_ms"),
                 joined("nominal_us"), joined("intended_us"), joined("late"), joined("partition"))
