"""The three-valued verdict (issue 41): PASS, FAIL, or UNKNOWN for a case nothing failed that could
not be decided (a noop sink, a sink whose read() raised, an oracle that raised, a fault that never
came). UNKNOWN is never a pass, has its own exit code (4), and a real failure stays FAIL."""

from __future__ import annotations

from dataclasses import asdict
from types import SimpleNamespace

import pandas as pd
import pytest

from harness.cli import exit_code
from harness.results import summary
from harness.results.model import RunResult, Verdict
from harness.results.verdict import FAIL, PASS, UNKNOWN, unchecked, undecided, verdict, worst
from tests.test_summary import sample_summary

pytestmark = pytest.mark.unit


class TestRules:
    def test_a_noop_sink_is_unknown_never_a_pass(self):
        """A speed run into a sink with nothing to read back held before: it is not judged."""
        v = unchecked("exactly-once", None)
        assert (v.status, v.holds, v.observed) == (UNKNOWN, False, "unchecked")
        assert v.detail.startswith("UNKNOWN: not checked: the sink keeps nothing to read back")

    def test_a_noop_sink_whose_run_failed_fails(self):
        v = unchecked("exactly-once", "the driver died")
        assert v.status == FAIL and v.detail.startswith("FAILED: the driver died")

    def test_a_check_that_could_not_run_is_unknown_naming_why(self):
        v = undecided("at-least-once", "the checker raised KeyError: 'count'")
        assert v.status == UNKNOWN and "KeyError" in v.detail and not v.holds

    def test_a_missed_fault_leaves_held_counts_unknown(self):
        v = verdict("exactly-once", 0, 0, 0, expected_count=9,
                    unknowns=["fault kill-driver at batch 9 never came"])
        assert v.status == UNKNOWN and v.observed == "exactly-once"
        assert v.detail.startswith("UNKNOWN: fault kill-driver at batch 9 never came. Counts: 0 lost")

    def test_a_real_failure_stays_fail_whatever_else_is_unknown(self):
        """Lost beyond the guarantee is FAIL even when a fault also never came; the detail says both."""
        v = verdict("exactly-once", 3, 0, 0, unknowns=["fault pause at 50s never came"])
        assert v.status == FAIL
        assert v.detail.startswith("FAILED: exactly-once did not hold")
        assert "also unknown: fault pause" in v.detail
        assert undecided("exactly-once", "the sink's read() raised", failure="driver died").status == FAIL

    def test_held_counts_pass(self):
        assert verdict("at-least-once", 0, 2, 0).status == PASS

    def test_the_worst_status_is_fail_then_unknown_then_pass(self):
        assert worst([PASS, UNKNOWN, PASS]) == UNKNOWN and worst([UNKNOWN, FAIL]) == FAIL
        assert worst([PASS]) == PASS and worst([]) == PASS


