"""The pytest plugin in a user's own suite (pytester, in a subprocess, as a user's project runs
it): a bad scenario fails its test with the loader's message before anything starts, a kept
run directory exists, and the harness's own warnings do not reach the user's report."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.unit

BAD = """
name = "mine"
[workload]
duration = "30s"
[workload.rate]
eps = 100
[pipeline]
window = "2s"
watermark = "1s"
[[cases]]
name = "eo"
guarantee = "exactly-once"
[[faults]]
kind = "replay-batch"
at = "8s"
downtime = "1s"
[quick]
duration = "20s"
"""


def test_a_bad_scenario_fails_before_anything_starts(pytester):
    """[quick] duration 20s under a replay at 8 s: refused by the loader, with the key to change
    (quick.duration) and a value that works, before Kafka or PostgreSQL start (the plugin
    started both, then printed some 40 lines of load.py)."""
    pytester.makefile(".toml", scenario=BAD)
    pytester.makepyfile(test_mine="""
        def test_it(harness_run):
            harness_run("scenario.toml", quick=True)
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "the scenario does not validate, so nothing was started" in out, out
    assert "set quick.duration to at least 29s" in out, out
    assert "load.py" not in out and "starting Kafka" not in out, out


def test_the_run_directories_it_lists_exist(pytester):
    """A run refused after its directory was named (an override the loader refuses) left no
    directory: none is listed as kept (the report named a path that did not exist)."""
    pytester.makefile(".toml", scenario=BAD.replace('duration = "30s"', 'duration = "60s"'))
    pytester.makepyfile(test_mine="""
        def test_it(harness_run):
            harness_run("scenario.toml", workload={"duration": "forever"})
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "workload.duration" in out and "run directories kept" not in out, out


def test_the_harness_s_warnings_are_filtered_in_the_user_s_suite(pytester):
    """kafka-python's DeprecationWarnings (its protocol schemas read with a deprecated importlib
    API) are the harness's noise: the plugin filters them for the user (218 of them reached a
    user's report)."""
    pytester.makepyfile(test_mine="""
        def test_it(pytestconfig):
            assert any("read_text|open_text" in line for line in pytestconfig.getini("filterwarnings"))
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
