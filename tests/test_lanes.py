"""The test lanes: `pytest -m unit` needs no Java, no service and no browser, so it runs on a
machine where nothing but the Python packages is installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


# integration: it runs the unit lane whole (minutes), so `pytest -m unit` leaves it out
@pytest.mark.long_e2e
@pytest.mark.integration
def test_the_unit_lane_passes_with_path_holding_the_python_environment_alone():
    """The unit lane run as a machine with nothing installed runs it: PATH holds the Python
    environment's bin directory alone (no java, mvn, psql, go, chromium) and JAVA_HOME is unset.
    Every test passes (issue 48: tests/test_pytest_plugin.py's planted scenario error came out as
    "`java` was not found on PATH", which the collection above could not see). The whole lane
    takes minutes, so it runs in tox -e e2e (long_e2e), and the lane it runs leaves it out."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "PYTEST_ADDOPTS")}
    env["PATH"] = str(Path(sys.executable).parent)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "unit and not long_e2e",
                           "-p", "no:cacheprovider"], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=1800)
    tail = proc.stdout[-3000:] + proc.stderr[-1000:]
    assert proc.returncode == 0, tail
    assert " passed" in proc.stdout.splitlines()[-1] and "failed" not in proc.stdout.splitlines()[-1], tail
