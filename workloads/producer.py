"""The hot path: send prepared blocks open-loop with confluent-kafka, keep delivery reports.

Open loop: an event is sent when its intended time has come and never waits for the
system under test. When the sender falls behind (the broker pushes back or the client
cannot keep up) it sends what is due at once, and the slip (actual minus intended send
time) shows it in the histogram; it never stretches the schedule.

Partition and offset come from Kafka's delivery reports. The producer is idempotent,
so each partition's reports arrive in the order its messages were produced; the
i-th report of partition p belongs to the i-th event sent to p.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from harness.errors import HarnessError
from workloads.events import Block
from workloads.histogram import LogHistogram

TICK_US = 100_000      # how often the progress callback runs while sending
MAX_BURST = 2048       # events sent between two clock reads and delivery-report polls
PRODUCER_CONFIG = {
    "enable.idempotence": True,         # acks=all, no duplicates, per-partition order
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
}


@dataclass
class Prepared:
    """A block with its Kafka keys, values and partitions as Python lists, ready to send."""

    block: Block
    keys: list
    values: list
    partitions: list


def make_producer(bootstrap_servers: str, on_delivery=None, **overrides):
    from confluent_kafka import Producer

    config = {"bootstrap.servers": bootstrap_servers, **PRODUCER_CONFIG, **overrides}
    if on_delivery is not None:
        config["on_delivery"] = on_delivery
    return Producer(config)


class Sender:
    """Sends Prepared blocks on schedule; `finished()` yields blocks whose reports are all in."""

    def __init__(self, bootstrap_servers: str, topic: str, partitions: int, pace: bool = True,
                 on_tick: Callable[[int], None] | None = None):
        """`on_tick(events produced so far)` is called about every TICK_US while sending;
        an exception it raises stops the sending."""
        self.topic, self.pace, self.on_tick = topic, pace, on_tick
        self.produced = 0
        # delivery reports per partition, in produce order; cursor = the first not yet used
        self.offsets: list[list[int]] = [[] for _ in range(partitions)]
        self.append_ms: list[list[int]] = [[] for _ in range(partitions)]
        self.cursor = [0] * partitions
        self.errors: list[str] = []
        self.failed = 0
        self.slip = LogHistogram()
        self.pending: deque = deque()   # (Prepared, sent_us) awaiting delivery reports
        self.producer = make_producer(bootstrap_servers, self._on_delivery)

    def _on_delivery(self, err, msg) -> None:
        p = msg.partition()
        if err is None:
            self.offsets[p].append(msg.offset())
            self.append_ms[p].append(msg.timestamp()[1])
        else:
            self.failed += 1
            if len(self.errors) < 5:
                self.errors.append(str(err))
            self.offsets[p].append(-1)
            self.append_ms[p].append(-1)

    def send(self, prepared: Prepared) -> None:
        values, keys, parts = prepared.values, prepared.keys, prepared.partitions
        intended = prepared.block.intended_us
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
            for v, k, p in zip(values[i:end], keys[i:end], parts[i:end], strict=True):
                try:
                    produce(topic, v, k, p)
                except BufferError:
                    self._produce_when_room(v, k, p)
            after = time.time_ns() // 1000
            sent_us[i:end] = np.linspace(now, after, end - i, endpoint=False).astype(np.int64)
            poll(0)
            i = end
        self.produced += n
        if self.pace:
            self.slip.record(sent_us - intended)
        self.pending.append((prepared, sent_us))

    def _wait(self, wait_s: float) -> None:
        """Until the next event is due: serve delivery reports, then sleep (never spin: the
        system under test shares the machine)."""
        if wait_s > 0.002:
            self.producer.poll(min(wait_s - 0.001, 0.05))
        elif wait_s > 0:
            time.sleep(wait_s)

    def _produce_when_room(self, value, key, partition) -> None:
        """librdkafka's queue is full: let it drain, then send (the slip records the wait)."""
        while True:
            self.producer.poll(0.005)
            try:
                self.producer.produce(self.topic, value, key, partition)
                return
            except BufferError:
                continue

    def finished(self, wait: bool = False):
        """Blocks whose every delivery report has arrived: (block, sent_us, offset, append_ms)."""
        while self.pending:
            prepared, sent_us = self.pending[0]
            parts = prepared.block.partition
            need = np.bincount(parts, minlength=len(self.offsets))
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
            offset = np.empty(len(parts), dtype=np.int64)
            append = np.empty(len(parts), dtype=np.int64)
            for p in np.flatnonzero(need):
                where = np.flatnonzero(parts == p)
                c, k = self.cursor[p], len(where)
                offset[where] = self.offsets[p][c:c + k]
                append[where] = self.append_ms[p][c:c + k]
                self.cursor[p] = c + k
                if c + k > 1_000_000:   # drop what is used, so memory stays bounded
                    del self.offsets[p][:c + k], self.append_ms[p][:c + k]
                    self.cursor[p] = 0
            yield prepared.block, sent_us, offset, append

    def _reported(self, need: np.ndarray) -> bool:
        return all(len(q) - c >= k for q, c, k in zip(self.offsets, self.cursor, need, strict=True))

    def close(self) -> None:
        """Flush and drop the producer now: it refers back to this Sender through its delivery
        callback, and would otherwise keep polling Kafka until the cycle collector ran."""
        if self.producer is not None:
            self.producer.flush(60)
            self.producer = None
