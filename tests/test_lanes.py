"""The test lanes: `pytest -m unit` needs no Java, no service and no browser, so it runs on a
machine where nothing but the Python packages is installed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.unit

# tests that run a program of the machine's, not a Python package
NEEDS_A_PROGRAM = ("test_the_page_renders_in_headless_chromium",)


def test_the_unit_lane_holds_no_test_that_needs_an_installed_program():
    """Collected with -m unit, the lane has its tests, and none of those that start Chromium."""
    collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "unit",
                                "-p", "no:cacheprovider"], capture_output=True, text=True, cwd=REPO,
                               timeout=120).stdout
    assert "tests/test_scenario.py" in collected, collected[-2000:]
    assert not [name for name in NEEDS_A_PROGRAM if name in collected]
