"""What each stage of the generator costs per event, without Kafka: planning, encoding,
preparing for the sender (ranks and anchors) and writing ground truth.

On two cores every one of them competes with the client's and the broker's threads for
CPU, so together they bound how close the generator comes to the raw client loop
(test_generator.py). Each benchmark records `ns_per_event`, the median round.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from benchmarks._measure import PARTITIONS, workload
from workloads.generator import truth
from workloads.generator.anchors import prepare
from workloads.generator.encode import Encoder
from workloads.generator.plan import Planner

EVENTS_EPS = 100_000   # the throughput benchmark's workload: sizes.stage_events events


@pytest.fixture(scope="module")
def planned(sizes):
    """The throughput benchmark's events (1,000,000; 200,000 with --quick), planned and encoded once."""
    spec = workload(EVENTS_EPS, sizes.stage_events / EVENTS_EPS, PARTITIONS)
    planner = Planner(spec, time.time_ns() // 1_000_000)
    blocks = list(planner)
    encoder = Encoder(spec.payload, planner.keys.names)
    return planner, blocks, encoder


def _per_event(benchmark, blocks, fn, rounds: int) -> None:
    events = sum(len(b) for b in blocks)
    benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update({"events": events,
                                 "ns_per_event": benchmark.stats.stats.median / events * 1e9})


@pytest.mark.benchmark(group="stages")
def test_plan(benchmark, planned, sizes):
    """Planning: schedule, keys, delays, payload draws and partitions of every event."""
    planner, blocks, _ = planned
    _per_event(benchmark, blocks, lambda: list(planner), sizes.rounds)


@pytest.mark.benchmark(group="stages")
def test_encode(benchmark, planned, sizes):
    """JSON values as the Python bytes the client takes, and the keys."""
    _, blocks, encoder = planned
    _per_event(benchmark, blocks, lambda: [(encoder.values(b), encoder.keys_of(b)) for b in blocks],
               sizes.rounds)


@pytest.mark.benchmark(group="stages")
def test_prepare(benchmark, planned, sizes):
    """Ranks within partitions, anchors and the partition list of every block."""
    _, blocks, _ = planned
    _per_event(benchmark, blocks, lambda: [prepare(b, [], []) for b in blocks], sizes.rounds)


@pytest.mark.benchmark(group="stages")
def test_truth(benchmark, planned, tmp_path, sizes):
    """Ground truth: every block written to Parquet as the truth thread does."""
    planner, blocks, _ = planned

    def write() -> None:
        writer = truth.TruthWriter(tmp_path / "part.parquet", planner.keys.names)
        for b in blocks:
            offset = np.arange(len(b), dtype=np.int64)
            writer.write(b, b.intended_us, offset, b.intended_us // 1000, np.ones(len(b), dtype=bool))
        writer.close()

    _per_event(benchmark, blocks, write, sizes.rounds)
