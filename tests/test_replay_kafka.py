"""The replay workload against a real broker: what Kafka holds is the file's records, byte for
byte, where ground truth says they are.

Setup: the session's KRaft broker (conftest.py `kafka`), a fresh topic per test, a JSON lines
file written by the test. Steps: replay it, read the topic back with kafka-python, compare
with the file and with ground truth.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.test_generator import _read_back
from workloads import generator
from workloads.generator import truth
from workloads.replay import send
from workloads.replay.spec import parse

pytestmark = pytest.mark.integration

T0 = 1_714_564_800_000


def _topic(kafka, partitions: int) -> str:
    name = f"replay-{time.time_ns()}"
    generator.create_topic(kafka.bootstrap_servers, name, partitions)
    return name


def test_records_arrive_untouched_where_truth_says(kafka, tmp_path):
    """3,000 records with a key and uniform delays, paced at 3,000/s: every Kafka record is its
    file line byte for byte, at the partition and offset truth gives, with its row in the
    harness-id header; a key always lands on one partition; truth's event times are the file's."""
    lines = [json.dumps({"id": i, "user": f"u{i % 13}", "ts": T0 + i * 3, "note": "x" * (i % 5)},
                        separators=(", ", ": ")) for i in range(3000)]
    (tmp_path / "r.jsonl").write_text("\n".join(lines) + "\n")
    spec = parse({"kind": "replay", "file": "r.jsonl", "event_time": "ts", "key": "user", "partitions": 3,
                  "rate": {"eps": 3000}, "seed": 4, "delay": {"distribution": "uniform", "max": "200ms"}},
                 base_dir=tmp_path)
    topic = _topic(kafka, 3)
    report = send.replay(spec, kafka.bootstrap_servers, tmp_path / "truth", topic=topic)
    assert report["events"] == 3000 and report["failed"] == 0, report
    facts = truth.read(tmp_path / "truth")
    assert facts["event_id"].tolist() == list(range(3000))
    assert (facts["event_time_ms"] == T0 + facts["event_id"] * 3).all()
    got = _read_back(kafka.bootstrap_servers, topic, 3000)
    assert len(got) == 3000
    where = {(r.partition, r.offset): r for r in got}
    for row in facts.itertuples():
        record = where[(row.partition, row.offset)]
        assert record.value == lines[row.event_id].encode(), row
        assert dict(record.headers)["harness-id"] == str(row.event_id).encode()
        assert record.key == f"u{row.event_id % 13}".encode()
    assert facts.groupby("key")["partition"].nunique().max() == 1
    sent_order = facts.sort_values(["partition", "offset"])
    assert (sent_order.groupby("partition")["event_id"].diff().dropna() < 0).any()   # reordered by delays


def test_control_records_come_in_the_records_format(kafka, tmp_path):
    """The warm-up's control records are the file's first record remade: its event time set, its
    numbers and texts marked, the harness-control header set; their truth rows place them."""
    (tmp_path / "r.jsonl").write_text(json.dumps({"id": 5, "user": "a", "ts": "2024-05-01T12:00:00Z"}) + "\n")
    spec = parse({"kind": "replay", "file": "r.jsonl", "event_time": "ts", "speed": 1}, base_dir=tmp_path)
    topic = _topic(kafka, 2)
    rows = send.send_control(spec, kafka.bootstrap_servers, topic, 2, -2, 0)
    got = sorted(_read_back(kafka.bootstrap_servers, topic, 2), key=lambda r: r.partition)
    assert [json.loads(r.value) for r in got] == [
        {"id": -2, "user": "__control__2", "ts": "1970-01-01T00:00:00.001Z"},
        {"id": -1, "user": "__control__1", "ts": "1970-01-01T00:00:00.001Z"}]
    assert all(dict(r.headers)["harness-control"] == b"1" for r in got)
    assert [(r["partition"], r["offset"], r["event_id"]) for r in rows] == [(0, 0, -2), (1, 0, -1)]
