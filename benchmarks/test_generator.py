"""Benchmarks of the generator (workloads/generator.py): its unpaced rate against the raw
client's on the same messages, and how closely it keeps a constant rate.

Goals (issue): >= 250,000 events/s unpaced and >= 90% of the raw client's rate; pacing
within +-1% over 60 s (BENCH_PACING_S=60) from 1,000 to 200,000 events/s. They are read
from the recorded numbers, never asserted; losing an event is asserted (correctness).
"""

from __future__ import annotations

import statistics
import time

import pytest

from benchmarks._measure import (
    KAFKA_PYTHON_CONFIG,
    PARTITIONS,
    CpuMeter,
    confluent_tight_loop,
    generator_messages,
    kafka_python_tight_loop,
    pacing_numbers,
    planned,
    workload,
)
from workloads.generator import generate

THROUGHPUT_EPS = 100_000   # unpaced, so only the count matters: sizes.throughput_events of them
# rounds (sizes.rounds, 5): the loops' rates vary by tens of percent from run to run on 2 shared cores
PACING_RATES = (1_000, 10_000, 100_000, 200_000)   # 200,000: the upper target


def _generate_all(spec, bootstrap_servers: str, topic: str, truth_dir, pace: bool) -> dict:
    """One generator run that must deliver every planned event."""
    report = generate(spec, bootstrap_servers, truth_dir, topic=topic, pace=pace)
    want = planned(spec)
    assert report["events"] == want, (f"the generator lost events: {report['events']:,} of {want:,} planned "
                                      f"were acknowledged ({report['failed']:,} failed) on {topic}")
    return report


@pytest.mark.benchmark(group="throughput")
def test_generator_vs_raw_client(benchmark, kafka, new_topic, tmp_path, sizes):
    """The unpaced generator against the same client's tight loops on the same messages.

    Setup: the generator's own keys, values and partitions (sizes.throughput_events: 1,000,000,
    or 100,000 with --quick), built up front; one untimed warm-up of the raw loop.
    Steps: sizes.rounds rounds, each on fresh topics: confluent-kafka's tight loop with a delivery
    report per message, then without any (the round's setup, so pytest-benchmark times only
    the generator), then one unpaced generator run (the timed call). The generator's rate is
    its report's `acked_eps`, first produce() to last acknowledgement: the raw loops' window;
    the call's own rate (connecting, planning the first block, closing truth) is kept too.
    Then kafka-python's tight loop on sizes.kafka_python_events of the messages, three times.
    Records the medians, each round's ratio and every run, and the CPU microseconds per event
    that the client process (all its threads) and the broker spent in the raw loop with
    reports and in the generator run.
    """
    bootstrap = kafka.bootstrap_servers
    spec = workload(THROUGHPUT_EPS, sizes.throughput_events / THROUGHPUT_EPS, PARTITIONS)
    messages = generator_messages(spec)
    assert len(messages) == planned(spec), f"built {len(messages):,} messages for {planned(spec):,} events"
    confluent_tight_loop(bootstrap, new_topic("warm-up"), messages.head(sizes.kafka_python_events))
    meter = CpuMeter(kafka.pids())
    raw_eps: list[float] = []
    bare_eps: list[float] = []
    generator_eps: list[float] = []
    call_eps: list[float] = []
    cpu: dict[str, list[dict]] = {"raw": [], "generator": []}

    def raw_then_prepare():
        eps, used = meter.measure(len(messages), confluent_tight_loop, bootstrap, new_topic("raw"), messages)
        raw_eps.append(eps)
        cpu["raw"].append(used)
        bare_eps.append(confluent_tight_loop(bootstrap, new_topic("bare"), messages, reports=False))
        return (new_topic("generator"), tmp_path / f"truth-{len(raw_eps)}"), {}

    def generator_run(topic, truth_dir):
        start = time.perf_counter()
        report, used = meter.measure(len(messages), _generate_all, spec, bootstrap, topic, truth_dir,
                                     pace=False)
        call_eps.append(report["events"] / (time.perf_counter() - start))
        generator_eps.append(report["acked_eps"])
        cpu["generator"].append(used)

    benchmark.pedantic(generator_run, setup=raw_then_prepare, rounds=sizes.rounds, iterations=1)
    kafka_python_eps = [kafka_python_tight_loop(bootstrap, new_topic("kafka-python"),
                                                messages.head(sizes.kafka_python_events)) for _ in range(3)]
    raw, bare, gen, kp = (statistics.median(x) for x in (raw_eps, bare_eps, generator_eps, kafka_python_eps))
    benchmark.extra_info.update({
        "events": len(messages), "partitions": PARTITIONS, "value_bytes_mean": messages.mean_value_bytes,
        "raw_eps": raw, "raw_no_reports_eps": bare, "generator_eps": gen,
        "generator_call_eps": statistics.median(call_eps),
        "ratio": gen / raw,
        "ratio_per_round": statistics.median(g / r for g, r in zip(generator_eps, raw_eps, strict=True)),
        "ratio_no_reports": gen / bare, "kafka_python_eps": kp, "confluent_over_kafka_python": raw / kp,
        "raw_eps_runs": raw_eps, "raw_no_reports_eps_runs": bare_eps, "generator_eps_runs": generator_eps,
        "generator_call_eps_runs": call_eps, "kafka_python_eps_runs": kafka_python_eps,
        **{f"{run}_cpu_us_per_event_{who}": statistics.median(c[who] for c in cpu[run])
           for run in cpu for who in ("client", "broker")},
        "kafka_python_events": sizes.kafka_python_events, "kafka_python_config": KAFKA_PYTHON_CONFIG,
        "goal_generator_eps": 250_000, "goal_ratio": 0.9,
    })


