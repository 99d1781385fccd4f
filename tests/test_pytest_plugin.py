"""The pytest plugin in a user's own suite (pytester, in a subprocess, as a user's project runs
it): a bad scenario fails its test with the loader's message before anything starts, a kept
run directory exists, and the harness's own warnings do not reach the user's report."""

from __future__ import annotations

import sys
from pathlib import Path

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


@pytest.mark.parametrize("call, said", [
    ('harness_run("scenario.toml", workload={"duration": "forever"})',
     'scenario.toml with the test\'s overrides of workload: workload.duration = "forever"'),
    ('harness_run("scenario.toml", case="oe")', "has no such case (cases: eo)"),
    ('harness_hunt("scenario.toml", case="oe")', "no such case"),
])
def test_a_scenario_error_comes_before_a_missing_java(pytester, monkeypatch, call, said):
    """PATH holding the Python environment alone (no `java`, as the unit lane may run): an override
    or a case the scenario refuses is reported as such, and nothing asks for `java` (the plugin
    started the session's services before it laid the overrides over the scenario, and said
    "`java` was not found on PATH" instead)."""
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    pytester.makefile(".toml", scenario=BAD.replace('duration = "30s"', 'duration = "60s"'))
    pytester.makepyfile(test_mine=f"""
        def test_it(harness_run, harness_hunt):
            {call}
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert said in out and "`java`" not in out and "starting Kafka" not in out, out


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