class TestSummary:
    def _run(self, *verdicts: Verdict) -> RunResult:
        s = sample_summary()
        s["cases"] = [{**s["cases"][0], "name": f"c{k}", "verdict": asdict(v)}
                      for k, v in enumerate(verdicts)]
        return RunResult.from_json(s)

    def test_status_is_written_and_read_back(self, tmp_path):
        run = self._run(unchecked("exactly-once", None))
        raw = run.to_json(summary.SCHEMA_VERSION)
        assert raw["cases"][0]["verdict"]["status"] == UNKNOWN
        summary.validate(raw)
        summary.write(tmp_path, run)
        assert summary.load(tmp_path / "summary.json").cases[0].verdict.status == UNKNOWN

    def test_a_status_outside_the_three_is_refused_by_the_schema(self):
        raw = self._run(verdict("exactly-once", 0, 0, 0)).to_json(summary.SCHEMA_VERSION)
        raw["cases"][0]["verdict"]["status"] = "MAYBE"
        with pytest.raises(ValueError, match="status"):
            summary.validate(raw)

    @pytest.mark.parametrize("observed, holds, status", [
        ("exactly-once", True, PASS), ("at-least-once", False, FAIL),
        ("unchecked", True, UNKNOWN),    # a noop sink's verdict, which held before status was written
        ("unchecked", False, FAIL)])
    def test_an_older_summary_s_status_is_derived(self, observed, holds, status):
        """A summary without `status` reads as PASS when it held, FAIL when not, and a noop sink's
        held verdict as UNKNOWN; `holds` then says PASS alone."""
        s = sample_summary()
        s["cases"][0]["verdict"] = {"expected": "exactly-once", "observed": observed, "holds": holds,
                                    "detail": ""}
        v = RunResult.from_json(s).cases[0].verdict
        assert (v.status, v.holds) == (status, status == PASS)

    @pytest.mark.parametrize("statuses, code", [((PASS, PASS), 0), ((PASS, UNKNOWN), 4),
                                                ((UNKNOWN, FAIL), 1), ((FAIL, PASS), 1)])
    def test_the_exit_code_is_the_worst_verdict_s(self, statuses, code):
        """0 every case PASS, 1 any FAIL, 4 no FAIL but an UNKNOWN (a noop sink's case exits 4)."""
        verdicts = {PASS: verdict("exactly-once", 0, 0, 0), FAIL: verdict("exactly-once", 1, 0, 0),
                    UNKNOWN: unchecked("exactly-once", None)}
        run = self._run(*(verdicts[s] for s in statuses))
        assert run.verdict_status == worst(statuses) and exit_code(run) == code
        assert run.holds is (code == 0)

    def test_the_table_and_the_report_give_unknown_its_own_place(self, tmp_path):
        from harness.report import html, table
        from tests.helpers import html_table

        run = self._run(verdict("exactly-once", 0, 0, 0), unchecked("exactly-once", None))
        lines = table.render(run).splitlines()
        assert lines[2].split()[3] == PASS and lines[3].split()[3] == UNKNOWN
        assert lines[-1].startswith("status: completed  verdict: UNKNOWN")
        page = html.render(tmp_path, run)
        assert [r["verdict"] for r in html_table(page, "comparison")] == [PASS, UNKNOWN]
        assert '<span class="unknown">UNKNOWN</span>' in page and "Why it is unknown" in page


# -- where the verdict is built (harness/run/collect.py) ---------------------------------------
def _case(tmp_path, guarantee="exactly-once", failure=None, sink=None):
    files = SimpleNamespace(sink=tmp_path / "sink.parquet", sink_error=tmp_path / "sink-error.txt",
                            checker_error=tmp_path / "checker-error.txt",
                            discrepancies=tmp_path / "discrepancies.parquet")
    said: list[str] = []
    return SimpleNamespace(
        spec=SimpleNamespace(name="mine", sink="custom", sink_class="mine:Sink", guarantee=guarantee),
        pipeline=SimpleNamespace(columns=("key", "count")), files=files, failure=failure, drain_short=None,
        truth_dir=tmp_path / "truth", sink=lambda: sink, progress=SimpleNamespace(step=said.append),
        said=said)


class _Unreadable:
    def read(self):
        raise ConnectionError("the table is gone")


