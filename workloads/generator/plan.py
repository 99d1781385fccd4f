"""The event plan: ids, keys, event times, intended send times and partitions, in blocks.

A plan is a pure function of the workload, its seed and the start time: the schedule
comes from the rate shape, every random draw is made block by block in a fixed order
from one seeded generator, and the partition is chosen here (rank mod partitions), not
by Kafka. So the same seed and start give the same sequence of
(event_id, key, event_time_ms, partition) whatever the machine's speed, and several
generator processes can each send their share of one plan (`share=(j, n)`: the events
with event_id mod n == j). For a topic that gains partitions mid-run, `partitions_from`
steps the count up: from each step's time on, events take rank mod the step's count.

Blocks hold at most BLOCK_EVENTS events, so a run of any length plans in bounded memory.

A planner with a `horizon_s` past the workload's duration plans on after it, up to the
horizon, as the rate shape goes on (shapes.py): the continuation of a harness run whose
faults have not all landed by then. Its blocks before the duration are the plan's own (the
same events, drawn in the same order, as without a horizon); after it, each block covers at
most EXTEND_BLOCK_S of the schedule, so that whoever sends them can stop between two blocks
(`extends()` tells those blocks apart) and never sends much more than it was asked to.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from workloads.errors import Problem
from workloads.generator import delays, shapes
from workloads.generator.keys import KeyChooser
from workloads.generator.spec import WorkloadSpec

BLOCK_EVENTS = 65_536
EXTEND_BLOCK_S = 1.0   # past the duration, a block covers at most this much of the schedule
EVENT_TYPES = ("view", "login", "login-failed", "order", "payment")
EVENT_TYPE_WEIGHTS = (0.55, 0.15, 0.05, 0.15, 0.10)
_COPIES_STREAM = 0xD0B   # seeds the re-sent copies' own random stream, beside the plan's seed


@dataclass(frozen=True)
class Block:
    """Column arrays of one block of events, in send order."""

    event_id: np.ndarray       # int64, dense over the whole plan
    key: np.ndarray            # int64 key rank (KeyChooser.names gives the string)
    event_time_ms: np.ndarray  # int64: when the event "happened"
    intended_us: np.ndarray    # int64 epoch microseconds: when the schedule sends it
    partition: np.ndarray      # int32
    late_by_design: np.ndarray  # bool
    user: np.ndarray           # int64
    item: np.ndarray           # int64
    amount: np.ndarray         # int64, 1..100
    event_type: np.ndarray     # int8 index into EVENT_TYPES

    def __len__(self) -> int:
        return len(self.event_id)

    def take(self, mask: np.ndarray) -> Block:
        return Block(*(getattr(self, f)[mask] for f in self.__dataclass_fields__))


def partition_steps(spec: WorkloadSpec, partitions_from: Sequence[tuple[float, int]]
                    ) -> tuple[tuple[float, int], ...]:
    """`partitions_from` checked: pairs (at_s, total) in order of at_s, meaning that events
    intended at_s or more after the start use `total` partitions. Kafka only ever adds
    partitions, so no total is below the workload's count or the step before. Raises Problem."""
    steps = tuple((float(at_s), int(total)) for at_s, total in partitions_from)
    fix = ("give pairs (seconds after the start, total partitions) in order of time, the totals "
           f"at least the workload's {spec.partitions} partitions and never decreasing")
    before = (0.0, spec.partitions)
    for at_s, total in steps:
        if not (math.isfinite(at_s) and at_s >= before[0] and total >= before[1]):
            raise Problem(f"partitions_from {list(partitions_from)}: step ({at_s:g}, {total}) comes "
                          f"after ({before[0]:g}, {before[1]})", fix)
        before = (at_s, total)
    return steps


def most_partitions(spec: WorkloadSpec, steps: Sequence[tuple[float, int]]) -> int:
    """The most partitions a plan sends to: what arrays indexed by partition are sized by."""
    return max([spec.partitions, *(total for _, total in steps)])


