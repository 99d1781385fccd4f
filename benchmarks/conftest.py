"""Fixtures of the generator benchmarks.

The root conftest.py applies here too: `kafka` is the session's real KRaft broker.
Benchmarks record numbers (`benchmark.extra_info`, written to the --benchmark-json file and
printed at the end of the run); speed goals are read from those numbers, never asserted.
"""

from __future__ import annotations

import gc
import os
import uuid

import pytest

from benchmarks._measure import FULL, PARTITIONS, QUICK, Sizes
from workloads.generator import create_topic
from workloads.wait import wait_until

_EXTRA = pytest.StashKey[list]()


@pytest.fixture
def new_topic(kafka):
    """A factory of fresh topics with PARTITIONS partitions, each led by the broker before it returns.

    Each call and the teardown also free unreachable Kafka clients now: the generator's Sender
    and its producer form a reference cycle, and a librdkafka handle left for the cyclic GC
    keeps its threads polling the broker during the next measurement (and after the broker stops).
    """
    def make(label: str, partitions: int = PARTITIONS) -> str:
        gc.collect()
        topic = f"bench-{label}-{uuid.uuid4().hex[:8]}"
        create_topic(kafka.bootstrap_servers, topic, partitions)
        _wait_for_leaders(kafka.bootstrap_servers, topic, partitions)
        return topic

    yield make
    gc.collect()


def _wait_for_leaders(bootstrap_servers: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap_servers})

    def led() -> bool:
        t = admin.list_topics(topic, timeout=10).topics.get(topic)
        return (t is not None and t.error is None and len(t.partitions) == partitions
                and all(p.leader >= 0 for p in t.partitions.values()))

    wait_until(led, 30, 0.1, f"topic {topic}: some of its {partitions} partitions have no leader after 30 s")


def pytest_addoption(parser):
    group = parser.getgroup("bench", "the harness's benchmarks (tox -e bench -- OPTIONS)")
    group.addoption("--quick", action="store_true",
                    help="the headline scenario with its [quick] overrides and the micro-benchmarks at their "
                         "quick sizes (at most 300 s on 2 cores); the end-to-end variations, your job's "
                         "examples and the planted bugs among them, wait for a full run")
    group.addoption("--out", default=None, help="the scenario run's directory (default: results/<run-id>/)")
    group.addoption("--repeat", type=int, default=1, help="run each case of the scenario N times")
    group.addoption("--nexmark", action="store_true",
                    help="also run Nexmark's queries against their oracles, without and under faults "
                         "(benchmarks/test_nexmark.py: about 20 minutes with --quick)")


def pytest_collection_modifyitems(config, items):
    """--quick is the headline scenario and the micro-benchmarks at their quick sizes (issue 48: at
    most 300 s on 2 cores): the end-to-end variations (marker e2e_variation: your job's three
    examples, the planted bugs with their twins, which tox -e e2e also runs small on every
    commit) wait for a full run. Nexmark's runs wait for --nexmark."""
    if not config.getoption("--nexmark"):
        ask = pytest.mark.skip(reason="Nexmark's queries end to end: tox -e bench -- --nexmark runs them")
        for item in items:
            if item.get_closest_marker("nexmark"):
                item.add_marker(ask)
    if not config.getoption("--quick"):
        return
    skip = pytest.mark.skip(reason="an end-to-end variation: tox -e bench without --quick runs it")
    for item in items:
        if item.get_closest_marker("e2e_variation"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def sizes(request) -> Sizes:
    """How much each benchmark does: FULL, or QUICK with --quick."""
    return QUICK if request.config.getoption("--quick") else FULL


@pytest.fixture
def pacing_seconds(sizes) -> float:
    """How long each pacing benchmark runs: BENCH_PACING_S (default 20, 3 with --quick; the
    baseline's runs set 60)."""
    raw = os.environ.get("BENCH_PACING_S", f"{sizes.pacing_s:g}")
    try:
        seconds = float(raw)
    except ValueError:
        raise pytest.UsageError(f"BENCH_PACING_S={raw!r} is not a number of seconds; set e.g. 60") from None
    if seconds < 3:
        raise pytest.UsageError(f"BENCH_PACING_S={raw!r} is too short: the first and last second are "
                                "partial, so at least 3 s are needed; set e.g. 60")
    return seconds


@pytest.fixture(autouse=True)
def _keep_extra_info(request, benchmark):
    yield
    if benchmark.extra_info:
        request.config.stash.setdefault(_EXTRA, []).append((request.node.name, dict(benchmark.extra_info)))


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def pytest_terminal_summary(terminalreporter, config):
    rows = config.stash.get(_EXTRA, [])
    if not rows:
        return
    terminalreporter.section("generator benchmarks: recorded numbers (extra_info)")
    for name, info in rows:
        terminalreporter.write_line(name)
        for key, value in info.items():
            terminalreporter.write_line(f"    {key:<24} {_fmt(value)}")