class TestCollect:
    def test_a_sink_whose_read_raises_is_unknown_naming_the_exception(self, tmp_path):
        """read() raising is no harness crash and no FAIL: no output, why, and the traceback kept."""
        from harness.run import collect

        case = _case(tmp_path, sink=_Unreadable())
        out, report, why = collect._read_sink(case)
        assert out is None and report is None
        assert why.startswith("the sink mine:Sink's read() raised ConnectionError: the table is gone")
        assert "ConnectionError" in case.files.sink_error.read_text()
        v = undecided("exactly-once", why)
        assert v.status == UNKNOWN and "the table is gone" in v.detail

    def test_an_oracle_that_raises_is_unknown_naming_it(self, tmp_path, monkeypatch):
        """Jepsen's check-safe: the checker's crash makes the verdict UNKNOWN, not FAIL, not a crash."""
        from harness.results.model import CaseResult
        from harness.run import collect

        def broken(*args, **kwargs):
            raise KeyError("count")

        monkeypatch.setattr(collect.checker, "check", broken)
        case = _case(tmp_path)
        result = CaseResult.from_json(sample_summary()["cases"][0])
        assert collect._check(case, result, pd.DataFrame(), SimpleNamespace(sink=None, batches=[])) is None
        assert result.verdict.status == UNKNOWN and result.verdict.observed == "unchecked"
        assert "the checker raised KeyError: 'count'" in result.verdict.detail
        assert case.files.checker_error.exists() and case.said[-1].startswith("UNKNOWN: the checker raised")

    def test_an_oracle_that_raises_in_a_case_whose_driver_died_fails(self, tmp_path, monkeypatch):
        from harness.results.model import CaseResult
        from harness.run import collect

        monkeypatch.setattr(collect.checker, "check", lambda *a, **k: 1 / 0)
        case = _case(tmp_path, failure="driver (pid 7) died")
        result = CaseResult.from_json(sample_summary()["cases"][0])
        collect._check(case, result, pd.DataFrame(), SimpleNamespace(sink=None, batches=[]))
        assert result.verdict.status == FAIL
        assert result.verdict.detail.startswith("FAILED: driver (pid 7) died")

    @pytest.mark.parametrize("lost, status", [(0, UNKNOWN), (4, FAIL)])
    def test_a_missed_fault_makes_held_counts_unknown_naming_it(self, tmp_path, lost, status):
        """A fault whose anchor never came (the run cut at its cap): UNKNOWN naming the fault,
        unless the counts failed on their own."""
        from harness.results.model import CaseResult
        from harness.run import collect

        raw = sample_summary()["cases"][0]
        raw["faults"] = [{**raw["faults"][0], "kind": "kill-driver", "at": "batch 40", "observed": False,
                          "missed": "batch 40 never came: the workload ended at batch 31"}]
        result = CaseResult.from_json(raw)
        counts = {"produced": 10, "expected": 10, "delivered": 10 - lost, "lost": lost, "duplicated": 0,
                  "unexpected": 0}
        checked = SimpleNamespace(counts=counts, problems=[], unit="window",
                                  discrepancies=pd.DataFrame({"kind": pd.Series([], dtype=str)}))
        collect._judge(_case(tmp_path), result, SimpleNamespace(problems=lambda: []), checked)
        assert result.verdict.status == status
        assert "fault kill-driver at batch 40 never came: batch 40 never came" in result.verdict.detail


class TestDrainRanOut:
    @pytest.mark.parametrize(("lost", "status"), [(0, "PASS"), (3, "FAIL")])
    def test_a_drain_that_ran_out_fails_only_when_outputs_are_missing(self, tmp_path, lost, status):
        """The drain's timeout is a liveness failure only when the sink lacks expected outputs: a
        sink already equal to the answer passes, and the verdict says what the drain waited for."""
        from harness.results.model import CaseResult
        from harness.run import collect

        raw = sample_summary()["cases"][0]
        raw["faults"] = []
        result = CaseResult.from_json(raw)
        counts = {"produced": 10, "expected": 10, "delivered": 10 - lost, "lost": lost, "duplicated": 0,
                  "unexpected": 0}
        checked = SimpleNamespace(counts=counts, problems=[], unit="rows",
                                  discrepancies=pd.DataFrame({"kind": pd.Series([], dtype=str)}))
        case = _case(tmp_path, guarantee="exactly-once")
        case.drain_short = ("the pipeline did not emit every result within drain_timeout (5s): it waited for "
                            "the watermark past the last window end")
        collect._judge(case, result, SimpleNamespace(problems=lambda: []), checked)
        assert result.verdict.status == status, result.verdict.detail
        assert "it waited for the watermark past the last window end" in result.verdict.detail
        assert ("expected outputs are missing" in result.verdict.detail) == bool(lost)
