"""Session-scoped real services for the integration tests: one Kafka broker and one
PostgreSQL server per test session, stopped (and proven gone) at the end.

Test lanes: a test that uses a real service (directly or through another fixture) is
marked `integration`, every other test `unit`, so `pytest -m unit` runs in seconds
without Java. A module that starts services on its own says `pytestmark = pytest.mark.integration`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _fault_kinds_restored():
    """A scenario's `fault_kinds` registers its kinds for the process; a test that loads one
    leaves the registry as it found it, so no later test draws a user's kind (a hunt's covering
    plans change with the kinds drawable: tests/test_hunt_plan.py failed after
    examples/fault-kinds/ was loaded in the same session)."""
    from faults.registry import KINDS

    before = dict(KINDS)
    yield
    KINDS.clear()
    KINDS.update(before)


@pytest.fixture(scope="session")
def registry():
    from harness.services.base import Registry

    with Registry() as reg:
        yield reg
    leftovers = reg.leftovers()
    assert not leftovers, f"session services left processes alive: {leftovers}"


@pytest.fixture(scope="session")
def kafka(registry, tmp_path_factory):
    """A real KRaft broker on a free loopback port."""
    from harness import jvm
    from harness.services.kafka import KafkaBroker

    jvm.jars("kafka")  # a clear error when `python -m harness fetch-jvm` was not run
    return KafkaBroker(tmp_path_factory.mktemp("kafka"), registry).start().wait_ready()


@pytest.fixture(scope="session")
def postgres(registry, tmp_path_factory):
    """A real PostgreSQL server of our own."""
    from harness.services.postgres import PostgresServer

    return PostgresServer(tmp_path_factory.mktemp("postgres"), registry).start().wait_ready()


class _Started:
    """The plugin's shared services as its runs ask for them (`get()`), already started."""

    def __init__(self, registry, stack):
        self.registry, self.stack = registry, stack

    def get(self):
        return self.registry, self.stack


@pytest.fixture(scope="session")
def harness_services(registry, kafka, postgres):
    """The pytest plugin's shared services (harness/pytest_plugin.py), in this suite the
    session's own broker and server: one Kafka and one PostgreSQL per session, not two."""
    from harness.run.stack import Stack

    stack = Stack(kafka.bootstrap_servers, postgres.url, True, kafka.spark_bootstrap_servers, postgres.url)
    return _Started(registry, stack)


# fixtures that start (or need) a real Kafka, PostgreSQL or Spark
SERVICE_FIXTURES = {"registry", "kafka", "postgres", "driver",
                    "harness_run", "harness_hunt", "harness_services"}   # the pytest plugin's


def pytest_configure(config):
    logging.getLogger("kafka").setLevel(logging.WARNING)
    # tox runs the lanes on pytest-xdist workers side by side (tox.ini's workers): each keeps its
    # services' pid files apart, so that a run starting on one worker does not reap a service
    # another worker's test left behind on purpose (tests/test_services.py TestReapLeftovers,
    # tests/test_faultfs.py TestLeftBehind) before that test looks; its processes inherit it
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:   # under whichever directory is in force: a HARNESS_STATE_DIR of the user's too
        from harness.paths import state_dir

        os.environ["HARNESS_STATE_DIR"] = str(state_dir() / f"xdist-{worker}")


# a user's own suite as docs/pytest.md shows it, kept free of our markers: a run of its own, about
# 50 s, in tox -e e2e (tox -e test's ten minutes hold every kind at its defaults)
USER_SUITE = Path(__file__).parent / "tests" / "user_suite"


@pytest.hookimpl(tryfirst=True)   # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if USER_SUITE in Path(item.path).parents:
            item.add_marker(pytest.mark.long_e2e)
            item.add_marker(pytest.mark.minutes(1.7))
        if item.get_closest_marker("integration") or item.get_closest_marker("unit"):
            continue
        uses_services = SERVICE_FIXTURES & set(item.fixturenames)
        item.add_marker(pytest.mark.integration if uses_services else pytest.mark.unit)
    items.sort(key=_minutes, reverse=True)   # stable: the rest keep their order


# the workers tox's lanes run on by default (`-n auto`): one per core this process may use, at most
# two. Each worker's test runs a Kafka broker, PostgreSQL and a Spark local-cluster of its own, and
# the lanes are CPU-bound: on two cores two workers took CI from 56 to 40 minutes, and more runs
# than cores only slow each (and one pinned to a core is alone on it)
MAX_WORKERS = 2


@pytest.hookimpl(optionalhook=True)   # pytest-xdist's hook; the bench's env has no xdist
def pytest_xdist_auto_num_workers(config) -> int:
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))


def _minutes(item) -> float:
    """A test's `minutes(n)` marker: about n minutes on two cores, it or its module's shared run.
    The longest go first, so that tox's pytest-xdist workers (--dist loadscope
    --no-loadscope-reorder: modules and classes in collection order) start them side by side,
    and no worker runs a long one alone at the end while the other waits: three every-kind
    cases queued last on one worker kept the integration lane at 854 s, where 560 s of work a
    worker was there."""
    marker = item.get_closest_marker("minutes")
    return float(marker.args[0]) if marker else 0.0
