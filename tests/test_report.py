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

    def test_a_workload_sent_past_its_duration_says_how_long_and_why(self):
        """A case whose workload waited for its faults says so under its verdict (its figures cover
        the longer workload); one sent for its duration adds no line."""
        s = sample_summary()
        plain = render(RunResult.from_json(s))
        s["cases"][0]["workload"] = {"duration_s": 55.0, "max_duration_s": 165.0, "sent_for_s": 64.0,
                                     "extended_by_s": 9.0, "cut_at_max_duration": False,
                                     "why": "kill-driver had not been read past"}
        text = render(RunResult.from_json(s))
        assert "workload sent for 64 s (its 55 s duration + 9 s): kill-driver had not been read past" in text
        assert "workload sent for" not in plain

    def test_a_workload_cut_at_its_cap_says_so(self):
        s = sample_summary()
        s["cases"][0]["workload"] = {"duration_s": 10.0, "max_duration_s": 30.0, "sent_for_s": 30.0,
                                     "extended_by_s": 20.0, "cut_at_max_duration": True, "why": "x"}
        assert "cut at max_duration (30 s)" in render(RunResult.from_json(s))