class Planner:
    """Iterates the blocks of one workload from `start_ms`; `partitions_from` as in
    `partition_steps`; `horizon_s` (at least the duration): plan on past the duration, up to
    it, in blocks of at most EXTEND_BLOCK_S."""

    def __init__(self, spec: WorkloadSpec, start_ms: int, share: tuple[int, int] = (0, 1),
                 partitions_from: Sequence[tuple[float, int]] = (), horizon_s: float | None = None):
        self.spec, self.start_ms, self.share = spec, start_ms, share
        self.horizon_s = max(spec.duration_s, horizon_s if horizon_s is not None else spec.duration_s)
        self.first_extension_id: int | None = None   # the first event id past the duration, once planned
        self.keys = KeyChooser(spec.keys)
        group = spec.delay.group_size if spec.delay.distribution == "groups" else 1
        self.block_events = BLOCK_EVENTS // group * group or group
        self.steps = partition_steps(spec, partitions_from)
        self.partitions = most_partitions(spec, self.steps)
        skew = np.asarray(spec.time.clock_skew_ms or (0,) * spec.partitions, dtype=np.int64)
        # partitions added mid-run have no clock skew of their own
        self.skew_ms = np.pad(skew, (0, self.partitions - len(skew)))
        self.type_cdf = np.cumsum(EVENT_TYPE_WEIGHTS)

    def __iter__(self) -> Iterator[Block]:
        rng = np.random.default_rng(self.spec.seed)
        # the copies draw from a stream of their own: the originals are those of the same plan
        # without duplicates, whatever the share
        copies_rng = np.random.default_rng((self.spec.seed, _COPIES_STREAM))
        next_id = 0
        pending: Block | None = None     # re-sent copies due after the block they were drawn in
        for extension, offsets_s in self._offsets():
            if extension and self.first_extension_id is None:
                self.first_extension_id = next_id   # set before any block of it is handed out
            block = self._block(rng, offsets_s, next_id)
            next_id += len(block)
            if self.spec.duplicates.share > 0 and len(block):
                block, pending = self._with_copies(copies_rng, block, pending)
            yield self._mine(block)
        if pending is not None and len(pending):
            yield self._mine(pending)

    def _offsets(self) -> Iterator[tuple[bool, np.ndarray]]:
        """The schedule's send offsets in blocks, each with whether it is past the duration: the
        duration's as ever, then, up to the horizon, the shape's continuation in blocks of at
        most EXTEND_BLOCK_S."""
        for offsets_s in _rebatch(shapes.schedule(self.spec.shape), self.block_events):
            yield False, offsets_s
        if self.horizon_s > self.spec.duration_s:
            more = shapes.schedule(self.spec.rate, start_s=self.spec.duration_s, end_s=self.horizon_s)
            for offsets_s in _rebatch(more, self.block_events, round(EXTEND_BLOCK_S / shapes.SLICE_S)):
                yield True, offsets_s

    def extends(self, block: Block) -> bool:
        """Whether `block` (handed out by this planner) is past the duration: it holds an event
        of the continuation (copies of earlier events may ride along; its newest id is one of
        the continuation's own)."""
        first = self.first_extension_id
        return first is not None and bool(len(block)) and int(block.event_id.max()) >= first

    def _mine(self, block: Block) -> Block:
        j, n = self.share
        return block if n == 1 else block.take(block.event_id % n == j)

    def _with_copies(self, rng: np.random.Generator, block: Block, pending: Block | None):
        """The block with the copies due by its last send time merged in, in send order, and
        the copies due later. A copy repeats its event (id, key, event time, fields, partition)
        `after` later."""
        dup = self.spec.duplicates
        copies = block.take(rng.random(len(block)) < dup.share)
        copies = Block(**{**_fields(copies), "intended_us": copies.intended_us + dup.after_ms * 1000})
        pool = copies if pending is None else concat([pending, copies])
        cut = block.intended_us[-1]
        merged = concat([block, pool.take(pool.intended_us <= cut)])
        merged = merged.take(np.argsort(merged.intended_us, kind="stable"))
        return merged, pool.take(pool.intended_us > cut)

    def _block(self, rng: np.random.Generator, offsets_s: np.ndarray, first_id: int) -> Block:
        spec, n = self.spec, len(offsets_s)
        # every draw has size n and happens in this order, whatever is kept afterwards
        rank = self.keys.draw(rng, n)
        delay_ms = delays.draw(spec.delay, rng, n)
        late = delays.late_mask(spec.delay, rng, n)
        user = rng.integers(0, spec.payload.users, n)
        item = rng.integers(0, spec.payload.items, n)
        amount = rng.integers(1, 101, n)
        event_type = np.searchsorted(self.type_cdf, rng.random(n) * self.type_cdf[-1], side="right")
        happened_ms = self.start_ms + offsets_s * 1000.0 * spec.time.dilation
        if spec.delay.distribution == "groups":
            happened_ms = _shuffle_groups(happened_ms, spec.delay.group_size, rng)
        partition = self._partition(rank, offsets_s)
        event_time = (np.floor(happened_ms - delay_ms).astype(np.int64)
                      - np.where(late, spec.delay.late_by_ms, 0) + self.skew_ms[partition])
        intended_us = self.start_ms * 1000 + np.round(offsets_s * 1e6).astype(np.int64)
        keep = self._not_idle(partition, offsets_s)
        kept = int(keep.sum())
        return Block(event_id=np.arange(first_id, first_id + kept, dtype=np.int64),
                     key=rank[keep], event_time_ms=event_time[keep], intended_us=intended_us[keep],
                     partition=partition[keep], late_by_design=late[keep], user=user[keep],
                     item=item[keep], amount=amount[keep], event_type=event_type[keep].astype(np.int8))

    def _partition(self, rank: np.ndarray, offsets_s: np.ndarray) -> np.ndarray:
        """rank mod the partition count in force at each event's intended send time."""
        if not self.steps:
            return (rank % self.spec.partitions).astype(np.int32)
        count = np.full(len(rank), self.spec.partitions, dtype=np.int64)
        for at_s, total in self.steps:   # in order of time: a later step overrides
            count[offsets_s >= at_s] = total
        return (rank % count).astype(np.int32)

    def _not_idle(self, partition: np.ndarray, offsets_s: np.ndarray) -> np.ndarray:
        keep = np.ones(len(partition), dtype=bool)
        for idle in self.spec.time.idle:
            keep &= ~((partition == idle.partition) & (offsets_s >= idle.from_s)
                      & (offsets_s < idle.from_s + idle.for_s))
        return keep


