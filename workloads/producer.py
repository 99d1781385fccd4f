"""The hot path: send prepared blocks open-loop with confluent-kafka; locate every event in Kafka.

Open loop: an event is sent when its intended time has come and never waits for the
system under test. When the sender falls behind (the broker pushes back or the client
cannot keep up) it sends what is due at once, and the slip (actual minus intended send
time) shows it in the histogram; it never stretches the schedule.

Where each event landed, from a few delivery reports. The generator picks every event's
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
With `every_report=True` (several processes share the partitions, so segments would
interleave) every message is an anchor and nothing is inferred.
"""

from __future__ import annotations

import time
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from harness.errors import HarnessError
from workloads.events import Block
from workloads.histogram import LogHistogram

TICK_US = 100_000      # how often the progress callback runs while sending
MAX_BURST = 2048       # events sent between two clock reads and delivery-report polls
ANCHOR_SLOT_US = 1000  # an anchor closes each partition's events of each millisecond of the schedule
ANCHOR_EVERY = 256     # and at least every this many events of a partition
EXACT_UP_TO_EPS = 50_000  # blocks scheduled at up to this rate report every message
_RAMP = np.arange(MAX_BURST, dtype=np.int64)
PRODUCER_CONFIG = {
    "enable.idempotence": True,         # acks=all, no duplicates, per-partition order
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
}


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


def make_producer(bootstrap_servers: str, on_delivery=None, **overrides):
    from confluent_kafka import Producer

    config = {"bootstrap.servers": bootstrap_servers, **PRODUCER_CONFIG, **overrides}
    if on_delivery is not None:
        config["on_delivery"] = on_delivery
    return Producer(config)


