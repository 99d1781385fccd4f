"""The generator against a real broker: ground truth is exactly what Kafka holds."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from workloads import generator
from workloads.errors import Problem
from workloads.generator import plan as events
from workloads.generator import spec, truth

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
        """event_id runs 0..n-1, every offset is a real one, and at 2,000 events/s every event
        had a delivery report of its own."""
        _, _, report, t = sent
        assert t["event_id"].tolist() == list(range(report["events"]))
        assert (t["offset"] >= 0).all() and report["failed"] == 0
        assert t["reported"].all(), f"{(~t['reported']).sum()} events without their own report"

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


# produces into every partition of a topic about every millisecond, for at most 60 s
INTRUDER = """
import sys, time
from confluent_kafka import Producer
bootstrap, topic, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
for p in range(partitions):
    producer.produce(topic, b"{}", b"intruder", p)
producer.flush(30)
print("ready", flush=True)
end = time.monotonic() + 60
while time.monotonic() < end:
    for p in range(partitions):
        producer.produce(topic, b"{}", b"intruder", p)
    producer.poll(0.001)
"""
FAST = {"duration": "500ms", "partitions": 3, "seed": 9, "rate": {"eps": 200_000}, "keys": {"count": 300}}


class TestAnchored:
    """Above EXACT_UP_TO_EPS only anchors carry delivery reports; the rest are counted back."""

    def test_every_offset_is_right_and_append_times_never_early(self, kafka, tmp_path):
        """100,000 events planned at 200,000/s, sent unpaced, read back with kafka-python: every
        event sits at its truth's partition and offset; events with their own report have their
        exact append time, the others their anchor's, which is never before their own."""
        w = spec.parse(FAST)
        topic = _topic(kafka, w.partitions)
        report = generator.generate(w, kafka.bootstrap_servers, tmp_path, topic=topic, pace=False)
        t = truth.read(tmp_path)
        records = _read_back(kafka.bootstrap_servers, topic, len(t))
        assert len(records) == len(t) == report["events"] == 100_000, (len(records), len(t))
        back = {(r.partition, r.offset): r for r in records}
        at = [back[(p, o)] for p, o in zip(t["partition"], t["offset"], strict=True)]
        ids = np.array([json.loads(r.value)["event_id"] for r in at])
        assert np.array_equal(ids, t["event_id"].to_numpy()), "an event is not where its truth says"
        stamp = np.array([r.timestamp for r in at])
        rep = t["reported"].to_numpy()
        assert 0 < rep.mean() < 0.2, f"{rep.mean():.1%} of events had their own report"
        assert np.array_equal(stamp[rep], t["append_ms"].to_numpy()[rep])
        assert (stamp <= t["append_ms"].to_numpy()).all(), "an append time before Kafka's own"

    def test_another_producer_in_the_partitions_fails_the_run(self, kafka, tmp_path):
        """Records of a second producer interleaved with the generator's: the count check fails,
        the run raises naming another producer, and truth marks those events with offset -1."""
        w = spec.parse(FAST)
        topic = _topic(kafka, w.partitions)
        # another process, so that it really runs while the generator holds its own GIL
        intruder = subprocess.Popen([sys.executable, "-c", INTRUDER, kafka.bootstrap_servers, topic,
                                     str(w.partitions)], stdout=subprocess.PIPE, text=True)
        try:
            assert intruder.stdout.readline().strip() == "ready", "the intruding producer did not start"
            with pytest.raises(Problem, match="another producer") as info:
                generator.generate(w, kafka.bootstrap_servers, tmp_path, topic=topic, pace=False)
        finally:
            intruder.kill()
            intruder.wait(10)
        t = truth.read(tmp_path)
        lost = int((t["offset"] < 0).sum())
        assert 0 < lost < len(t) and f"{lost:,} events are not confirmed" in str(info.value)


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
    def test_a_progress_error_stops_sending_and_leaves_a_readable_truth(self, kafka, tmp_path):
        """progress() raising (the runner's dead-driver check) stops the run: the exception comes
        out, the truth part is closed and readable, and no generator thread is left running."""
        w = spec.parse({**WORKLOAD, "duration": "3s"})
        topic = _topic(kafka, w.partitions)

        class DriverDied(Exception):
            pass

        def progress(sent: int, planned: int) -> None:
            if sent > 500:
                raise DriverDied(f"{sent} of {planned}")

        with pytest.raises(DriverDied):
            generator.generate(w, kafka.bootstrap_servers, tmp_path, topic=topic, progress=progress)
        t = truth.read(tmp_path)
        assert list(t.columns) == list(truth.SCHEMA.names) and len(t) < 6000
        left = [th.name for th in threading.enumerate() if th.name in ("plan-encode", "truth")]
        assert not left, f"generator threads still running: {left}"

    def test_an_unreachable_broker_is_a_clear_error(self, tmp_path, monkeypatch):
        """No broker on the port: Problem naming the topic and the fix, within the timeout
        (1 s here, not the 10 s a real broker is given)."""
        from harness.net import free_port
        from workloads.generator import run

        monkeypatch.setattr(run, "METADATA_TIMEOUT_S", 1.0)
        w = spec.parse({"duration": "1s", "rate": {"eps": 10}})
        with pytest.raises(Problem) as info:
            generator.generate(w, f"127.0.0.1:{free_port()}", tmp_path, topic="nowhere")
        assert "bootstrap-servers" in info.value.fix

    def test_a_missing_topic_is_a_clear_error(self, kafka, tmp_path):
        """Sending to a topic that does not exist says so before the clock starts."""
        w = spec.parse({"duration": "1s", "rate": {"eps": 10}})
        with pytest.raises(Problem, match="does not exist"):
            generator.generate(w, kafka.bootstrap_servers, tmp_path, topic=f"absent-{time.time_ns()}")


