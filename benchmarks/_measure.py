"""What the generator benchmarks measure besides the generator: the clients' own tight loops,
and the numbers read from a generator report."""

from __future__ import annotations

import time
from dataclasses import dataclass

from workloads.generator import shapes
from workloads.generator.producer import PRODUCER_CONFIG, make_producer
from workloads.generator.spec import WorkloadSpec, parse

BURST = 2048   # messages between two poll(0) calls, as the generator's sender does
PARTITIONS = 4


@dataclass(frozen=True)
class Sizes:
    """How much each benchmark does (`--quick` picks QUICK)."""

    throughput_events: int     # the generator against the raw client
    kafka_python_events: int   # kafka-python's tight loop, on the first of the same messages
    rounds: int                # rounds of the throughput and stage benchmarks
    stage_events: int          # each generator stage
    pacing_s: float            # each pacing run (BENCH_PACING_S overrides)
    check_events: int          # each checker benchmark (BENCH_CHECK_EVENTS overrides)


FULL = Sizes(1_000_000, 200_000, 5, 1_000_000, 20.0, 10_000_000)
QUICK = Sizes(100_000, 20_000, 3, 200_000, 3.0, 1_000_000)


def workload(eps: float, duration_s: float, partitions: int) -> WorkloadSpec:
    """A constant-rate workload with the generator's default keys and payload."""
    return parse({"duration": f"{duration_s:g}s", "partitions": partitions, "rate": {"eps": eps}})


def planned(spec: WorkloadSpec) -> int:
    return shapes.expected_count(spec.shape)


@dataclass
class Messages:
    """Keys, values and partitions ready to produce, built before any clock starts."""

    keys: list[str]
    values: list[bytes]
    partitions: list[int]

    def __len__(self) -> int:
        return len(self.values)

    def head(self, n: int) -> Messages:
        return Messages(self.keys[:n], self.values[:n], self.partitions[:n])

    @property
    def mean_value_bytes(self) -> float:
        return sum(len(v) for v in self.values) / len(self.values)


