"""Spark's Kafka sink's reader against a real broker: what a read_committed consumer sees.

Setup: the session's Kafka broker; records written as the sink writes them (the row as
JSON, in a topic with broker append times) by a plain producer. No Spark: the write path
runs end to end in the bench's sinks.toml and under the pipelines e2e's parquet case.
"""

import json
import time

import pytest

from workloads.sinks import SinkContext
from workloads.sinks.kafka import KafkaTopicSink

pytestmark = pytest.mark.integration

COLUMNS = {"event_id": "LONG", "key": "STRING", "amount": "LONG"}


def test_read_returns_every_record_parsed_with_its_append_time(kafka):
    from kafka import KafkaProducer

    ctx = SinkContext(name=f"sink_kafka_{int(time.time() * 1000)}", guarantee="at-least-once",
                      columns=COLUMNS, workdir=".", bootstrap_servers=kafka.bootstrap_servers)
    sink = KafkaTopicSink(ctx)
    sink.setup()
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers)
    before_ms = time.time_ns() // 1_000_000
    for i in range(5):
        producer.send(ctx.name, json.dumps({"event_id": i, "key": "k", "amount": i * 10}).encode())
    producer.flush()
    producer.close()
    rows = sink.read()
    assert list(rows.columns) == [*COLUMNS, "committed_ms"]
    assert sorted(rows["event_id"]) == [0, 1, 2, 3, 4] and rows["amount"].sum() == 100
    assert (rows["committed_ms"] >= before_ms - 1000).all(), "LogAppendTime: the broker's clock"


def test_exactly_once_is_refused():
    with pytest.raises(ValueError, match="at-least-once"):
        KafkaTopicSink(SinkContext(name="t", guarantee="exactly-once", columns=COLUMNS, workdir=".",
                                   bootstrap_servers="localhost:1"))
