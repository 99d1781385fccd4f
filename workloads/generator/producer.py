"""The hot path: send prepared blocks open-loop with confluent-kafka.

Open loop: an event is sent when its intended time has come and never waits for the
system under test. When the sender falls behind (the broker pushes back or the client
cannot keep up) it sends what is due at once, and the slip (actual minus intended send
time) shows it in the histogram; it never stretches the schedule.

Only the anchors of each block (workloads.generator.anchors) carry a delivery callback; the Sender
collects their reports and hands each block on with them once all are in.

A topic can gain partitions while the generator runs. librdkafka knows only the partitions of
its cached metadata (refreshed every topic.metadata.refresh.interval.ms, 5 minutes by default)
and fails a message to any other at once ("Local: Unknown partition"), so before its first
message to a partition it has not seen, the Sender refreshes the metadata until the partition
is there.
"""

from __future__ import annotations

import logging
import time
from array import array
from collections import deque
from collections.abc import Callable

import numpy as np

from workloads.errors import Problem
from workloads.generator.anchors import Prepared
from workloads.generator.histogram import LogHistogram

TICK_US = 100_000      # how often the progress callback runs while sending
# the shortest sleep between sends: events falling due meanwhile go out together on waking.
# Waking for each event (every 167 us at 6,000 events/s) cost the harness a quarter of a core
# on a 2-core machine that the query under test needed; the slip it adds (at most this) is
# in the slip histogram, and latency counts from the intended time anyway
PACE_QUANTUM_S = 0.001
MAX_BURST = 2048       # events sent between two clock reads and delivery-report polls
PARTITIONS_TIMEOUT_S = 30.0   # how long a partition added mid-run may take to show in the metadata
METADATA_BACKOFF_S = 0.1      # between two metadata requests while waiting for it
_RAMP = np.arange(MAX_BURST, dtype=np.int64)
PRODUCER_CONFIG = {
    "enable.idempotence": True,         # acks=all, no duplicates, per-partition order
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    # librdkafka's default from 2.10 on, stated for the 2.9 client held in pyproject.toml
    # (Nagle would hold small produce requests back)
    "socket.nagle.disable": True,
    # the one broker is local: after a restart, retry its address within a second, not 10 s
    "reconnect.backoff.max.ms": 1000,
}


# librdkafka's own log lines (such as the idempotent producer's "Coordinator load in progress"
# while the broker warms up) go to this logger: into the harness's log file, never onto the
# console on their own (the NullHandler keeps Python's last-resort handler from printing them)
CLIENT_LOG = logging.getLogger("workloads.librdkafka")
CLIENT_LOG.addHandler(logging.NullHandler())


def make_producer(bootstrap_servers: str, on_delivery=None, **overrides):
    from confluent_kafka import Producer

    config = {"bootstrap.servers": bootstrap_servers, "logger": CLIENT_LOG, **PRODUCER_CONFIG, **overrides}
    if on_delivery is not None:
        config["on_delivery"] = on_delivery
    return Producer(config)


