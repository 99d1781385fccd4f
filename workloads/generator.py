"""Open-loop producer: sends an EventPlan to Kafka on schedule, records ground truth.

Open loop: each event has an intended send time and the generator never waits for
the system under test; when it falls behind it sends at once and the slip (actual
minus intended send time) is recorded, so a slow system cannot hide its slowness.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.errors import HarnessError
from workloads.events import EventPlan

CONTROL_KEY = "__control__"


@dataclass
class Delivery:
    """Kafka's answer for each sent event, filled by producer callbacks."""

    partition: np.ndarray
    offset: np.ndarray
    append_ms: np.ndarray
    sent_ms: np.ndarray
    errors: list = field(default_factory=list)

    @classmethod
    def empty(cls, n: int) -> Delivery:
        return cls(*(np.full(n, -1, dtype=np.int64) for _ in range(4)))

    def callback(self, i: int):
        def on_delivery(metadata):
            self.partition[i] = metadata.partition
            self.offset[i] = metadata.offset
            self.append_ms[i] = metadata.timestamp
        return on_delivery


def create_topic(bootstrap_servers: str, topic: str, partitions: int) -> None:
    """Create `topic` with broker append timestamps (so record time = append time)."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1,
                                      topic_configs={"message.timestamp.type": "LogAppendTime"})])
    except TopicAlreadyExistsError:
        raise HarnessError(f"topic {topic!r} already exists on {bootstrap_servers}",
                           "give the case a fresh topic name or delete the topic") from None
    finally:
        admin.close()


def _producer(bootstrap_servers: str):
    from kafka import KafkaProducer

    return KafkaProducer(bootstrap_servers=bootstrap_servers, acks="all", linger_ms=5,
                         retries=5, max_in_flight_requests_per_connection=1)


def encode(event_id: int, key: str, event_time_ms: int, amount: int) -> bytes:
    return json.dumps({"event_id": event_id, "key": key, "event_time_ms": event_time_ms,
                       "amount": amount}, separators=(",", ":")).encode()


def send(plan: EventPlan, bootstrap_servers: str, topic: str, progress=None) -> Delivery:
    """Send every event at its intended time (open loop); return Kafka's delivery records."""
    producer = _producer(bootstrap_servers)
    delivery = Delivery.empty(len(plan))
    try:
        for i in range(len(plan)):
            _pace(int(plan.intended_ms[i]))
            key = plan.key[i]
            value = encode(int(plan.event_id[i]), key, int(plan.event_time_ms[i]), int(plan.amount[i]))
            delivery.sent_ms[i] = time.time_ns() // 1_000_000
            future = producer.send(topic, key=key.encode(), value=value)
            future.add_callback(delivery.callback(i)).add_errback(delivery.errors.append)
            if progress is not None and i % 1000 == 0:
                progress(i, len(plan))
        producer.flush()
    finally:
        producer.close()
    if delivery.errors or (delivery.offset < 0).any():
        raise HarnessError(f"{int((delivery.offset < 0).sum())} events were not acknowledged by Kafka: "
                           f"{delivery.errors[:3]}", "read the broker log in the run directory")
    return delivery


def send_control(bootstrap_servers: str, topic: str, partitions: int, first_id: int,
                 event_time_ms: int) -> list[dict]:
    """One control event per partition (key CONTROL_KEY, ids from `first_id` on).

    Before the run, at event time 0, they warm the pipeline up (its first batch pays
    for JVM class loading and JIT) without moving the watermark; after the run, far
    ahead in event time, they move the watermark past every window of the real events
    so that their results are emitted. The checker ignores their output.
    """
    producer = _producer(bootstrap_servers)
    rows = []
    try:
        for p in range(partitions):
            event_id = first_id + p
            value = encode(event_id, CONTROL_KEY, event_time_ms, 0)
            md = producer.send(topic, key=CONTROL_KEY.encode(), value=value, partition=p).get(timeout=30)
            rows.append({"event_id": event_id, "key": CONTROL_KEY, "event_time_ms": event_time_ms,
                         "partition": md.partition, "offset": md.offset, "append_ms": md.timestamp})
    finally:
        producer.close()
    return rows


def _pace(intended_ms: int) -> None:
    delay = intended_ms / 1000.0 - time.time()
    if delay > 0:
        time.sleep(delay)


def write_truth(path: Path, plan: EventPlan, delivery: Delivery, control: list[dict]) -> Path:
    """Ground truth: every event sent, with where Kafka put it (Parquet)."""
    import pandas as pd

    events = pd.DataFrame({
        "event_id": plan.event_id, "key": plan.key, "event_time_ms": plan.event_time_ms,
        "amount": plan.amount, "intended_ms": plan.intended_ms, "sent_ms": delivery.sent_ms,
        "partition": delivery.partition, "offset": delivery.offset, "append_ms": delivery.append_ms,
        "late_by_design": plan.late_by_design, "control": False,
    })
    if control:
        extra = pd.DataFrame(control).assign(amount=0, intended_ms=-1, sent_ms=-1,
                                             late_by_design=False, control=True)
        events = pd.concat([events, extra[events.columns]], ignore_index=True)
    events.to_parquet(path, index=False)
    return path
