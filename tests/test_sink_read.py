"""A sink whose read() raises leaves its case UNKNOWN (issue 41), not FAIL and not a crash of the
run: the case ran, its output could not be read back, so its guarantee cannot be decided. The
verdict names the exception, the traceback is kept in sink-error.txt, and the run's worst verdict
is UNKNOWN (the CLI's exit 4; tests/test_verdict.py pins the code).

Setup: the session's Kafka and PostgreSQL (the pytest plugin's shared services); an 8 s workload
into a sink that keeps nothing and whose read() raises ConnectionError."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.results.verdict import UNKNOWN
from tests.helpers import REPO

pytestmark = [pytest.mark.long_e2e, pytest.mark.minutes(0.9)]   # a run of its own, about 30 s: tox -e e2e


def test_a_sink_whose_read_raises_leaves_its_case_unknown(harness_run):
    result = harness_run(REPO / "tests" / "unreadable_sink" / "scenario.toml")
    case = result.case("unreadable")
    assert case.verdict.status == UNKNOWN and not case.verdict.holds, case
    assert ("read() raised ConnectionError: the sink's store went away before it could be read"
            in case.verdict.detail), case
    kept = Path(case.verdict.detail.rsplit("traceback in ", 1)[1])
    assert kept.name == "sink-error.txt" and "ConnectionError" in kept.read_text()
    assert result.status == "completed" and result.verdict_status == UNKNOWN
    assert case.sections["spark_pids"]["driver"] is not None and case.throughput_eps["offered"] > 0