class Sender:
    """Sends Prepared blocks on schedule; `finished()` yields blocks once all their anchors are
    reported, with those reports, for a Locator to place every event (off this thread)."""

    def __init__(self, bootstrap_servers: str, topic: str, partitions: int, pace: bool = True,
                 on_tick: Callable[[int], None] | None = None, every_report: bool = False):
        """`on_tick(events produced so far)` is called about every TICK_US while sending;
        an exception it raises stops the sending. `every_report` makes every message an anchor."""
        self.topic, self.pace, self.on_tick, self.every_report = topic, pace, on_tick, every_report
        self.produced = 0
        self.sent_to = np.zeros(partitions, dtype=np.int64)   # messages produced to each partition
        self.expect: list[deque] = [deque() for _ in range(partitions)]  # anchor seqs awaiting reports
        # seq, offset, append_ms of each reported anchor, flat, in order: plain int64 arrays, not
        # tuples, which the cyclic GC would walk again and again while they wait to be used
        self.reports = [array("q") for _ in range(partitions)]
        self.cursor = [0] * partitions                         # the first report (row of 3) not yet used
        self.errors: list[str] = []
        self.slip = LogHistogram()
        self.first_sent_us: int | None = None
        self.acked_us: int | None = None   # when the last report arrived (set by finished(wait=True))
        self.pending: deque = deque()      # (Prepared, sent_us, seq) awaiting anchor reports
        self.producer = make_producer(bootstrap_servers)  # no default callback: only anchors get one

    def _on_delivery(self, err, msg) -> None:
        p = msg.partition()
        seq = self.expect[p].popleft()
        if err is None:
            self.reports[p].extend((seq, msg.offset(), msg.timestamp()[1]))
        else:
            if len(self.errors) < 5:
                self.errors.append(str(err))
            self.reports[p].extend((seq, -1, -1))

    def _callbacks(self, prepared: Prepared, seq: np.ndarray) -> list:
        """The per-message callback argument: ours for anchors (and a partition's first message
        ever), None for the rest; their seqs queued for `_on_delivery`."""
        parts = prepared.block.partition
        n, cb = len(parts), self._on_delivery
        if self.every_report:
            anchors = np.ones(n, dtype=bool)
            callbacks = [cb] * n
        else:
            anchors = prepared.anchors | (seq == 0)
            callbacks = [None] * n
        prepared.anchors = anchors
        where = np.flatnonzero(anchors)
        for i, p, s in zip(where.tolist(), parts[where].tolist(), seq[where].tolist(), strict=True):
            self.expect[p].append(s)
            callbacks[i] = cb
        return callbacks

    def send(self, prepared: Prepared) -> None:
        values, keys, parts = prepared.values, prepared.keys, prepared.partitions
        intended = prepared.block.intended_us
        parts_np = prepared.block.partition
        seq = self.sent_to[parts_np] + prepared.rank   # index among all messages sent to the partition
        self.sent_to += np.bincount(parts_np, minlength=len(self.sent_to))
        callbacks = self._callbacks(prepared, seq)
        n = len(values)
        sent_us = np.empty(n, dtype=np.int64)
        produce, poll, topic = self.producer.produce, self.producer.poll, self.topic
        i = 0
        last_tick = time.time_ns() // 1000
        while i < n:
            now = time.time_ns() // 1000
            if self.on_tick is not None and now - last_tick >= TICK_US:
                last_tick = now
                self.on_tick(self.produced + i)
            if self.pace:
                due = int(np.searchsorted(intended, now, side="right"))
                if due <= i:
                    self._wait((int(intended[i]) - now) / 1e6)
                    continue
                end = min(due, i + MAX_BURST)
            else:
                end = min(n, i + MAX_BURST)
            for v, k, p, c in zip(values[i:end], keys[i:end], parts[i:end], callbacks[i:end], strict=True):
                try:
                    produce(topic, v, k, p, c)
                except BufferError:
                    self._produce_when_room(v, k, p, c)
            after = time.time_ns() // 1000
            sent_us[i:end] = now + _RAMP[:end - i] * (after - now) // (end - i)   # spread over the burst
            poll(0)
            i = end
        self.produced += n
        if n and self.first_sent_us is None:
            self.first_sent_us = int(sent_us[0])
        if self.pace:
            self.slip.record(sent_us - intended)
        self.pending.append((prepared, sent_us, seq))

    def _wait(self, wait_s: float) -> None:
        """Until the next event is due: serve delivery reports, then sleep (never spin: the
        system under test shares the machine)."""
        if wait_s > 0.002:
            self.producer.poll(min(wait_s - 0.001, 0.05))
        elif wait_s > 0:
            time.sleep(wait_s)

    def _produce_when_room(self, value, key, partition, callback) -> None:
        """librdkafka's queue is full: let it drain, then send (the slip records the wait)."""
        while True:
            self.producer.poll(0.005)
            try:
                self.producer.produce(self.topic, value, key, partition, callback)
                return
            except BufferError:
                continue

    def finished(self, wait: bool = False):
        """Blocks whose every anchor has been reported: (block, sent_us, seq, anchors, reports),
        `seq` each event's index among the messages sent to its partition, `reports` a dict from
        partition to the rows (seq, offset, append_ms) of its anchors in the block."""
        while self.pending:
            prepared, sent_us, seq = self.pending[0]
            parts = prepared.block.partition
            need = np.bincount(parts[prepared.anchors], minlength=len(self.reports))
            while not self._reported(need):
                if not wait:
                    self.producer.poll(0)
                    if not self._reported(need):
                        return
                else:
                    left = self.producer.flush(60)
                    if not self._reported(need):
                        raise HarnessError(f"Kafka has not acknowledged {left:,} messages within 60 s",
                                           "check that the broker is up and the topic exists")
            self.pending.popleft()
            yield prepared.block, sent_us, seq, prepared.anchors, self._take(need)
        if wait:
            self.acked_us = time.time_ns() // 1000

    def _reported(self, need: np.ndarray) -> bool:
        return all(len(r) // 3 - c >= k for r, c, k in zip(self.reports, self.cursor, need, strict=True))

    def _take(self, need: np.ndarray) -> dict[int, np.ndarray]:
        reports = {}
        for p in np.flatnonzero(need).tolist():
            c, k = self.cursor[p], int(need[p])
            reports[p] = np.array(self.reports[p][3 * c:3 * (c + k)], dtype=np.int64).reshape(k, 3)
            self.cursor[p] = c + k
            if c + k > 100_000:   # drop what is used, so memory stays bounded
                del self.reports[p][:3 * (c + k)]
                self.cursor[p] = 0
        return reports

    def close(self) -> None:
        """Flush and drop the producer now: its delivery callbacks refer back to this Sender, and
        it would otherwise keep polling Kafka until the cycle collector ran."""
        if self.producer is not None:
            self.producer.flush(60)
            self.producer = None



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
