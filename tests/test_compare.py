"""`python -m harness compare`: rules, noise and exit codes, on synthetic runs."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from harness.errors import HarnessError
from harness.report import compare
from tests.helpers import run_cli

pytestmark = pytest.mark.unit


def _case(name: str, eps: float, p99: float, lost: int = 0, repeat: int = 1,
          series: str | None = None, guarantee: str = "exactly-once") -> dict:
    return {"name": name, "series": series or name, "repeat": repeat, "guarantee": guarantee,
            "pipeline": "tumbling_count", "sink": "postgres",
            "verdict": {"expected": guarantee, "observed": guarantee, "holds": True, "detail": ""},
            "events": {"lost": lost, "duplicated": 0},
            "throughput_eps": {"processed": eps, "measured": {"processed": eps}},
            "latency_ms": {"event_time": {"p50": p99 / 2, "p99": p99}},
            "backpressure": {"max_lag_records": 100}, "faults": []}


def _run(tmp_path, label: str, cases: list[dict]) -> object:
    d = tmp_path / label
    d.mkdir()
    (d / "summary.json").write_text(json.dumps({"schema_version": 2, "run_id": label, "status": "completed",
                                                "scenario": {}, "environment": {}, "cases": cases}))
    return d


def _repeated(name: str, eps: list[float], p99: list[float], lost: int = 0) -> list[dict]:
    pairs = enumerate(zip(eps, p99, strict=True))
    return [_case(f"{name}-r{k + 1}", e, p, lost, k + 1, name) for k, (e, p) in pairs]


BASE_EPS, BASE_P99 = [3000.0, 2950.0, 3040.0], [6500.0, 6620.0, 6480.0]


class TestRules:
    def test_the_default_rules_parse(self):
        rules = compare.parse_rules(compare.DEFAULT_RULES)
        assert [(r.metric, r.kind, r.sign, r.value) for r in rules] == [
            ("p99", "relative", "+", 10.0), ("throughput", "relative", "-", 5.0), ("lost", "limit", ">", 0.0)]

    @pytest.mark.parametrize("bad", ["p99", "p99:10%", "speed:-5%", "lost:>>0", "p99:+ten%"])
    def test_a_bad_rule_is_refused_with_the_forms(self, bad):
        with pytest.raises(HarnessError) as info:
            compare.parse_rules(bad)
        assert repr(bad) in info.value.problem and "metric:+N%" in info.value.fix

    def test_thresholds_relative_absolute_and_limits(self):
        up10, down5, plus500, lost = compare.parse_rules("p99:+10%,throughput:-5%,p99:+500,lost:>0")
        assert up10.crossed(1000, 1101, []) and not up10.crossed(1000, 1099, [])
        assert down5.crossed(1000, 949, []) and not down5.crossed(1000, 951, [])
        assert plus500.crossed(1000, 1501, []) and not plus500.crossed(1000, 1499, [])
        assert lost.crossed(None, None, [0, 3, 0]) and not lost.crossed(None, None, [0, 0])


class TestNoise:
    def test_welch_t_test_tells_a_shift_from_the_noise(self):
        assert compare.significant([100, 101, 99], [120, 121, 119]) is True
        assert compare.significant([100, 110, 90], [104, 92, 112]) is False
        assert compare.significant([100], [120, 121]) is None

    @pytest.mark.parametrize("t, df, p", [(2.776, 4, 0.05), (4.604, 4, 0.01), (12.706, 1, 0.05),
                                          (2.228, 10, 0.05), (1.96, 1e6, 0.05)])
    def test_p_values_are_students_t(self, t, df, p):
        """The two-sided p of Student's t from the incomplete beta function, against the
        table's critical values."""
        assert compare.betainc(df / 2, 0.5, df / (df + t * t)) == pytest.approx(p, abs=2e-4)

    def test_many_judged_changes_share_the_5_percent(self, tmp_path):
        """Six changes judged (three cases, p99 and throughput): a p of 0.03 on one of them is
        the noise a run of six tests gives about one time in six, not a regression; the same
        runs judged alone would be. (The at-most-once p99 of two real bench runs, three each.)"""
        base_p99, new_p99 = [9153.0, 9240.0, 10607.0], [10951.0, 11922.0, 12545.0]
        assert compare.welch_p(base_p99, new_p99) == pytest.approx(0.032, abs=0.001)
        cases = {"a": (BASE_EPS, base_p99, new_p99), "b": (BASE_EPS, BASE_P99, BASE_P99),
                 "c": (BASE_EPS, BASE_P99, BASE_P99)}
        base = _run(tmp_path, "base", [c for n, (e, p, _) in cases.items() for c in _repeated(n, e, p)])
        new = _run(tmp_path, "new", [c for n, (e, _, p) in cases.items() for c in _repeated(n, e, p)])
        rules = compare.parse_rules(compare.DEFAULT_RULES)
        b, n = compare.load(base), compare.load(new)
        assert compare.tests(b, n, rules) == 6
        assert not any(r.failed for r in compare.compare(b, n, rules))
        alone = compare.compare(replace(b, cases=[c for c in b.cases if c.series == "a"]),
                                replace(n, cases=[c for c in n.cases if c.series == "a"]),
                                compare.parse_rules("p99:+10%"))
        assert [r.failed for r in alone if r.metric == "p99"] == [["p99:+10%"]]


