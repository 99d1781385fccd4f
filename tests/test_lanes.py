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
