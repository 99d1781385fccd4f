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


def _summary(label: str, cases: list[dict], **scenario) -> dict:
    return {"schema_version": 2, "run_id": label, "status": "completed", "environment": {}, "cases": cases,
            "scenario": {"name": "bench", "path": "bench.toml", **scenario}}


def _failing(case: dict, observed: str = "at-least-once") -> dict:
    return {**case, "verdict": {"expected": case["guarantee"], "observed": observed, "holds": False,
                                "detail": f"FAILED: {case['guarantee']} did not hold (observed {observed})"}}


class TestVerdicts:
    def test_pass_to_fail_is_a_regression_and_comes_first(self, tmp_path):
        """A case that held and now fails: exit 1, the verdict's change before the figures, even
        with every figure unchanged (compare ignored verdicts: a failed run against itself said
        "no regression")."""
        base = _run(tmp_path, "base", [_case("eo", 3000.0, 6500.0)])
        new = _run(tmp_path, "new", [_failing(_case("eo", 3000.0, 6500.0))])
        proc = run_cli("compare", str(base), str(new))
        assert proc.returncode == 1, proc.stdout
        out = proc.stdout
        assert "eo: verdict PASS -> FAIL (1 of 1 runs)" in out
        assert out.index("verdict PASS -> FAIL") < out.index("metric")
        assert "eo: observed exactly-once -> at-least-once (a weaker guarantee)" in out

    def test_a_fault_no_longer_seen_is_a_regression(self, tmp_path):
        seen = {"kind": "kill-driver", "at_s": 5.0, "at": "batch 2", "started_s": 7.0, "landed_s": 7.2,
                "ended_s": 20.0, "target": "driver", "observed": True, "landed": True, "detail": "ok"}
        base = _run(tmp_path, "base", [{**_case("eo", 3000.0, 6500.0), "faults": [seen]}])
        new = _run(tmp_path, "new", [{**_case("eo", 3000.0, 6500.0),
                                      "faults": [{**seen, "observed": False, "detail": "not seen"}]}])
        b, n = compare.load(base), compare.load(new)
        changes = compare.verdict_changes(b, n)
        assert [c.what for c in changes] == [
            "fault kill-driver (batch 2) seen in every base run, NOT SEEN in a new run"]
        text = compare.render(b, n, compare.compare(b, n, []))
        assert "eo: kill-driver asked batch 2: base landed 7.2 s; new landed 7.2 s" in text

    def test_a_stronger_observed_guarantee_is_no_regression(self, tmp_path):
        base = _run(tmp_path, "base", [{**_case("alo", 3000.0, 6500.0, guarantee="at-least-once"),
                                        "verdict": {"expected": "at-least-once", "observed": "at-least-once",
                                                    "holds": True, "detail": ""}}])
        new = _run(tmp_path, "new", [_case("alo", 3000.0, 6500.0, guarantee="at-least-once")])
        assert compare.verdict_changes(compare.load(base), compare.load(new)) == []


class TestWorkloads:
    def _write(self, path, summary):
        path.write_text(json.dumps(summary))
        return path

    def test_quick_against_full_is_refused(self, tmp_path):
        base = self._write(tmp_path / "base.json", _summary("b", [_case("eo", 1.0, 1.0)], quick=False))
        new = self._write(tmp_path / "new.json", _summary("n", [_case("eo", 1.0, 1.0)], quick=True))
        proc = run_cli("compare", str(base), str(new))
        assert proc.returncode == 2
        assert "different workloads: a full run against a quick one" in proc.stderr

    def test_another_scenario_hash_or_other_event_counts_are_refused(self, tmp_path):
        a = _case("eo", 1.0, 1.0)
        a["events"]["produced"] = 26_000
        b = {**a, "events": {**a["events"], "produced": 40_000}}
        assert "scenario hash aaa against bbb" in compare.workload_difference(
            compare.load(self._write(tmp_path / "1.json", _summary("1", [a], hash="aaa"))),
            compare.load(self._write(tmp_path / "2.json", _summary("2", [a], hash="bbb"))))
        assert "case eo produced 40,000 events against 26,000" in compare.workload_difference(
            compare.load(self._write(tmp_path / "3.json", _summary("3", [b]))),
            compare.load(self._write(tmp_path / "4.json", _summary("4", [a]))))

    def test_a_baseline_directory_gives_the_matching_file(self, tmp_path):
        """`compare results/baseline NEW` picks the baseline of NEW's scenario (quick or full);
        without a match it names each file and why (it said "no summary.json there")."""
        baselines = tmp_path / "baseline"
        baselines.mkdir()
        self._write(baselines / "bench.summary.json", _summary("full", [_case("eo", 1.0, 1.0)], quick=False))
        self._write(baselines / "bench-quick.summary.json", _summary("quick", [_case("eo", 1.0, 1.0)],
                                                                     quick=True))
        new = self._write(tmp_path / "new.json", _summary("n", [_case("eo", 1.0, 1.0)], quick=True))
        assert compare.load_base(baselines, compare.load(new)).run_id == "quick"
        smoke = {**_summary("o", [_case("eo", 1.0, 1.0)]), "scenario": {"name": "smoke", "path": ""}}
        other = self._write(tmp_path / "other.json", smoke)
        proc = run_cli("compare", str(baselines), str(other))
        assert proc.returncode == 2
        assert "bench.summary.json: scenario 'bench' against 'smoke'" in proc.stderr
        assert "bench-quick.summary.json" in proc.stderr


class TestPrinting:
    def test_a_range_holds_its_median_as_printed(self):
        """`recovery (s) 25.7 [26-29]`: the range was printed to the unit, the median to 0.1."""
        row = compare.Row("eo", "recovery", [29.069, 25.559, 25.653], [], None, [])
        assert row.side(row.base) == "25.7 [25.6-29.1]"


class TestCommittedBaselines:
    """The baselines compare and the nightly read were measured on today's bench scenario: a
    change to bench.toml (its quick settings included) without a new baseline fails here,
    because compare would refuse every nightly against it (results/baseline/README.md)."""

    @pytest.mark.parametrize(("name", "quick"), [("bench.summary.json", False),
                                                 ("bench-quick.summary.json", True)])
    def test_each_baseline_ran_todays_scenario(self, name, quick):
        from harness import scenario as scenario_mod
        from harness.paths import REPO_ROOT

        base = json.loads((REPO_ROOT / "results" / "baseline" / name).read_text())
        bench = scenario_mod.load(REPO_ROOT / "harness/scenario/scenarios/bench.toml", quick=quick)
        assert base["scenario"].get("quick", False) == quick
        assert base["scenario"].get("hash") == bench.fingerprint(), (
            f"results/baseline/{name} was measured on another bench.toml; refresh it as "
            "results/baseline/README.md says")
