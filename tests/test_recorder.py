"""The recorder (workloads/recorder.py, started as harness/services/recorder.py) against a real
broker: every record of the topic, as Spark's Kafka source would give it, partitions added
while it records, and a broker killed and started again under it."""

from __future__ import annotations

import uuid

import pyarrow.parquet as pq
import pytest

from harness.services.recorder import Recorder
from workloads import records
from workloads.kafka_admin import admin_client

pytestmark = pytest.mark.integration


def _topic(bootstrap: str, partitions: int) -> str:
    from workloads import generator

    name = f"recorder-{uuid.uuid4().hex[:8]}"
    generator.create_topic(bootstrap, name, partitions)
    return name


def _send(bootstrap: str, topic: str, rows: list[dict]) -> list[tuple[int, int]]:
    """Each row produced (to its partition), acknowledged: its (partition, offset)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    placed: list[tuple[int, int]] = []

    def done(err, msg):
        assert err is None, err
        placed.append((msg.partition(), msg.offset()))

    for row in rows:
        producer.produce(topic, value=row["value"], key=row.get("key"), partition=row["partition"],
                         headers=row.get("headers"), on_delivery=done)
    assert producer.flush(30) == 0
    return placed


def _recorded(out) -> list[dict]:
    rows = [r for path in records.chunks(out) for r in pq.read_table(path, schema=records.SCHEMA).to_pylist()]
    return sorted(rows, key=lambda r: (r["partition"], r["offset"]))


def test_every_record_as_sparks_kafka_source_gives_it_new_partitions_too(registry, kafka, tmp_path,
                                                                       monkeypatch):
    """Keys, null keys and values, headers (null when a record has none, as Spark gives them),
    the broker's LogAppendTime (the harness's topics': timestampType 1) in microseconds; a
    partition added while it records is read from its first offset, even when it was added just
    before the stop (the recorder's periodic look at the topic is set to an hour here, so only the
    stop's own look finds it: a CI run lost partition 2's record when the stop came within the
    second after its last look); after stop(), recorder.json says it caught up."""
    monkeypatch.setenv("HARNESS_RECORDER_METADATA_S", "3600")
    bootstrap = kafka.bootstrap_servers
    topic = _topic(bootstrap, 2)
    out = tmp_path / "records"
    recorder = Recorder(tmp_path / "recorder", bootstrap, topic, out, registry).start().wait_ready()
    rows = [{"partition": i % 2, "key": None if i % 3 == 0 else b"k%d" % i,
             "value": None if i == 7 else b"v%d" % i, "headers": [("sender", b"h%d" % i)] if i % 2 else None}
            for i in range(40)]
    placed = _send(bootstrap, topic, rows)
    with admin_client(bootstrap) as admin:
        from kafka.admin import NewPartitions

        admin.create_partitions({topic: NewPartitions(3)})
    placed += _send(bootstrap, topic, [{"partition": 2, "value": b"new"}])
    recorder.stop()
    got = _recorded(out)
    assert [(r["partition"], r["offset"]) for r in got] == sorted(placed), got[:3]
    by_value = {r["value"]: r for r in got}
    assert by_value[b"v1"]["headers"] == [{"key": "sender", "value": b"h1"}]
    assert by_value[b"v2"]["headers"] is None
    assert by_value[b"v4"]["key"] == b"k4" and by_value[b"v3"]["key"] is None and None in by_value
    assert {r["timestampType"] for r in got} == {1} and {r["topic"] for r in got} == {topic}
    assert all(r["timestamp"].year >= 2024 for r in got)
    account = records.state(out)
    assert account is not None and account["status"] == "stopped" and account["caught_up"], account
    assert account["records"] == 41 and sorted(account["partitions"]) == ["0", "1", "2"], account


@pytest.mark.minutes(0.6)
def test_it_records_on_across_a_broker_killed_and_started_again(registry, tmp_path):
    """A broker of its own, SIGKILLed and started on its data and ports: the records sent before
    and after are all recorded, each once."""
    from harness.services.kafka import KafkaBroker

    broker = KafkaBroker(tmp_path / "kafka", registry).start().wait_ready()
    try:
        bootstrap = broker.bootstrap_servers
        topic = _topic(bootstrap, 1)
        out = tmp_path / "records"
        recorder = Recorder(tmp_path / "recorder", bootstrap, topic, out, registry).start().wait_ready()
        placed = _send(bootstrap, topic, [{"partition": 0, "value": b"a%d" % i} for i in range(100)])
        broker.kill()
        broker.start().wait_ready()
        placed += _send(bootstrap, topic, [{"partition": 0, "value": b"b%d" % i} for i in range(100)])
        recorder.stop()
        got = _recorded(out)
        assert [(r["partition"], r["offset"]) for r in got] == sorted(placed)
        assert records.state(out)["caught_up"]
    finally:
        broker.stop()
