"""The generator on a topic that gains partitions mid-run (the kafka-partitions fault)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from workloads import generator
from workloads.errors import Problem
from workloads.generator import plan, spec, truth

# 4 s at a constant rate on 2 partitions; from 2 s on, the topic has 4
WORKLOAD = {"duration": "4s", "partitions": 2, "seed": 11, "rate": {"eps": 300}, "keys": {"count": 40}}
STEPS = [(2.0, 4)]
START_MS = 1_700_000_000_000


def _run_in_thread(fn, *args, **kwargs) -> tuple[threading.Thread, dict]:
    """`fn(*args, **kwargs)` in a thread; its result or exception lands in the returned dict."""
    out: dict = {}

    def run() -> None:
        try:
            out["result"] = fn(*args, **kwargs)
        except BaseException as exc:  # re-raised by the test that reads it
            out["error"] = exc

    thread = threading.Thread(target=run, name="generate", daemon=True)
    thread.start()
    return thread, out


def _wait_until(cond, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"{what} within {timeout_s} s"
        time.sleep(0.05)


def _read_back(bootstrap: str, topic: str, partitions: int, expected: int) -> dict:
    """(partition, offset) -> event_id of every record of `topic`, read with kafka-python."""
    import json

    from kafka import TopicPartition

    from workloads.kafka_admin import client

    with client("consumer", bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                consumer_timeout_ms=2000) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        back: dict = {}
        deadline = time.monotonic() + 60
        while len(back) < expected and time.monotonic() < deadline:
            back.update({(r.partition, r.offset): json.loads(r.value)["event_id"] for r in consumer})
        return back


class TestPlan:
    """The planner's partitions when the count steps up mid-run (no broker)."""

    def test_events_spread_over_the_new_partitions_after_the_step(self):
        """Before 2 s events sit in partitions 0-1 only; from 2 s on in all of 0-3."""
        block = plan.plan_all(spec.parse(WORKLOAD), START_MS, partitions_from=STEPS)
        after = block.intended_us >= (START_MS + 2000) * 1000
        assert set(block.partition[~after].tolist()) == {0, 1}
        assert set(block.partition[after].tolist()) == {0, 1, 2, 3}, np.bincount(block.partition[after])

    def test_the_plan_is_deterministic(self):
        """The same seed and steps give identical blocks, twice."""
        w = spec.parse(WORKLOAD)
        one = list(plan.Planner(w, START_MS, partitions_from=STEPS))
        two = list(plan.Planner(w, START_MS, partitions_from=STEPS))
        assert len(one) == len(two)
        for a, b in zip(one, two, strict=True):
            assert all(np.array_equal(getattr(a, f), getattr(b, f)) for f in plan.Block.__dataclass_fields__)

    def test_without_steps_the_plan_is_unchanged(self):
        """No steps, or a step that keeps the count, plan what the planner always planned."""
        w = spec.parse(WORKLOAD)
        base = plan.plan_all(w, START_MS)
        same = plan.plan_all(w, START_MS, partitions_from=[(1.0, 2)])
        assert np.array_equal(base.partition, same.partition)
        assert np.array_equal(base.event_time_ms, same.event_time_ms)

    def test_new_partitions_have_no_clock_skew(self):
        """Declared skews apply to the first partitions; events in the added ones get none."""
        w = spec.parse({**WORKLOAD, "time": {"clock_skew": ["5s", "-5s"]}})
        skewed = plan.plan_all(w, START_MS, partitions_from=STEPS)
        plain = plan.plan_all(spec.parse(WORKLOAD), START_MS, partitions_from=STEPS)
        shift = skewed.event_time_ms - plain.event_time_ms
        expected = np.select([skewed.partition == 0, skewed.partition == 1], [5000, -5000], 0)
        assert np.array_equal(shift, expected)

    @pytest.mark.parametrize("steps", [[(2.0, 1)], [(2.0, 4), (1.0, 5)], [(1.0, 4), (2.0, 3)],
                                       [(float("nan"), 4)], [(-1.0, 4)]], ids=str)
    def test_impossible_steps_are_a_problem(self, steps):
        """Fewer partitions than before, or steps out of order, are refused with a fix."""
        with pytest.raises(Problem, match="partitions_from") as info:
            plan.Planner(spec.parse(WORKLOAD), START_MS, partitions_from=steps)
        assert "never decreasing" in info.value.fix


