"""Anchors: which events carry a delivery report, and where every event landed in Kafka.

The generator picks every event's
partition, and the producer is idempotent, so a partition receives this process's messages
in produce order with no gap and no duplicate. Up to EXACT_UP_TO_EPS every message
carries a delivery callback, and its report gives its offset and append time. Above that
rate a Python callback per message costs about as much as producing the message
(confluent-kafka builds a Message object, copying key and value, for every report), so
only *anchors* carry one: the first message a partition gets, the last message of each
partition in each millisecond of the schedule, at most ANCHOR_EVERY messages apart, and the
last of each partition in each block. Every other event takes its offset by counting back
from the next anchor of its partition, and that anchor's append time: Kafka stamps a whole
batch with one append time, so this is the event's own or, when the two sat in different
batches, a later one (seen: up to 50 ms later). Ground truth's `reported` column says
which events had their own report.

The count is checked: two consecutive anchors of a partition must be exactly as many
offsets apart as messages were produced between them. A segment that fails (another
producer wrote into the partition meanwhile, or a message was lost) is not guessed at:
its events get offset -1 and count as unconfirmed, and the generator fails the run.
With the Sender's `every_report=True` (several processes share the partitions, so segments would
interleave) every message is an anchor and nothing is inferred.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workloads.generator.plan import Block

ANCHOR_SLOT_US = 1000  # an anchor closes each partition's events of each millisecond of the schedule
ANCHOR_EVERY = 256     # and at least every this many events of a partition
EXACT_UP_TO_EPS = 50_000  # blocks scheduled at up to this rate report every message


@dataclass
class Prepared:
    """A block with its Kafka keys, values and partitions as Python lists, ready to send; each
    event's position among the block's events of its partition, and which events are anchors
    (carry a delivery callback). Made by `prepare()`, off the sending thread."""

    block: Block
    keys: list
    values: list
    partitions: list
    rank: np.ndarray
    anchors: np.ndarray
    headers: list | None = None   # each message's Kafka headers (a replay's record id), or none


def prepare(block: Block, keys: list, values: list) -> Prepared:
    part = block.partition
    by = _by_partition(part)
    return Prepared(block, keys, values, part.tolist(), partition_rank(part, by),
                    anchor_mask(part, block.intended_us, by))


def _by_partition(partition: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The stable order that sorts events by partition, the sorted partitions, and each sorted
    event's position within its partition."""
    order = np.argsort(partition, kind="stable")
    p = partition[order]
    return order, p, np.arange(len(p)) - np.searchsorted(p, p)


def partition_rank(partition: np.ndarray, by: tuple | None = None) -> np.ndarray:
    """Each event's position among the events of its partition, in send order."""
    order, _, rank_sorted = by or _by_partition(partition)
    rank = np.empty(len(partition), dtype=np.int64)
    rank[order] = rank_sorted
    return rank


def anchor_mask(partition: np.ndarray, intended_us: np.ndarray, by: tuple | None = None) -> np.ndarray:
    """The anchors of a block in send order: every event when the block's schedule runs at up
    to EXACT_UP_TO_EPS; else the last event of each partition in each ANCHOR_SLOT_US of the
    schedule, every ANCHOR_EVERY-th event of a partition, and so the last event of each
    partition in the block."""
    n = len(partition)
    span_s = (int(intended_us[-1]) - int(intended_us[0])) / 1e6 if n else 0.0
    if n - 1 <= EXACT_UP_TO_EPS * span_s:   # n events, n - 1 intervals
        return np.ones(n, dtype=bool)
    order, p, rank = by or _by_partition(partition)
    slot = intended_us[order] // ANCHOR_SLOT_US
    closes = np.ones(n, dtype=bool)
    closes[:-1] = (p[1:] != p[:-1]) | (slot[1:] != slot[:-1])
    mask = np.empty(n, dtype=bool)
    mask[order] = closes | (rank % ANCHOR_EVERY == ANCHOR_EVERY - 1)
    return mask


class Locator:
    """Places the events of delivered blocks, in send order: offsets, append times and whether
    they are confirmed (see `locate`). Keeps each partition's last anchor between blocks."""

    def __init__(self, partitions: int):
        self.last = [(-1, -1)] * partitions    # (seq, offset) of each partition's last anchor
        self.failed = 0                        # events whose place in Kafka is not confirmed
        self.errors: list[str] = []

    def place(self, parts: np.ndarray, seq: np.ndarray, reports: dict[int, np.ndarray]):
        """offset and append_ms of every event of a block; -1 for unconfirmed events."""
        offset = np.full(len(parts), -1, dtype=np.int64)
        append = np.full(len(parts), -1, dtype=np.int64)
        for p, anchor in reports.items():
            where = np.flatnonzero(parts == p)
            offset[where], append[where], gaps = locate(seq[where], anchor, self.last[p])
            self.last[p] = (int(anchor[-1, 0]), int(anchor[-1, 1]))
            self.failed += int((offset[where] < 0).sum())
            self.errors += [_gap_message(p, *gap) for gap in gaps][:max(0, 5 - len(self.errors))]
        return offset, append


def _gap_message(partition: int, first: int, last: int, lo: int, hi: int) -> str:
    return (f"partition {partition}: offsets {lo}..{hi} hold {hi - lo + 1:,} records where this generator "
            f"sent {last - first + 1:,} (its messages {first}..{last} to the partition): another producer "
            "wrote into the partition meanwhile, or records were lost")


def locate(seq: np.ndarray, anchor: np.ndarray, last: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, list]:
    """Offsets and append times of one partition's events from its anchors' reports.

    `seq`: the events' indices among the messages produced to the partition, ascending, the
    last of them an anchor. `anchor`: rows (seq, offset, append_ms) of the anchors reported
    for them, in order, offset -1 for a failed one. `last`: (seq, offset) of the anchor before
    these, (-1, -1) at the start. An event takes the next anchor at or after it: offset counted
    back from the anchor's, the anchor's append time. An anchor's segment (the events after
    the previous anchor, up to it) is confirmed when the anchor was reported and the segment
    is the anchor alone, or spans exactly as many offsets as it holds messages; the events of
    other segments get -1. Returns offset, append_ms and the gaps: (first seq, last seq,
    first offset, last offset) of segments whose offsets disagree with their counts.
    """
    prev_seq = np.concatenate([[last[0]], anchor[:-1, 0]])
    prev_off = np.concatenate([[last[1]], anchor[:-1, 1]])
    size = anchor[:, 0] - prev_seq
    reported = anchor[:, 1] >= 0
    ok = reported & ((size == 1) | ((prev_off >= 0) & (anchor[:, 1] - prev_off == size)))
    j = np.searchsorted(anchor[:, 0], seq)
    good = ok[j]
    offset = np.where(good, anchor[j, 1] - (anchor[j, 0] - seq), -1)
    append = np.where(good, anchor[j, 2], -1)
    bad = np.flatnonzero(~ok & reported & (prev_off >= 0))
    gaps = [(int(prev_seq[b]) + 1, int(anchor[b, 0]), int(prev_off[b]) + 1, int(anchor[b, 1])) for b in bad]
    return offset, append, gaps