def generator_messages(spec: WorkloadSpec) -> Messages:
    """The messages the generator sends for `spec`, made by its own planner and encoder, so the
    raw clients send values of exactly the generator's sizes, keys and partitions."""
    from workloads.generator.encode import Encoder
    from workloads.generator.plan import Planner

    planner = Planner(spec, time.time_ns() // 1_000_000)
    encoder = Encoder(spec.payload, planner.keys.names)
    out = Messages([], [], [])
    for block in planner:
        out.keys += encoder.keys_of(block)
        out.values += encoder.values(block)
        out.partitions += block.partition.tolist()
    return out


def confluent_tight_loop(bootstrap_servers: str, topic: str, messages: Messages,
                         reports: bool = True) -> float:
    """Events/s of confluent-kafka producing `messages` in a tight loop with the generator's
    producer config; with `reports`, a delivery callback per message that keeps its offset
    (the information the generator records), without, none (the client's ceiling: nothing
    learnt but that flush() returned). The clock runs from the first produce() to the end of
    flush(), after the client has connected."""
    offsets: list[int] = []
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is None:
            offsets.append(msg.offset())
        else:
            errors.append(str(err))

    producer = make_producer(bootstrap_servers, on_delivery if reports else None)
    producer.list_topics(topic, timeout=30)
    keys, values, parts, n = messages.keys, messages.values, messages.partitions, len(messages)
    produce, poll = producer.produce, producer.poll
    start = time.perf_counter()
    for i in range(0, n, BURST):
        for j in range(i, min(i + BURST, n)):
            try:
                produce(topic, values[j], keys[j], parts[j])
            except BufferError:   # librdkafka's queue is full: let it drain, then send again
                _produce_when_room(producer, topic, values[j], keys[j], parts[j])
        poll(0)
    left = producer.flush(60)
    elapsed = time.perf_counter() - start
    if left or errors or (reports and len(offsets) != n):
        raise AssertionError(f"confluent-kafka delivered {len(offsets):,} of {n:,} messages "
                             f"({left:,} unflushed, errors {errors[:3]})")
    return n / elapsed


def _produce_when_room(producer, topic: str, value: bytes, key: str, partition: int) -> None:
    while True:
        producer.poll(0.01)
        try:
            producer.produce(topic, value, key, partition)
            return
        except BufferError:
            continue


KAFKA_PYTHON_CONFIG = {   # the generator's producer settings, in kafka-python's names
    "acks": "all", "enable_idempotence": True, "linger_ms": PRODUCER_CONFIG["linger.ms"],
    "batch_size": PRODUCER_CONFIG["batch.size"],
}


def kafka_python_tight_loop(bootstrap_servers: str, topic: str, messages: Messages) -> float:
    """Events/s of kafka-python's KafkaProducer sending `messages` in a tight loop, with the
    generator's settings and a callback that keeps offsets; send() to the end of flush()."""
    from kafka import KafkaProducer

    keys = [k.encode() for k in messages.keys]
    values = messages.values
    parts, n = messages.partitions, len(messages)
    offsets: list[int] = []
    errors: list[str] = []
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, **KAFKA_PYTHON_CONFIG)
    try:
        producer.partitions_for(topic)   # metadata before the clock starts
        send = producer.send
        start = time.perf_counter()
        for j in range(n):
            send(topic, value=values[j], key=keys[j], partition=parts[j]) \
                .add_callback(lambda md: offsets.append(md.offset)) \
                .add_errback(lambda exc: errors.append(str(exc)))
        producer.flush(60)
        elapsed = time.perf_counter() - start
    finally:
        producer.close(5)
    if errors or len(offsets) != n:
        raise AssertionError(f"kafka-python delivered {len(offsets):,} of {n:,} messages "
                             f"(errors {errors[:3]})")
    return n / elapsed


class CpuMeter:
    """CPU time (user + system, every thread) that this process and the broker spend on events.

    On two cores the generator, the client's threads and the broker share the machine, so
    the rate follows how much CPU each event costs all of them; this says where it goes."""

    def __init__(self, broker_pids: list[int]):
        import psutil

        self.processes = {"client": [psutil.Process()], "broker": [psutil.Process(p) for p in broker_pids]}

    def _now(self) -> dict[str, float]:
        return {who: sum(sum(p.cpu_times()[:2]) for p in ps) for who, ps in self.processes.items()}

    def measure(self, events: int, fn, *args, **kwargs):
        """fn(*args, **kwargs) and the CPU microseconds per event it took {"client": .., "broker": ..}."""
        before = self._now()
        result = fn(*args, **kwargs)
        after = self._now()
        return result, {who: (after[who] - before[who]) / events * 1e6 for who in before}


def worst_second_error(sent_per_s: list[int], intended_per_s: list[int]) -> float | None:
    """The signed relative error sent/intended - 1 of the run's worst full second; the first and
    the last second are partial and skipped. None when the run has no full second."""
    errors = [(sent_per_s[s] if s < len(sent_per_s) else 0) / intended_per_s[s] - 1
              for s in range(1, len(intended_per_s) - 1) if intended_per_s[s]]
    return max(errors, key=abs) if errors else None


def pacing_numbers(report: dict) -> dict:
    """What a paced generator report says about its pacing, slips in milliseconds."""
    slip = report["schedule_slip_us"]
    return {
        "events": report["events"],
        "target_eps": report["target_eps"],
        "achieved_eps": report["achieved_eps"],
        "pacing_error": report["pacing_error"],
        "worst_second_error": worst_second_error(report["sent_per_s"], report["intended_per_s"]),
        **{f"slip_{q}_ms": slip[q] / 1000 for q in ("p50", "p99", "p99.9", "max")},
    }