def _shuffle_groups(values: np.ndarray, group_size: int, rng: np.random.Generator) -> np.ndarray:
    full = len(values) // group_size * group_size
    head = delays.shuffle_groups(values[:full], group_size, rng)
    tail = rng.permutation(values[full:])  # the run's last, partial group
    return np.concatenate([head, tail])


def _rebatch(slices, size: int, slices_per_block: int | None = None) -> Iterator[np.ndarray]:
    """Arrays of exactly `size` items (the last may be shorter) from arrays of any size; with
    `slices_per_block`, also cut after every that many input arrays (one per slice of the
    schedule: a block then covers at most that much time)."""
    pending: list[np.ndarray] = []
    count = 0
    for k, a in enumerate(slices):
        if slices_per_block and k and k % slices_per_block == 0 and count:
            yield np.concatenate(pending)
            pending, count = [], 0
        if not len(a):
            continue
        pending.append(a)
        count += len(a)
        while count >= size:
            joined = np.concatenate(pending)
            yield joined[:size]
            pending, count = [joined[size:]], count - size
    if count:
        yield np.concatenate(pending)


def _fields(block: Block) -> dict[str, np.ndarray]:
    return {f: getattr(block, f) for f in Block.__dataclass_fields__}


def concat(blocks: list[Block]) -> Block:
    if not blocks:
        return Block(*(np.empty(0, dtype=np.int64) for _ in Block.__dataclass_fields__))
    return Block(*(np.concatenate([getattr(b, f) for b in blocks]) for f in Block.__dataclass_fields__))


def plan_all(spec: WorkloadSpec, start_ms: int, partitions_from: Sequence[tuple[float, int]] = ()) -> Block:
    """The whole plan as one block (for tests and previews of small workloads)."""
    return concat(list(Planner(spec, start_ms, partitions_from=partitions_from)))