class Sender:
    """Sends Prepared blocks on schedule; `finished()` yields blocks once all their anchors are
    reported, with those reports, for a Locator to place every event (off this thread)."""

    def __init__(self, bootstrap_servers: str, topic: str, partitions: int, pace: bool = True,
                 on_tick: Callable[[int], None] | None = None, every_report: bool = False,
                 partitions_timeout_s: float = PARTITIONS_TIMEOUT_S):
        """`partitions`: the most partitions it sends to. `on_tick(events produced so far)` is
        called about every TICK_US while sending; an exception it raises stops the sending.
        `every_report` makes every message an anchor. `partitions_timeout_s`: how long to wait
        for a partition that is not in the client's metadata yet."""
        self.topic, self.pace, self.on_tick, self.every_report = topic, pace, on_tick, every_report
        self.partitions_timeout_s = partitions_timeout_s
        self.known = 0     # partitions of the topic in the client's metadata (see `learn_partitions`)
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
        self.acked_us: int | None = None   # when the last report arrived (finished(wait=True))
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
        callbacks: list
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
        unknown = self._first_unknown(parts_np, 0)   # n unless the topic gains partitions mid-run
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
            if end > unknown:   # the burst reaches a partition the client has not seen
                if i == unknown:
                    self.learn_partitions(int(parts_np[i]) + 1)
                    unknown = self._first_unknown(parts_np, i)
                    continue
                end = unknown
            if prepared.headers is None:
                for v, k, p, c in zip(values[i:end], keys[i:end], parts[i:end], callbacks[i:end],
                                      strict=True):
                    try:
                        produce(topic, v, k, p, c)
                    except BufferError:
                        self._produce_when_room(v, k, p, c)
            else:   # headers cost a keyword argument each: only the messages that have them pay it
                for v, k, p, c, h in zip(values[i:end], keys[i:end], parts[i:end], callbacks[i:end],
                                         prepared.headers[i:end], strict=True):
                    try:
                        produce(topic, v, k, p, c, headers=h)
                    except BufferError:
                        self._produce_when_room(v, k, p, c, h)
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

    def _first_unknown(self, parts: np.ndarray, start: int) -> int:
        """Where the first event from `start` on to a partition beyond the client's metadata is;
        len(parts) when there is none."""
        if self.known >= len(self.sent_to):
            return len(parts)
        beyond = np.flatnonzero(parts[start:] >= self.known)
        return start + int(beyond[0]) if len(beyond) else len(parts)

    def learn_partitions(self, count: int, timeout_s: float | None = None) -> None:
        """Refresh the client's metadata until the topic has at least `count` partitions, serving
        delivery reports meanwhile; raise Problem when it has not within `timeout_s` (by default
        the Sender's `partitions_timeout_s`)."""
        from confluent_kafka import KafkaException

        timeout_s = self.partitions_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            try:   # a request for the topic by name: librdkafka updates its cache from the answer
                md = self.producer.list_topics(self.topic, timeout=min(max(left, 0.1), 5.0))
                found = md.topics.get(self.topic)
            except KafkaException:
                found = None
            if found is not None and found.error is None:
                self.known = max(self.known, len(found.partitions))
            if self.known >= count:
                return
            if left <= 0:
                raise Problem(f"topic {self.topic!r} has {self.known} partitions after {timeout_s:g} s "
                              f"of waiting, but the workload now sends to partition {count - 1} "
                              f"(partitions_from: up to {len(self.sent_to)} partitions)",
                              "add the partitions before the generator's switch to them (the "
                              "kafka-partitions fault does, at its `at`), or give partitions_from the "
                              "fault's time and count")
            self.producer.poll(0)
            time.sleep(min(METADATA_BACKOFF_S, max(left, 0.0)))

    def _wait(self, wait_s: float) -> None:
        """Until the next event is due: serve delivery reports, then sleep (never spin: the
        system under test shares the machine)."""
        if wait_s > 0.002:
            self.producer.poll(min(wait_s - 0.001, 0.05))
        elif wait_s > 0:
            time.sleep(max(wait_s, PACE_QUANTUM_S))

    def _produce_when_room(self, value, key, partition, callback, headers=None) -> None:
        """librdkafka's queue is full: let it drain, then send (the slip records the wait)."""
        while True:
            self.producer.poll(0.005)
            try:
                self.producer.produce(self.topic, value, key, partition, callback, headers=headers)
                return
            except BufferError:
                continue

    def finished(self, wait: bool = False):
        """Blocks whose every anchor has been reported: (block, sent_us, seq, anchors, reports),
        `seq` each event's index among the messages sent to its partition, `reports` a dict from
        partition to the rows (seq, offset, append_ms) of its anchors in the block. With `wait`,
        first flush: every block comes out, and `acked_us` is when the last report arrived."""
        if wait:
            left = self.flush(60)
            self.acked_us = time.time_ns() // 1000
        while self.pending:
            prepared, sent_us, seq = self.pending[0]
            parts = prepared.block.partition
            need = np.bincount(parts[prepared.anchors], minlength=len(self.reports))
            if not self._reported(need):
                if wait:
                    raise Problem(f"Kafka has not acknowledged {left:,} messages within 60 s",
                                       "check that the broker is up and the topic exists")
                self.producer.poll(0)
                if not self._reported(need):
                    return
            self.pending.popleft()
            yield prepared.block, sent_us, seq, prepared.anchors, self._take(need)

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

    def flush(self, timeout_s: float) -> int:
        """Wait for outstanding deliveries, in half-second slices: a signal (Ctrl-C) is handled
        between slices, where one long flush would hold it off for the whole timeout.
        Returns how many messages are still unacknowledged."""
        deadline = time.monotonic() + timeout_s
        left = self.producer.flush(0)
        while left and time.monotonic() < deadline:
            left = self.producer.flush(min(0.5, max(0.0, deadline - time.monotonic())))
        return left

    def close(self, timeout_s: float = 60.0) -> None:
        """Flush and drop the producer now: its delivery callbacks refer back to this Sender, and
        it would otherwise keep polling Kafka until the cycle collector ran."""
        if self.producer is not None:
            self.flush(timeout_s)
            self.producer = None
