"""The lag the harness rebuilds, against what a real broker says with a consumer held back.

The harness never polls Kafka for lag during a run: it rebuilds it per second from ground
truth (each record's offset and append time) and each batch's end offsets
(harness/metrics/flow.py). Here a real consumer group stands in for the query: it reads
part of a real topic, commits, and stops while the generator goes on sending. In the
generator's quiet gaps (no record in flight) the broker's end offsets minus the group's
committed offsets must equal the rebuilt lag at that instant, partition by partition.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime

import numpy as np

from workloads import generator
from workloads.generator import spec, truth

# 1,000 events/s for 1 s, quiet until 2.5 s, 1,000 events/s again for 1 s, then quiet
WORKLOAD = {"duration": "5s", "partitions": 2, "seed": 11, "keys": {"count": 20},
            "rate": {"shape": "steps", "steps": [["0s", 1000], ["1s", 0], ["2500ms", 1000], ["3500ms", 0]]}}
GROUP = "held-back"


def _broker_lag(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """End offsets minus the group's committed offsets, as Kafka reports them now."""
    from kafka import KafkaConsumer, TopicPartition

    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP, enable_auto_commit=False)
    try:
        ends = consumer.end_offsets(tps)
        return {tp.partition: ends[tp] - (consumer.committed(tp) or 0) for tp in tps}
    finally:
        consumer.close()


def _read_and_commit_half(bootstrap: str, topic: str, partitions: int) -> tuple[float, dict[int, int]]:
    """The held-back reader: reads each partition up to half its end offset, commits there,
    and reads no more. Returns when it committed and the offsets."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP, enable_auto_commit=False)
    try:
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        stop = {tp.partition: end // 2 for tp, end in consumer.end_offsets(tps).items()}
        position = dict.fromkeys(stop, 0)
        deadline = time.monotonic() + 20
        while any(position[p] < stop[p] for p in stop) and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=200).items():
                for r in records:
                    if r.offset < stop[tp.partition]:
                        position[tp.partition] = r.offset + 1
        assert position == stop, f"the reader reached {position}, not {stop}"
        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in stop.items()})
        return time.time_ns() / 1e6, stop
    finally:
        consumer.close()


def test_rebuilt_lag_is_the_brokers_end_offsets_minus_a_held_back_consumer(kafka, tmp_path):
    from harness.metrics import flow

    w = spec.parse(WORKLOAD)
    topic = f"lag-{time.time_ns()}"
    generator.create_topic(kafka.bootstrap_servers, topic, w.partitions)
    start_ms = time.time_ns() // 1_000_000 + 2000
    sending = threading.Thread(target=generator.generate, args=(w, kafka.bootstrap_servers, tmp_path),
                               kwargs={"topic": topic, "start_ms": start_ms}, daemon=True)
    sending.start()

    def at(offset_s: float) -> None:   # sleep until offset_s into the schedule
        time.sleep(max(0.0, (start_ms + offset_s * 1000 - time.time_ns() / 1e6) / 1000))

    at(1.6)                                       # the first quiet gap: the reader reads half
    committed_ms, offsets = _read_and_commit_half(kafka.bootstrap_servers, topic, w.partitions)
    samples = []
    at(2.2)                                       # still quiet: lag is the unread half
    samples.append((time.time_ns() / 1e6, _broker_lag(kafka.bootstrap_servers, topic, w.partitions)))
    at(4.2)                                       # quiet again after 1,000 more: held back, lag grew
    samples.append((time.time_ns() / 1e6, _broker_lag(kafka.bootstrap_servers, topic, w.partitions)))
    sending.join(timeout=30)
    assert not sending.is_alive(), "the generator did not finish"

    sent = truth.read(tmp_path)
    # the reader as a query: one batch that ended when it committed, at those offsets
    stamp = datetime.fromtimestamp(committed_ms / 1000, UTC).isoformat().replace("+00:00", "Z")
    batch = {"timestamp": stamp, "batchDuration": 0, "numInputRows": sum(offsets.values()),
             "sources": [{"endOffset": json.dumps({topic: {str(p): o for p, o in offsets.items()}})}]}
    for sampled_ms, broker in samples:
        # a timeline whose first second ends at the sample: its lag is the lag at that instant
        _, lag = flow.timeline(sent, [batch], topic, np.array([]), sampled_ms - 1000)
        rebuilt = {int(r.partition): int(r.lag_records) for r in lag[lag["second"] == 0].itertuples()}
        assert rebuilt == broker, f"at {sampled_ms - start_ms:.0f} ms: rebuilt {rebuilt}, broker {broker}"
    assert sum(samples[1][1].values()) - sum(samples[0][1].values()) == 1000   # the second step, exactly
