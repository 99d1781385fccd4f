"""A sink whose constructor raises fails its case before any Spark driver starts, and says that
its constructor raised (it started the driver and exited 2 after 98 s with `cases: []`, and the
message did not name the constructor).

Setup: the session's Kafka and PostgreSQL (the pytest plugin's shared services)."""

from __future__ import annotations

from tests.helpers import REPO


def test_a_sink_whose_constructor_raises_fails_its_case_at_once(harness_run):
    result = harness_run(REPO / "tests" / "broken_sink" / "scenario.toml")
    case = result.case("broken")
    assert not case.verdict.holds
    assert "its constructor Broken(ctx) raised ValueError: no table name given" in case.verdict.detail, case
    assert case.sections["spark_pids"]["driver"] is None, "a driver was started"
    assert result.status == "completed" and case.faults == []
