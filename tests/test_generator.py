"""The generator against a real broker: ground truth is exactly what Kafka holds."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from harness.errors import HarnessError
from workloads import events, generator, spec, truth

WORKLOAD = {"duration": "2s", "partitions": 3, "seed": 5, "rate": {"eps": 2000},
            "keys": {"count": 30}, "delay": {"distribution": "exponential", "mean": "300ms",
                                             "late_share": 0.05, "late_by": "10s"}}


def _topic(kafka, partitions: int) -> str:
    name = f"gen-{time.time_ns()}"
    generator.create_topic(kafka.bootstrap_servers, name, partitions)
    return name


def _read_back(bootstrap: str, topic: str, expected: int) -> list:
    """Every record of `topic`, read with kafka-python (the verification client)."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=5000)
    try:
        records = []
        deadline = time.monotonic() + 60
        while len(records) < expected and time.monotonic() < deadline:
            records.extend(consumer)
        return records
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def sent(kafka, tmp_path_factory):
    """One paced run of WORKLOAD: its spec, topic, report and truth."""
    w = spec.parse(WORKLOAD)
    topic = _topic(kafka, w.partitions)
    truth_dir = tmp_path_factory.mktemp("truth")
    report = generator.generate(w, kafka.bootstrap_servers, truth_dir, topic=topic)
    return w, topic, report, truth.read(truth_dir)


class TestGroundTruth:
    def test_truth_matches_what_a_consumer_reads_back(self, kafka, sent):
        """Same ids at the same partitions and offsets, same keys, event times and append times."""
        _, topic, report, t = sent
        records = _read_back(kafka.bootstrap_servers, topic, len(t))
        assert len(records) == len(t) == report["events"], (len(records), len(t), report["events"])
        back = {(r.partition, r.offset): r for r in records}
        for row in t.itertuples():
            r = back[(row.partition, row.offset)]
            value = json.loads(r.value)
            assert (value["event_id"], r.key.decode(), value["event_time_ms"], r.timestamp) == \
                (row.event_id, row.key, row.event_time_ms, row.append_ms), row

    def test_ids_are_dense_and_every_event_was_acknowledged(self, sent):
        """event_id runs 0..n-1 and every offset is a real one."""
        _, _, report, t = sent
        assert t["event_id"].tolist() == list(range(report["events"]))
        assert (t["offset"] >= 0).all() and report["failed"] == 0

    def test_truth_is_the_plan(self, sent):
        """What was sent is exactly the deterministic plan for the same seed and start."""
        w, _, report, t = sent
        plan = events.plan_all(w, report["start_ms"])
        assert np.array_equal(t["event_time_ms"].to_numpy(), plan.event_time_ms)
        assert np.array_equal(t["partition"].to_numpy(), plan.partition)

    def test_the_report_counts_partitions_and_late_events(self, sent):
        """Per-partition counts and the late-by-design count agree with the truth."""
        _, _, report, t = sent
        assert report["per_partition"] == t.groupby("partition").size().tolist()
        assert report["late_by_design"] == int(t["late_by_design"].sum()) > 0

    def test_the_schedule_was_kept(self, sent):
        """Sent no earlier than intended; the slip histogram holds every event."""
        _, _, report, t = sent
        assert (t["sent_ms"] >= t["intended_ms"]).all()
        assert report["schedule_slip_us"]["count"] == len(t)


class TestParallel:
    def test_two_processes_send_one_plan(self, kafka, tmp_path):
        """Two generator processes, event_id mod 2 each: their merged truth is the one-process plan."""
        w = spec.parse({**WORKLOAD, "duration": "1s"})
        topic = _topic(kafka, w.partitions)
        report = generator.generate_parallel(w, kafka.bootstrap_servers, tmp_path, 2, topic=topic)
        t = truth.read(tmp_path)
        plan = events.plan_all(w, report["start_ms"])
        assert report["processes"] == 2 and sorted(p.name for p in tmp_path.iterdir()) == \
            ["part-0000.parquet", "part-0001.parquet"]
        assert t["event_id"].tolist() == plan.event_id.tolist()
        assert np.array_equal(t["event_time_ms"].to_numpy(), plan.event_time_ms)
        assert (t["offset"] >= 0).all()
        assert len(_read_back(kafka.bootstrap_servers, topic, len(t))) == len(t)


class TestFailures:
    def test_an_unreachable_broker_is_a_clear_error(self, tmp_path):
        """No broker on the port: HarnessError naming the topic and the fix, within the timeout."""
        from harness.net import free_port

        w = spec.parse({"duration": "1s", "rate": {"eps": 10}})
        with pytest.raises(HarnessError) as info:
            generator.generate(w, f"127.0.0.1:{free_port()}", tmp_path, topic="nowhere")
        assert "bootstrap-servers" in info.value.fix

    def test_a_missing_topic_is_a_clear_error(self, kafka, tmp_path):
        """Sending to a topic that does not exist says so before the clock starts."""
        w = spec.parse({"duration": "1s", "rate": {"eps": 10}})
        with pytest.raises(HarnessError, match="does not exist"):
            generator.generate(w, kafka.bootstrap_servers, tmp_path, topic=f"absent-{time.time_ns()}")
