"""The terminal table, report.html and compare print the same p99, recovery and throughput for
a case: each reads them through the result model's one accessor (a stored real run)."""

from __future__ import annotations

import re
import shutil

import pytest

from harness.report import compare, html, table
from harness.results import summary
from tests.helpers import REPO

pytestmark = pytest.mark.unit

STORED = REPO / "tests" / "golden" / "report-run"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("headline") / "run"
    shutil.copytree(STORED, path)
    return path


def _table_cells(result) -> dict[str, dict[str, str]]:
    lines = table.render(result).splitlines()
    headers = [h.strip() for h in re.split(r"\s{2,}", lines[0])]
    rows = {}
    for line in lines[2:2 + len(result.cases)]:
        cells = re.split(r"\s{2,}", line.strip())
        rows[cells[0]] = dict(zip(headers, cells, strict=True))
    return rows


def _report_cells(page: str) -> dict[str, list[str]]:
    body = page[page.index('<table id="comparison">'):]
    body = body[:body.index("</table>")]
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", body)[1:]:
        cells = [re.sub("<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        rows[cells[0]] = cells
    return rows


def test_the_three_agree_on_each_case(run):
    result = summary.load(run / "summary.json")
    terminal = _table_cells(result)
    report = _report_cells(html.write(run).read_text())
    rows = {(r.case, r.metric): r for r in compare.compare(result, result, compare.parse_rules("p99:+10%"))}
    for case in result.cases:
        p99, recovery, eps = f"{case.p99_ms:,.0f}", f"{case.recovery_s:,.1f}", f"{case.throughput:,.0f}"
        assert terminal[case.name]["ev-time p99 ms"] == p99
        assert terminal[case.name]["recovery s"] == recovery
        assert terminal[case.name]["processed/s"] == eps
        # report.html: case, guarantee, sink, verdict, observed, offered, processed, p99, proc p99, lost,
        # duplicated, recovery, keeps up
        cells = report[case.name]
        assert cells[7] == p99 and cells[11] == recovery and cells[6] == eps
        assert rows[(case.series, "p99")].new == [case.p99_ms]
        assert rows[(case.series, "recovery")].new == [case.recovery_s]
        assert rows[(case.series, "throughput")].new == [case.throughput]