class TestCompare:
    def test_a_planted_20_percent_throughput_regression_exits_1(self, tmp_path):
        """Three runs a side: NEW's throughput 20% lower, beyond its noise; every failed rule listed."""
        base = _run(tmp_path, "base", _repeated("eo", BASE_EPS, BASE_P99))
        new = _run(tmp_path, "new", _repeated("eo", [e * 0.8 for e in BASE_EPS], BASE_P99))
        proc = run_cli("compare", str(base), str(new))
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "eo: throughput -20.0% (throughput:-5%; larger than the noise (p=" in proc.stdout
        assert "p99" not in proc.stdout.split("regressions:")[1]

    def test_two_unchanged_runs_pass(self, tmp_path):
        """Runs that differ only by noise (3% each way, inside their spread) pass: exit 0."""
        base = _run(tmp_path, "base", _repeated("eo", BASE_EPS, BASE_P99))
        new = _run(tmp_path, "new", _repeated("eo", [3040.0, 2930.0, 2990.0], [6600.0, 6450.0, 6560.0]))
        proc = run_cli("compare", str(base / "summary.json"), str(new))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "no regression" in proc.stdout and "within the noise (p=" in proc.stdout

    def test_a_change_past_the_threshold_but_within_the_noise_is_not_a_regression(self, tmp_path):
        """-6% on the median, but the runs scatter by more than that: no regression."""
        base = _run(tmp_path, "base", _repeated("eo", [3000.0, 2400.0, 3500.0], BASE_P99))
        new = _run(tmp_path, "new", _repeated("eo", [2820.0, 3400.0, 2300.0], BASE_P99))
        rows = compare.compare(compare.load(base), compare.load(new), compare.parse_rules("throughput:-5%"))
        row = next(r for r in rows if r.metric == "throughput")
        assert row.change == "-6.0%" and row.significant is False and not row.failed

    def test_single_runs_fall_back_on_the_threshold_and_say_so(self, tmp_path):
        base = _run(tmp_path, "base", [_case("eo", 3000.0, 6500.0)])
        new = _run(tmp_path, "new", [_case("eo", 3000.0, 8000.0, lost=4)])
        proc = run_cli("compare", str(base), str(new), "--fail-on", "p99:+10%,lost:>0")
        assert proc.returncode == 1
        assert "eo: p99 +23.1% (p99:+10%; noise unknown (one run on each side))" in proc.stdout
        assert "eo: lost" in proc.stdout

    def test_losses_count_only_where_the_guarantee_forbids_them(self, tmp_path):
        """at-most-once may lose events: `lost:>0` judges the other cases only."""
        base = _run(tmp_path, "base", [_case("amo", 3000.0, 6500.0, guarantee="at-most-once")])
        new = _run(tmp_path, "new", [_case("amo", 3000.0, 6500.0, lost=300, guarantee="at-most-once")])
        proc = run_cli("compare", str(base), str(new), "--fail-on", "lost:>0")
        assert proc.returncode == 0, proc.stdout

    def test_an_unknown_schema_version_is_refused(self, tmp_path):
        base = _run(tmp_path, "base", [_case("eo", 3000.0, 6500.0)])
        new = tmp_path / "new.json"
        new.write_text(json.dumps({"schema_version": 99, "run_id": "x", "cases": []}))
        proc = run_cli("compare", str(base), str(new))
        assert proc.returncode == 2 and "schema_version 99 is not supported" in proc.stderr

    def test_a_bad_rule_exits_2(self, tmp_path):
        base = _run(tmp_path, "base", [_case("eo", 3000.0, 6500.0)])
        proc = run_cli("compare", str(base), str(base), "--fail-on", "speed:-5%")
        assert proc.returncode == 2 and "'speed:-5%' is not a rule" in proc.stderr
