"""Every figure prints the same in every renderer: the terminal table, report.html, compare, the
history's trend page and the pytest plugin's `extra_info` each loop over the figure registry
(harness/results/figures.py), read a figure through its one accessor, print its value with
`Figure.text`, and head it with the registry's `column` (tables) or `title` (charts), the unit
once. On a stored real run, with references added so that the ratio figures have values."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from harness.report import compare, html, table
from harness.results import figures, summary
from tests.helpers import REPO, html_table

pytestmark = pytest.mark.unit

STORED = REPO / "tests" / "golden" / "report-run"
# what ENG-SCHEDULE's `references` section holds; the first case fell behind, so it has a
# processed/ceiling ratio (a case that kept up has none: processed/s is then the offered rate)
REFERENCES = {"restart_floor_s": 6.4, "spark_ceiling_eps": 1_250.0, "why": {}}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("headline") / "run"
    shutil.copytree(STORED, path)
    raw = json.loads((path / "summary.json").read_text())
    raw["scenario"]["hash"] = "0123456789ab"   # the history files a run by its scenario's hash
    for k, case in enumerate(raw["cases"]):
        case["references"] = REFERENCES
        if k == 0:
            case["backpressure"]["keeping_up"] = False
    (path / "summary.json").write_text(json.dumps(raw))
    return path


@pytest.fixture(scope="module")
def result(run):
    return summary.load(run / "summary.json")


def _values(result) -> list[tuple[str, figures.Figure, object]]:
    return [(c.name, f, f.value(c)) for c in result.cases for f in figures.FIGURES]


def test_every_figure_has_a_value_somewhere(result):
    """The run gives the comparisons something to compare: each figure a renderer prints has a
    value in some case (a test of "-" against "-" would prove nothing)."""
    printed = {f.name for f in figures.FIGURES if f.shown}
    assert printed <= {f.name for _, f, v in _values(result) if v is not None}


def _table_cells(result) -> dict[str, dict[str, str]]:
    lines = table.render(result).splitlines()
    headers = [h.strip() for h in re.split(r"\s{2,}", lines[0])]
    rows = {}
    for line in lines[2:2 + len(result.cases)]:
        cells = re.split(r"\s{2,}", line.strip())
        rows[cells[0]] = dict(zip(headers, cells, strict=True))
    return rows


def test_the_table_prints_every_figure_it_shows(result):
    """Each figure shown in the table has its column (the registry's heading), and the cell is
    the registry's text of the figure's value."""
    terminal = _table_cells(result)
    for name, f, value in _values(result):
        if figures.TABLE in f.shown:
            assert terminal[name][f.column] == f.text(value), (name, f.name)


def test_report_html_prints_what_the_table_prints(run, result):
    """report.html's table of the guarantees heads each figure it shows with the registry's
    column, and its cell is the same text as the table's."""
    report = {r["case"]: r for r in html_table(html.write(run).read_text(), "comparison")}
    for name, f, value in _values(result):
        if figures.REPORT in f.shown:
            assert report[name][f.column] == f.text(value), (name, f.name)


def test_compare_reads_and_prints_what_the_table_prints(result):
    """compare's rows hold each judged figure's value from the same accessor (where the
    guarantee judges it: the registry's one rule), and print it with the figure's text."""
    rows = {(r.case, r.metric): r for r in compare.compare(result, result, compare.parse_rules("p99:+10%"))}
    for case in result.cases:
        for f in figures.compared():
            value = f.judged(case)
            if value is None:
                assert (case.series, f.name) not in rows, (case.name, f.name)
                continue
            row = rows[(case.series, f.name)]
            assert row.new == [value] and row.side(row.new) == f.text(value), (case.name, f.name)


def test_compare_names_each_figure_with_its_unit_once(result):
    """compare's output names a figure's unit once ("ev-time p99 ms (ms)" printed it twice)."""
    out = compare.render(result, result, compare.compare(result, result, []))
    for f in figures.compared():
        for line in (x for x in out.splitlines() if re.search(rf"\s{re.escape(f.name)}\b", x)):
            assert line.count(f"({f.unit})") + line.count(f" {f.unit} ") <= 1, line


def test_compare_and_the_history_judge_by_the_registry_s_rule():
    """lost is not judged where at-most-once allows it, nor duplicated under at-least-once: one
    rule, in the registry, for compare and the history."""
    lost, dup = figures.figure("lost"), figures.figure("duplicated")
    assert not lost.judged_under("at-most-once") and lost.judged_under("exactly-once")
    assert not dup.judged_under("at-least-once") and dup.judged_under("at-most-once")
    assert all(f.judged_under(g) for f in figures.FIGURES if f.name not in ("lost", "duplicated")
               for g in ("exactly-once", "at-least-once", "at-most-once"))


def _trend(run, tmp_path) -> str:
    from harness.history import trend
    from harness.history.store import Store

    store = Store(tmp_path / "store")
    store.add(run)
    return trend.write(store, tmp_path / "trend.html").read_text()


_CHART = re.compile(r'<svg [^>]*aria-label="([^"]*)".*?</svg>', re.S)


def test_the_history_s_charts_are_titled_by_the_registry(run, result, tmp_path):
    """The trend page's chart of a figure is titled with the registry's title, its unit once."""
    titles = [m.group(1) for m in _CHART.finditer(_trend(run, tmp_path))]
    charted = [f for f in figures.compared() if any(t.startswith(f"{f.label} (") for t in titles)]
    assert {f.name for f in charted} >= {"throughput", "p99"}, titles
    for f in charted:
        assert f.title in titles, (f.name, titles)
    assert not [t for t in titles if re.search(r"\b(\S+) \(\1\)", t)], titles   # "ms (ms)"


_CHART_OF = re.compile(r'<div id="([^"]*)"><svg .*?</svg>', re.S)


def test_the_history_s_points_print_the_figure_s_text(run, result, tmp_path):
    """Each night's point on a figure's chart says the value the history judges, printed as the
    table prints it, under the title compare gives it (at-most-once's processed/s is judged with
    what it lost counted back, and says so). Charts are keyed by their anchor, the series' and the
    figure's name: every case has its own."""
    from harness.report import judge

    charts = {m.group(1): m.group(0) for m in _CHART_OF.finditer(_trend(run, tmp_path))}
    checked = 0
    for case in result.cases:
        for f in figures.compared():
            value = f.judged(case)
            mine = [c for anchor, c in charts.items() if f"-q-{case.name}-" in anchor
                    and anchor.endswith(f"-{f.name}")]
            if value is None or not mine:
                continue
            points = re.findall(r"<circle[^>]*><title>[^<]*: ([^<]*)</title>", mine[0])
            assert f.text(value) in points, (case.name, f.name, points)
            assert f'aria-label="{judge.judged_title(f, case.guarantee)}"' in mine[0], (case.name, f.name)
            checked += 1
    assert checked >= 2 * len(result.cases), charts.keys()


def test_the_pytest_plugin_s_extra_info_holds_every_figure_by_its_name(result):
    """extra_info has `<case>.<figure name>` for every figure, the value the table prints, and the
    keys written before the registry named them, kept (a key is added, never renamed)."""
    from harness.pytest_plugin import extra_info

    info = extra_info(result)
    terminal = _table_cells(result)
    for name, f, value in _values(result):
        assert info[f"{name}.{f.name}"] == value, (name, f.name)
        if figures.TABLE in f.shown:
            assert f.text(info[f"{name}.{f.name}"]) == terminal[name][f.column], (name, f.name)
    for case in result.cases:
        assert info[f"{case.name}.throughput_eps"] == case.throughput
        assert info[f"{case.name}.p99_ms"] == case.p99_ms
        assert info[f"{case.name}.recovery_s"] == case.recovery_s
        assert info[f"{case.name}.status"] == case.verdict.status
    json.dumps(info)   # pytest-benchmark writes it as JSON


def test_summary_json_s_headline_is_read_through_the_registry(result):
    """`headline` keeps its three public keys, each the registry's figure."""
    for case in result.cases:
        assert case.to_json()["headline"] == {"throughput_eps": figures.figure("throughput").value(case),
                                              "p99_ms": figures.figure("p99").value(case),
                                              "recovery_s": figures.figure("recovery").value(case)}


def test_labels_carry_no_unit():
    """A label is what the figure is; its unit is apart, so that no renderer prints it twice."""
    for f in figures.FIGURES:
        assert not f.label.endswith(f" {f.unit}") and f"({f.unit})" not in f.label, f.name
        assert f.title == f"{f.label} ({f.unit})"


def test_only_ratios_and_counts_travel():
    """An absolute time or rate depends on the machine: only counts of the workload's events and
    ratios to a reference measured on the same machine may be compared across machines."""
    travels = {f.name for f in figures.FIGURES if f.travels}
    assert travels == {"produced", "expected", "lost", "duplicated", "throughput_of_ceiling",
                       "recovery_of_floor"}


def test_every_figure_has_a_direction_or_is_printed_only(result):
    """compare judges exactly the figures with a direction; the others are printed, not judged."""
    assert set(compare.METRICS) == {f.name for f in figures.compared()}


class TestRatios:
    """The ratios to references measured on the same machine, from the case's `references`."""

    def _case(self, references=None, keeping_up=False, recovery=12.8):
        from harness.results.model import CaseResult

        case = summary.load(STORED / "summary.json").cases[0]
        raw = {**case.to_json(), "backpressure": {**case.backpressure, "keeping_up": keeping_up,
                                                  "recovery_s": recovery}, "faults": []}
        if references is not None:
            raw["references"] = references
        return CaseResult.from_json(raw)

    def test_each_is_its_figure_over_its_reference(self):
        case = self._case(REFERENCES)
        assert figures.figure("throughput_of_ceiling").value(case) == case.throughput / 1_250.0
        assert figures.figure("recovery_of_floor").value(case) == 12.8 / 6.4
        assert figures.figure("recovery_of_floor").text(12.8 / 6.4) == "2.00"

    def test_without_references_they_say_so(self):
        case = self._case()
        for name in ("throughput_of_ceiling", "recovery_of_floor"):
            assert figures.figure(name).value(case) is None
            assert "no reference was measured" in figures.figure(name).why_missing(case)

    def test_a_case_that_kept_up_has_no_ceiling_ratio_and_says_why(self):
        case = self._case(REFERENCES, keeping_up=True)
        f = figures.figure("throughput_of_ceiling")
        assert f.value(case) is None and "kept up" in f.why_missing(case)

    def test_a_reference_not_measured_gives_its_reason(self):
        case = self._case({"restart_floor_s": None, "spark_ceiling_eps": None,
                           "why": {"restart_floor_s": "the case restarts no driver"}})
        assert figures.figure("recovery_of_floor").why_missing(case) == "the case restarts no driver"
        why = figures.figure("throughput_of_ceiling").why_missing(case)
        assert "spark_ceiling_eps was not measured" in why


def test_the_sweep_prints_the_measured_p99():
    """The watermark sweep reads the p99 of the measured window, as the table's column does."""
    from harness.results.model import CaseResult

    case = CaseResult.from_json({**summary.load(STORED / "summary.json").cases[0].to_json(),
                                 "latency_ms": {"event_time": {"p99": 1.0}, "processing_time": {}}})
    assert case.latency.p99 == figures.figure("p99").value(case) != 1.0