@pytest.fixture(scope="module")
def run(kafka, tmp_path_factory):
    """Setup: a 2-partition topic; generate() for 4 s with a step to 4 partitions at 2 s, in a
    thread. Steps: about 1 s after the first event, add 2 partitions with the admin API; wait
    for the run. Returns the bootstrap address, the topic, the report and the truth."""
    from kafka.admin import NewPartitions

    from workloads.kafka_admin import admin_client

    topic = f"repartition-{time.time_ns()}"
    generator.create_topic(kafka.bootstrap_servers, topic, 2)
    truth_dir = tmp_path_factory.mktemp("truth")
    sending = threading.Event()

    def progress(sent: int, planned: int) -> None:
        if sent:
            sending.set()

    thread, out = _run_in_thread(generator.generate, spec.parse(WORKLOAD), kafka.bootstrap_servers,
                                 truth_dir, topic=topic, partitions_from=STEPS, progress=progress)
    _wait_until(lambda: sending.is_set() or "error" in out, 30, "the generator did not start sending")
    time.sleep(1.0)
    with admin_client(kafka.bootstrap_servers) as admin:
        admin.create_partitions({topic: NewPartitions(total_count=4)})
    thread.join(60)
    assert not thread.is_alive(), "generate() did not return within 60 s"
    if "error" in out:
        raise out["error"]
    return kafka.bootstrap_servers, topic, out["result"], truth.read(truth_dir)


class TestAddedPartitions:
    """A real broker whose topic gains two partitions while the generator sends."""

    def test_every_event_was_acknowledged(self, run):
        """Every planned event has a real offset and the report counts no failure."""
        _, _, report, t = run
        assert report["failed"] == 0 and len(t) == report["events"] > 1000, (report["failed"], len(t))
        assert (t["offset"] >= 0).all(), f"{(t['offset'] < 0).sum()} events without an offset"

    def test_events_after_the_step_reach_the_new_partitions(self, run):
        """Events intended from 2 s on reach partitions 2 and 3; none before; the report lists all 4."""
        _, _, report, t = run
        after = t["intended_ms"] >= report["start_ms"] + 2000
        assert set(t.loc[~after, "partition"]) == {0, 1}
        assert set(t.loc[after, "partition"]) == {0, 1, 2, 3}
        assert report["per_partition"] == t.groupby("partition").size().tolist()
        assert report["partitions_from"] == [[2.0, 4]]

    def test_truth_is_where_kafka_has_each_event(self, run):
        """Each event's (partition, offset) in the truth holds that event when read back."""
        bootstrap, topic, _, t = run
        back = _read_back(bootstrap, topic, 4, len(t))
        assert len(back) == len(t), (len(back), len(t))
        at = [back.get((p, o)) for p, o in zip(t["partition"], t["offset"], strict=True)]
        wrong = int((np.array(at, dtype=object) != t["event_id"].to_numpy()).sum())
        assert wrong == 0, f"{wrong} of {len(t)} events are not where their truth says"


class TestMissingPartitions:
    """A step to partitions that never appear."""

    def test_the_generator_fails_with_a_problem_within_the_deadline(self, kafka, tmp_path):
        """No partitions added: Problem naming the topic, the counts and a fix, soon after the deadline."""
        topic = f"repartition-missing-{time.time_ns()}"
        generator.create_topic(kafka.bootstrap_servers, topic, 2)
        w = spec.parse({**WORKLOAD, "duration": "2s"})
        began = time.monotonic()
        with pytest.raises(Problem) as info:
            generator.generate(w, kafka.bootstrap_servers, tmp_path, topic=topic,
                               partitions_from=[(0.5, 4)], partitions_timeout_s=1.0)
        took = time.monotonic() - began
        assert topic in info.value.problem and "has 2 partitions" in info.value.problem \
            and "up to 4 partitions" in info.value.problem, info.value.problem
        assert "kafka-partitions" in info.value.fix
        assert took < 10, f"generate() took {took:.1f} s to fail with a 1 s deadline"
