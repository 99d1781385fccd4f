"""The terminal table, report.html and compare print the same value of every figure of a case:
each loops over the figure registry (harness/results/figures.py) and reads a figure through its
one accessor, on a stored real run."""

from __future__ import annotations

import re
import shutil

import pytest

from harness.report import compare, html, table
from harness.results import figures, summary
from tests.helpers import REPO, html_table

pytestmark = pytest.mark.unit

STORED = REPO / "tests" / "golden" / "report-run"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("headline") / "run"
    shutil.copytree(STORED, path)
    return path


@pytest.fixture(scope="module")
def result(run):
    return summary.load(run / "summary.json")


def _table_cells(result) -> dict[str, dict[str, str]]:
    lines = table.render(result).splitlines()
    headers = [h.strip() for h in re.split(r"\s{2,}", lines[0])]
    rows = {}
    for line in lines[2:2 + len(result.cases)]:
        cells = re.split(r"\s{2,}", line.strip())
        rows[cells[0]] = dict(zip(headers, cells, strict=True))
    return rows


def test_the_table_prints_every_figure_it_shows(result):
    """Each figure shown in the table has its column, and the cell is the registry's text."""
    terminal = _table_cells(result)
    for case in result.cases:
        for f in figures.shown_in(figures.TABLE):
            assert terminal[case.name][f.label] == f.cell(case), (case.name, f.name)


def test_report_html_prints_what_the_table_prints(run, result):
    """report.html's table of the guarantees has a column per figure it shows, each cell the
    table's own for the same figure and case."""
    report = {r["case"]: r for r in html_table(html.write(run).read_text(), "comparison")}
    terminal = _table_cells(result)
    for case in result.cases:
        for f in figures.shown_in(figures.REPORT):
            expected = terminal[case.name][f.label] if figures.TABLE in f.shown else f.cell(case)
            assert report[case.name][f.label] == expected, (case.name, f.name)


def test_compare_reads_and_prints_what_the_table_prints(result):
    """compare's rows hold each figure's value from the same accessor, and print it as the
    table does (a run compared with itself)."""
    terminal = _table_cells(result)
    rows = {(r.case, r.metric): r for r in compare.compare(result, result, compare.parse_rules("p99:+10%"))}
    for case in result.cases:
        for f in figures.shown_in(figures.COMPARE):
            if f.name not in compare.METRICS or compare.METRICS[f.name].get(case) is None:
                continue
            row = rows[(case.series, f.name)]
            assert row.new == [f.value(case)], (case.name, f.name)
            if figures.TABLE in f.shown:
                assert row.side(row.new) == terminal[case.name][f.label], (case.name, f.name)


def test_every_figure_has_a_direction_or_is_printed_only(result):
    """compare judges exactly the figures with a direction; the others are printed, not judged."""
    judged = {f.name for f in figures.FIGURES if f.better is not None and figures.COMPARE in f.shown}
    assert set(compare.METRICS) == judged


def test_the_sweep_prints_the_measured_p99():
    """The watermark sweep reads the p99 of the measured window, as the table's column does."""
    from harness.results.model import CaseResult

    case = CaseResult.from_json({**summary.load(STORED / "summary.json").cases[0].to_json(),
                                 "latency_ms": {"event_time": {"p99": 1.0}, "processing_time": {}}})
    assert case.latency.p99 == figures.figure("p99").value(case) != 1.0
