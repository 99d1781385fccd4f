"""The generator: plan -> encode -> send open-loop -> ground truth and a report.

Three threads, so the sending thread does little but call produce(): planning, encoding
and choosing anchors run a block ahead of it (a Feeder); placing each event from its
anchors' reports (a Locator), ground truth and the report's counts a block behind it (a
Drain). Their numpy, Arrow and Parquet kernels mostly run without the GIL.
`generate()` runs one process's share of a workload; `generate_parallel()` runs several
processes, each sending the events with event_id mod n == j of the same plan, and merges
their reports; their truth parts sit side by side in one truth directory.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from workloads import wire
from workloads.errors import Problem
from workloads.generator import nexmark, shapes, truth
from workloads.generator.anchors import Locator, prepare
from workloads.generator.encode import Encoder, encoder_for
from workloads.generator.histogram import LogHistogram
from workloads.generator.plan import Planner, most_partitions, partition_steps
from workloads.generator.producer import PARTITIONS_TIMEOUT_S, Sender, make_producer
from workloads.generator.spec import WorkloadSpec
from workloads.generator.stages import Drain, Feeder
from workloads.wire import CONTROL_KEY

START_LEAD_MS = 500   # the schedule starts this long after the call, once the client is connected


def create_topic(bootstrap_servers: str, topic: str, partitions: int, exist_ok: bool = False,
                 replication: int = 1) -> None:
    """Create `topic` with broker append timestamps (so record time = append time), replicated
    to `replication` brokers (from 3 on, a write needs 2 of them: min.insync.replicas).

    Admin work goes through kafka-python; only the hot path uses confluent-kafka."""
    from kafka.admin import NewTopic
    from kafka.errors import KafkaError, TopicAlreadyExistsError

    from workloads.kafka_admin import admin_client

    try:
        with admin_client(bootstrap_servers) as admin:
            configs = {"message.timestamp.type": "LogAppendTime"}
            if replication >= 3:
                configs["min.insync.replicas"] = "2"
            admin.create_topics([NewTopic(topic, partitions, replication, topic_configs=configs)])
    except TopicAlreadyExistsError:
        if not exist_ok:
            raise Problem(f"topic {topic!r} already exists on {bootstrap_servers}",
                          "give the run a fresh topic name or delete the topic") from None
    except KafkaError as exc:
        raise Problem(f"Kafka at {bootstrap_servers} did not create topic {topic!r}: {exc}",
                      "check --bootstrap-servers and that the broker is up") from None


def _prepared(planner: Planner, encoder: Encoder):
    """The blocks of the plan, encoded and with their anchors, ready for the sender."""
    for block in planner:
        yield prepare(block, encoder.keys_of(block), encoder.values(block))


def generate(spec: WorkloadSpec, bootstrap_servers: str, truth_dir: Path, *, topic: str | None = None,
             start_ms: int | None = None, share: tuple[int, int] = (0, 1), pace: bool = True,
             progress: Callable[[int, int], None] | None = None,
             partitions_from: Sequence[tuple[float, int]] = (),
             partitions_timeout_s: float = PARTITIONS_TIMEOUT_S,
             keep_going: Callable[[], bool] | None = None) -> dict:
    """Send this process's share of `spec` to Kafka; write its truth part; return its report.

    `progress(sent, planned)` is called about every 100 ms while sending (`planned`: the events
    of the duration); an exception it raises stops the run (the runner uses that to notice a
    dead driver).
    `keep_going()`: the workload is open-ended. After `spec.duration_s` it goes on, as its rate
    shape goes on, while keep_going() says so, asked before each block of at most
    plan.EXTEND_BLOCK_S, up to `spec.cap_s` (Jepsen's generator running while the nemesis
    schedule is pending). Events of the plan due after it stopped are never sent, so ground
    truth holds none of them; the report's `sent_for_s`, `extended_by_s` and `cut_at_cap` say
    how far it went.
    `partitions_from`: pairs (at_s, total partitions), in order of at_s, for a topic that gains
    partitions mid-run: events intended at_s or more after the start take rank mod total. Before
    its first message to a partition the client has not seen, the sender refreshes the topic's
    metadata until the partition is there, and raises Problem after `partitions_timeout_s`."""
    topic = topic or spec.topic
    steps = partition_steps(spec, partitions_from)   # bad steps fail before connecting
    partitions = most_partitions(spec, steps)
    planned = _share_of(shapes.expected_count(spec.shape), share) if _countable(spec) else 0
    # several processes share the partitions: their messages interleave, so every one is reported
    sender = connected_sender(bootstrap_servers, topic, partitions, spec.partitions, pace=pace,
                              every_report=share[1] > 1,
                              on_tick=None if progress is None else (lambda sent: progress(sent, planned)),
                              partitions_timeout_s=partitions_timeout_s)
    start_ms = start_ms if start_ms is not None else time.time_ns() // 1_000_000 + START_LEAD_MS
    planner = Planner(spec, start_ms, share, steps, horizon_s=spec.cap_s if keep_going is not None else None)
    nexmark_model = None
    if spec.kind == "nexmark":   # every Nexmark field in ground truth too (the oracles read them)
        nexmark_model = nexmark.Model(spec.nexmark, spec.seed, spec.mean_eps)
    writer = truth.TruthWriter(truth.part_path(truth_dir, share[0]), planner.keys.names,
                               nexmark.TRUTH_SCHEMA if nexmark_model is not None else None)
    stats = SendStats(spec, start_ms, steps, planner.horizon_s)
    locator = Locator(partitions)

    def record(block, sent_us, seq, anchors, reports) -> None:
        offset, append = locator.place(block.partition, seq, reports)
        done = (block, sent_us, offset, append, anchors & (offset >= 0))
        stats.add(*done)
        extra = (None if nexmark_model is None
                 else nexmark.truth_columns(nexmark_model.columns(block.event_id, block.event_time_ms)))
        writer.write(*done, extra=extra)

    feeder = Feeder(_prepared(planner, encoder_for(spec, planner.keys.names)), "plan-encode")
    send_all(feeder, sender, Drain(record, "truth"), writer, stats, planner.extends, keep_going)
    report = stats.report(sender, locator, share, pace, topic)
    if locator.failed:
        raise Problem(f"{locator.failed:,} events are not confirmed in Kafka: "
                           f"{(sender.errors + locator.errors)[:5]}",
                           "give the generator a topic no other producer writes to while it runs, and read "
                           f"the broker log; ground truth marks them with offset -1 in {writer.path}")
    return report


def send_all(feeder: Feeder, sender: Sender, recorder: Drain, writer, stats, extends: Callable,
             keep_going: Callable[[], bool] | None) -> None:
    """Send every prepared block the feeder hands over, each delivered block to `recorder`;
    a block past the duration (`extends(block)`) only while keep_going() says so. Whatever
    happens, the blocks handed over reach the truth `writer`, and the sender is closed (a
    replay of a user's records sends the same way: workloads/replay/send.py)."""
    try:
        for item in feeder:
            if extends(item.block):
                if keep_going is None or not keep_going():
                    stats.stopped_at(item.block)
                    break
                stats.extended(item.block)
            sender.send(item)
            for done in sender.finished():
                recorder.put(*done)
        for done in sender.finished(wait=True):
            recorder.put(*done)
    finally:
        feeder.stop()
        try:
            recorder.close()   # blocks already handed over reach the truth, even when sending failed
        finally:
            writer.close()
            # after a failure or an interrupt, do not wait a minute for a broker that may be gone
            sender.close(60.0 if sys.exc_info()[0] is None else 5.0)


def _share_of(total: int, share: tuple[int, int]) -> int:
    """How many of ids 0..total-1 are j mod n (idle partitions make the real count lower)."""
    j, n = share
    return (total - j + n - 1) // n


METADATA_TIMEOUT_S = 10.0   # how long a broker may take to answer before it is unreachable


def _countable(spec: WorkloadSpec) -> bool:
    return shapes.built_in(spec.rate)


def connected_sender(bootstrap_servers: str, topic: str, partitions, needed: int, **options) -> Sender:
    """A Sender for `topic` that has learnt the topic's partitions (at least `needed`), or is
    closed again: what the generator and the replay both start with."""
    sender = Sender(bootstrap_servers, topic, partitions, **options)
    try:
        _wait_for_metadata(sender, topic, needed)
    except BaseException:
        sender.close()
        raise
    return sender


def _wait_for_metadata(sender: Sender, topic: str, partitions: int) -> None:
    """Connect and learn the topic's partitions before the clock starts, so the first events
    do not pay for the connection; the topic must have the workload's `partitions`."""
    try:
        md = sender.producer.list_topics(topic, timeout=METADATA_TIMEOUT_S)
    except Exception as exc:
        raise Problem(f"cannot reach Kafka for topic {topic!r}: {exc}",
                           "check --bootstrap-servers and that the broker is up") from None
    t = md.topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        why = t.error if t else "absent"
        raise Problem(f"topic {topic!r} does not exist or has no partitions ({why})",
                           "create it first (the harness does), or pass --create-topic")
    if len(t.partitions) < partitions:
        raise Problem(f"topic {topic!r} has {len(t.partitions)} partitions but the workload sends "
                           f"to {partitions}", "create the topic with enough partitions")
    sender.known = len(t.partitions)


class SendStats:
    """What the report says: counts, rates, slip, per-partition and per-second counts, and how
    far past its duration an open-ended workload went."""

    def __init__(self, spec: WorkloadSpec, start_ms: int, steps: tuple[tuple[float, int], ...] = (),
                 horizon_s: float | None = None):
        self.spec, self.start_us, self.steps = spec, start_ms * 1000, steps
        self.horizon_s = spec.duration_s if horizon_s is None else horizon_s
        # an open-ended workload past its duration: where the last block it sent starts, and where
        # it stopped (the start of the first block it did not send)
        self.went_on_s: float | None = None
        self.stop_s: float | None = None
        self.events = 0
        self.late = 0
        # partitions added mid-run included
        self.per_partition = np.zeros(most_partitions(spec, steps), dtype=np.int64)
        self.sent_per_s = np.zeros(0, dtype=np.int64)
        self.intended_per_s = np.zeros(0, dtype=np.int64)
        self.last_sent_us = self.last_intended_us = self.start_us
        self.first_sent_us: int | None = None
        self.event_time: list[int | None] = [None, None]

    def _offset_s(self, block) -> float:
        """Where a block past the duration starts in the schedule: on the grid of EXTEND_BLOCK_S
        from the duration (its newest event, an original, is in its span)."""
        from workloads.generator.plan import EXTEND_BLOCK_S

        newest_s = (int(block.intended_us.max()) - self.start_us) / 1e6 - self.spec.duration_s
        return self.spec.duration_s + math.floor(max(newest_s, 0.0) / EXTEND_BLOCK_S) * EXTEND_BLOCK_S

    def extended(self, block) -> None:
        """A block past the duration is sent."""
        self.went_on_s = self._offset_s(block)

    def stopped_at(self, block) -> None:
        """The workload stops before this block past the duration."""
        self.stop_s = self._offset_s(block)

    def sent_for(self) -> tuple[float, bool]:
        """How much of the schedule was offered (its duration, and the blocks sent past it), and
        whether the plan ran out while the workload was still to go on (at the horizon, or
        where a custom shape ended)."""
        from workloads.generator.plan import EXTEND_BLOCK_S

        if self.stop_s is not None:
            return self.stop_s, False
        if self.went_on_s is not None:
            return min(self.horizon_s, self.went_on_s + EXTEND_BLOCK_S), True
        return self.spec.duration_s, False

    @staticmethod
    def _per_s(acc: np.ndarray, seconds: np.ndarray) -> np.ndarray:
        counts = np.bincount(np.maximum(seconds, 0))
        if len(counts) > len(acc):
            acc = np.pad(acc, (0, len(counts) - len(acc)))
        acc[:len(counts)] += counts
        return acc

    def add(self, block, sent_us, offset, append_ms, reported) -> None:
        if not len(block):
            return
        self.events += len(block)
        self.late += int(block.late_by_design.sum())
        self.per_partition += np.bincount(block.partition, minlength=len(self.per_partition))
        self.sent_per_s = self._per_s(self.sent_per_s, (sent_us - self.start_us) // 1_000_000)
        self.intended_per_s = self._per_s(self.intended_per_s,
                                          (block.intended_us - self.start_us) // 1_000_000)
        self.last_sent_us = max(self.last_sent_us, int(sent_us.max()))
        first = int(sent_us.min())
        self.first_sent_us = first if self.first_sent_us is None else min(first, self.first_sent_us)
        self.last_intended_us = max(self.last_intended_us, int(block.intended_us.max()))
        lo, hi = int(block.event_time_ms.min()), int(block.event_time_ms.max())
        old_lo, old_hi = self.event_time
        self.event_time = [lo if old_lo is None else min(lo, old_lo),
                           hi if old_hi is None else max(hi, old_hi)]

    def report(self, sender: Sender, locator: Locator, share, pace: bool, topic: str) -> dict:
        import confluent_kafka

        # paced: over the schedule, from its origin; unpaced: from the first send, since
        # sending starts at once rather than at the origin
        origin = self.start_us if pace or self.first_sent_us is None else self.first_sent_us
        sent_s = (self.last_sent_us - origin) / 1e6
        sent_for_s, ran_out = self.sent_for()
        target = self.events / sent_for_s
        achieved = self.events / sent_s if sent_s > 0 else float("nan")
        # from the first produce() to the last delivery report: the raw client benchmark's window
        first_us, acked_us = sender.first_sent_us, sender.acked_us
        acked_s = (acked_us - first_us) / 1e6 if first_us and acked_us else float("nan")
        return {
            "client": {"name": "confluent-kafka", "version": confluent_kafka.version()[0],
                       "librdkafka": confluent_kafka.libversion()[0]},
            "topic": topic, "workload": self.spec.describe(), "start_ms": self.start_us // 1000,
            "share": list(share), "paced": pace, "events": self.events, "failed": locator.failed,
            "late_by_design": self.late,
            "event_time_ms": {"min": self.event_time[0], "max": self.event_time[1]},
            "duration_s": self.spec.duration_s, "sending_s": sent_s,
            # the schedule offered: its duration, and what an open-ended workload added to it
            "sent_for_s": round(sent_for_s, 3), "max_duration_s": self.horizon_s,
            "extended_by_s": round(sent_for_s - self.spec.duration_s, 3), "cut_at_cap": ran_out,
            "target_eps": target, "achieved_eps": achieved,
            "acked_s": acked_s, "acked_eps": self.events / acked_s if acked_s > 0 else float("nan"),
            "pacing_error": achieved / target - 1 if pace and self.events else None,
            "schedule_slip_us": sender.slip.to_dict() if pace else None,
            "per_partition": self.per_partition.tolist(), "partitions_from": [list(s) for s in self.steps],
            "sent_per_s": self.sent_per_s.tolist(), "intended_per_s": self.intended_per_s.tolist(),
        }


def merge_reports(reports: list[dict]) -> dict:
    """One report for several processes' shares of the same plan."""
    if len(reports) == 1:
        return reports[0]
    first = reports[0]
    events = sum(r["events"] for r in reports)
    sending = max(r["sending_s"] for r in reports)
    slip = LogHistogram()
    for r in reports:
        if r["schedule_slip_us"]:
            slip.merge(LogHistogram.from_dict(r["schedule_slip_us"]))

    def add(key: str) -> list[int]:
        width = max(len(r[key]) for r in reports)
        return np.sum([np.pad(r[key], (0, width - len(r[key]))) for r in reports], axis=0).tolist()

    target = events / first.get("sent_for_s", first["duration_s"])
    achieved = events / sending if sending > 0 else float("nan")
    return {**first, "share": [None, len(reports)], "events": events,
            "failed": sum(r["failed"] for r in reports),
            "late_by_design": sum(r["late_by_design"] for r in reports),
            "event_time_ms": {"min": min(r["event_time_ms"]["min"] for r in reports),
                              "max": max(r["event_time_ms"]["max"] for r in reports)},
            "sending_s": sending, "target_eps": target, "achieved_eps": achieved,
            "acked_s": max(r["acked_s"] for r in reports),
            "acked_eps": events / max(r["acked_s"] for r in reports),
            "pacing_error": achieved / target - 1 if first["paced"] else None,
            "schedule_slip_us": slip.to_dict() if first["paced"] else None,
            "per_partition": add("per_partition"), "sent_per_s": add("sent_per_s"),
            "intended_per_s": add("intended_per_s"), "processes": len(reports)}


def _child(args) -> dict:
    spec, bootstrap_servers, truth_dir, topic, start_ms, share, pace, steps, steps_timeout_s = args
    return generate(spec, bootstrap_servers, truth_dir, topic=topic, start_ms=start_ms, share=share,
                    pace=pace, partitions_from=steps, partitions_timeout_s=steps_timeout_s)


def generate_parallel(spec: WorkloadSpec, bootstrap_servers: str, truth_dir: Path, processes: int, *,
                      topic: str | None = None, start_ms: int | None = None, pace: bool = True,
                      partitions_from: Sequence[tuple[float, int]] = (),
                      partitions_timeout_s: float = PARTITIONS_TIMEOUT_S) -> dict:
    """`processes` generator processes sending one plan; their reports merged. `partitions_from`
    as in `generate()`: each process refreshes its own client's metadata."""
    steps = partition_steps(spec, partitions_from)
    if processes == 1:
        return generate(spec, bootstrap_servers, truth_dir, topic=topic, start_ms=start_ms, pace=pace,
                        partitions_from=steps, partitions_timeout_s=partitions_timeout_s)
    import multiprocessing

    # every process must share one clock origin; leave them time to start and connect
    start_ms = start_ms if start_ms is not None else time.time_ns() // 1_000_000 + 3000
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(processes) as pool:
        jobs = [(spec, bootstrap_servers, truth_dir, topic, start_ms, (j, processes), pace, steps,
                 partitions_timeout_s) for j in range(processes)]
        reports = pool.map(_child, jobs)
    return merge_reports(reports)


def write_report(path: Path, report: dict) -> Path:
    Path(path).write_text(json.dumps(report, indent=2) + "\n")
    return Path(path)


def end_offsets(bootstrap_servers: str, topic: str, timeout_s: float = 2.0) -> dict[int, int]:
    """Partition -> the topic's end offset now: what has been appended to it. Raises when the
    broker does not answer within about `timeout_s` per request."""
    from confluent_kafka import Consumer, TopicPartition

    from workloads.generator.producer import CLIENT_LOG

    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": "harness-end-offsets",
                         "enable.auto.commit": False, "logger": CLIENT_LOG})
    try:
        found = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if found is None or found.error is not None:
            raise Problem(f"topic {topic!r} has no metadata ({found.error if found else 'absent'})",
                          "check that the broker is up")
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s,
                                                  cached=False)[1] for p in sorted(found.partitions)}
    finally:
        consumer.close()


