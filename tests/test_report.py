"""The terminal table."""

from dataclasses import asdict

from harness.report.table import render
from harness.results.model import RunResult
from harness.results.verdict import verdict
from tests.test_summary import sample_summary


class TestRender:
    def test_a_row_per_case_with_verdict_and_counts(self):
        """The case name, PASS, thousands separators and the status line appear."""
        s = sample_summary()
        s["cases"][0]["events"]["produced"] = 12345
        text = render(RunResult.from_json(s))
        assert "c " in text and "PASS" in text and "12,345" in text
        assert text.splitlines()[-1] == "status: completed  verdict: PASS  run: r1"

    def test_a_failed_verdict_reads_fail_and_null_latency_reads_dash(self):
        """A failing case is visible at a glance; missing numbers are '-', not 0."""
        s = sample_summary()
        s["cases"][0]["verdict"] = asdict(verdict("exactly-once", 5, 0, 0, expected_count=9))
        row = render(RunResult.from_json(s)).splitlines()[2]
        assert "FAIL" in row and " - " in row