class TestOpenEnded:
    def test_it_goes_on_past_the_duration_while_asked_and_truth_holds_what_was_sent(self, kafka, tmp_path):
        """A 1 s workload at 200 events/s asked to go on twice: it sends two more seconds, asked
        before each and once more, and stops; truth and Kafka hold exactly the 600 events, the
        report says it was sent for 3 s, 2 s past its duration, under the cap; and the end
        offsets are what Kafka holds."""
        w = spec.parse({"duration": "1s", "max_duration": "10s", "partitions": 2, "rate": {"eps": 200}})
        topic = _topic(kafka, w.partitions)
        answers = iter([True, True, False])
        asked: list[float] = []

        def keep_going() -> bool:
            asked.append(time.time())
            return next(answers)

        report = generator.generate(w, kafka.bootstrap_servers, tmp_path, topic=topic, keep_going=keep_going)
        t = truth.read(tmp_path)
        assert len(asked) == 3 and report["events"] == len(t) == 600, (asked, report["events"])
        offsets_s = (t["intended_ms"] - report["start_ms"]) / 1000
        assert offsets_s.max() < 3 and (offsets_s >= 1).sum() == 400
        assert (report["sent_for_s"], report["extended_by_s"], report["cut_at_cap"]) == (3.0, 2.0, False)
        assert report["target_eps"] == pytest.approx(200)
        assert sum(generator.end_offsets(kafka.bootstrap_servers, topic).values()) == 600
        assert len(_read_back(kafka.bootstrap_servers, topic, 600)) == 600

    def test_it_stops_at_the_cap_however_long_it_is_asked_to_go_on(self, kafka, tmp_path):
        """Always asked to go on: it ends at max_duration and says the plan ran out."""
        w = spec.parse({"duration": "1s", "max_duration": "2s", "rate": {"eps": 100}})
        topic = _topic(kafka, w.partitions)
        report = generator.generate(w, kafka.bootstrap_servers, tmp_path, topic=topic,
                                    keep_going=lambda: True)
        assert report["events"] == 200 and report["sent_for_s"] == 2.0 and report["cut_at_cap"]
