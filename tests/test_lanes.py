"""The test lanes: `pytest -m unit` needs no Java, no service and no browser, so it runs on a
machine where nothing but the Python packages is installed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import REPO

# tests that run a program of the machine's, not a Python package
NEEDS_A_PROGRAM = ("test_the_page_renders_in_headless_chromium",)


@pytest.mark.unit
def test_the_unit_lane_holds_no_test_that_needs_an_installed_program():
    """Collected with -m unit, the lane has its tests, and none of those that start Chromium."""
    collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "unit",
                                "-p", "no:cacheprovider"], capture_output=True, text=True, cwd=REPO,
                               timeout=120).stdout
    assert "tests/test_scenario.py" in collected, collected[-2000:]
    assert not [name for name in NEEDS_A_PROGRAM if name in collected]


@pytest.mark.unit
def test_tox_runs_the_unit_lane_with_path_holding_the_python_environment_alone():
    """`tox -e test` runs the unit lane as a machine with nothing installed runs it: PATH holds
    the environment's bin directory alone (no java, mvn, psql, go, chromium) and JAVA_HOME is
    unset; then the integration lane with the machine's PATH. Every CI run so runs the whole
    unit lane that way at no extra cost (issue 48: tests/test_pytest_plugin.py's planted
    scenario error came out as "`java` was not found on PATH", which no collection could see;
    running the lane a second time inside tox -e e2e took 9 min on a loaded machine)."""
    import configparser

    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / "tox.ini")
    commands = [c.strip() for c in tox["testenv:test"]["commands"].strip().splitlines()]
    unit = 'env -u JAVA_HOME PATH={envbindir} pytest -m "unit and not long_e2e"'
    assert commands[0].startswith(unit), commands
    assert commands[1].startswith("pytest -m \"integration and not long_e2e\""), commands
    assert len(commands) == 2, commands


@pytest.mark.unit
def test_the_lanes_run_on_workers_that_start_the_longest_tests_first():
    """tox's three lanes run on pytest-xdist's workers, a module or class to a worker (a module's
    shared run runs once), and the collection puts the tests marked `minutes(n)` first, the
    longest first: loadscope hands out work in that order (not by its count of tests: xdist's
    default), so the long ones run side by side (the three every-kind cases queued last on one
    worker kept the integration lane at 854 s while the other worker waited)."""
    import configparser

    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / "tox.ini")
    assert tox["testenv"]["workers"].strip() == ("-n {env:HARNESS_TEST_WORKERS:auto} --dist loadscope "
                                                 "--no-loadscope-reorder")
    lanes = [*tox["testenv:test"]["commands"].strip().splitlines(), tox["testenv:e2e"]["commands"]]
    assert all("{[testenv]workers}" in lane for lane in lanes), lanes
    collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "long_e2e",
                                "-p", "no:cacheprovider"], capture_output=True, text=True, cwd=REPO,
                               timeout=120).stdout.splitlines()
    ids = [line for line in collected if "::" in line]
    assert ids[0].startswith("tests/test_job_plants_e2e.py::"), ids[:3]
    marked = [i for i, node in enumerate(ids) if not node.startswith("tests/test_locust.py::")]
    assert marked == list(range(len(marked))), ids   # every other e2e case is marked, and comes first


@pytest.mark.unit
def test_the_longest_first_order_keeps_the_rest_in_place():
    """conftest's order: by minutes(n), descending; the unmarked in their collected order."""
    from types import SimpleNamespace

    from conftest import _minutes

    def item(name, minutes=None):
        marker = SimpleNamespace(args=(minutes,)) if minutes is not None else None
        return SimpleNamespace(name=name, get_closest_marker=lambda _name, m=marker: m)

    items = [item("a"), item("b", 1), item("c"), item("d", 4), item("e", 1)]
    items.sort(key=_minutes, reverse=True)
    assert [i.name for i in items] == ["d", "b", "e", "a", "c"]


@pytest.mark.unit
def test_auto_is_one_worker_a_core_at_most_two(monkeypatch):
    """`-n auto` (tox's default) gives a worker per core pytest may use, at most two: a machine
    pinned to one core (taskset -c 0) runs one, a 64-core one two (each worker's test starts a
    Kafka broker, PostgreSQL and a Spark local-cluster of its own)."""
    import os

    from conftest import pytest_xdist_auto_num_workers

    for cores, workers in [({0}, 1), ({0, 1}, 2), (set(range(64)), 2)]:
        monkeypatch.setattr(os, "sched_getaffinity", lambda _pid, c=cores: c)
        assert pytest_xdist_auto_num_workers(None) == workers