@pytest.mark.benchmark(group="pacing")
@pytest.mark.parametrize("eps", PACING_RATES, ids=str)
def test_pacing_error(benchmark, kafka, new_topic, tmp_path, pacing_seconds, eps):
    """How closely the generator keeps a constant rate.

    Setup: a fresh topic.
    Steps: one generator run paced at `eps` for BENCH_PACING_S seconds (the timed call).
    Records target and achieved rate, the pacing error, the worst full second's error
    (sent_per_s against intended_per_s) and the schedule slip p50/p99/p99.9/max in ms.
    """
    spec = workload(eps, pacing_seconds, PARTITIONS)
    report = benchmark.pedantic(_generate_all, args=(spec, kafka.bootstrap_servers, new_topic(f"pace-{eps}"),
                                                     tmp_path / "truth", True), rounds=1, iterations=1)
    benchmark.extra_info.update({"duration_s": pacing_seconds, **pacing_numbers(report), "goal_error": 0.01})


@pytest.mark.benchmark(group="encoding")
@pytest.mark.parametrize("kind", ["events", "nexmark"])
def test_cost_per_event_without_kafka(benchmark, kind):
    """What each event costs the generator before Kafka: its plan's blocks (2,000 events/s for
    100 s) encoded for the wire, and, for Nexmark, its fields for ground truth. Nexmark's model
    draws every field per event; docs/pipelines-and-sinks.md ("Nexmark") has both figures."""
    from workloads.generator import nexmark
    from workloads.generator.encode import encoder_for
    from workloads.generator.plan import Planner
    from workloads.generator.spec import parse

    spec = parse({"kind": kind, "duration": "100s", "seed": 1, "rate": {"eps": 2000}})
    planner = Planner(spec, 1_700_000_000_000, (0, 1), ())
    blocks = list(planner)
    encoder = encoder_for(spec, planner.keys.names)
    model = nexmark.Model(spec.nexmark, spec.seed, spec.mean_eps) if kind == "nexmark" else None

    def encode_all() -> int:
        for block in blocks:
            encoder.keys_of(block)
            encoder.values(block)
            if model is not None:
                nexmark.truth_columns(model.columns(block.event_id, block.event_time_ms))
        return sum(len(b.event_id) for b in blocks)

    events = benchmark.pedantic(encode_all, rounds=3, iterations=1)
    assert events == 200_000
    benchmark.extra_info["us_per_event"] = round(benchmark.stats.stats.min / events * 1e6, 3)