def send_control(bootstrap_servers: str, topic: str, partitions: int, first_id: int,
                 event_time_ms: int, message: Callable[[int], tuple] | None = None) -> list[dict]:
    """One control event per partition (key CONTROL_KEY, ids from `first_id` on); `message(p)`
    -> (value, key, headers) makes partition p's in a workload's own format (a replay's).

    Before the run, at event time 0, they warm the pipeline up (its first batch pays
    for JVM class loading and JIT) without moving the watermark; after the run, far
    ahead in event time, they move the watermark past every window of the real events
    so that their windows are emitted. The checker ignores their output.
    """
    rows: list[dict] = []
    errors: list[str] = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))
            return
        rows.append({"partition": msg.partition(), "offset": msg.offset(), "append_ms": msg.timestamp()[1]})

    producer = make_producer(bootstrap_servers, on_delivery)
    sent_ms = time.time_ns() // 1_000_000
    keys: dict[int, str] = {}
    for p in range(partitions):
        value, key, headers = (message(p) if message is not None else (
            wire.control_value(first_id + p, event_time_ms), wire.kafka_key(CONTROL_KEY), None))
        keys[p] = key.decode()
        producer.produce(topic, value, key, p, headers=headers)
    if producer.flush(30) or len(rows) != partitions:
        raise Problem(f"Kafka acknowledged {len(rows)} of {partitions} control events {errors}",
                           "check that the broker is up")
    rows.sort(key=lambda r: r["partition"])
    return [{"event_id": first_id + r["partition"], "key": keys[r["partition"]],
             "event_time_ms": event_time_ms, "sent_ms": sent_ms, **r} for r in rows]
