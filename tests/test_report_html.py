"""report.html, built from a stored run directory, against golden figures; and rendered in
headless Chromium.

tests/golden/report-run/ is a real run's directory (`tox -e bench -- --quick`), trimmed to
what the report reads: summary.json and, per case, timeline.parquet, the latency-*.hdr
histograms and discrepancies.parquet. tests/golden/report-figures/ holds each chart the
report must draw from it, one SVG file per chart. After a deliberate change to the charts,
`UPDATE_GOLDEN=1 pytest tests/test_report_html.py` rewrites the figures; review the diff.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pandas as pd
import pytest

from harness.report import html
from harness.results import summary as summary_mod
from tests.helpers import REPO, html_table, run_cli

GOLDEN = REPO / "tests" / "golden"
STORED = GOLDEN / "report-run"
FIGURES = GOLDEN / "report-figures"
_SVG = re.compile(r'<svg [^>]*aria-label="([^"]*)".*?</svg>', re.S)


def _copy(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(STORED, run)
    return run


def _charts(page: str) -> dict[str, str]:
    return {m.group(1): m.group(0) for m in _SVG.finditer(page)}


def _slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")


@pytest.mark.unit
class TestReport:
    def test_the_charts_match_the_golden_figures(self, tmp_path):
        """Every chart, byte for byte: same data, same SVG."""
        charts = _charts(html.write(_copy(tmp_path)).read_text())
        assert len(charts) >= 10, sorted(charts)
        if os.environ.get("UPDATE_GOLDEN") == "1":
            shutil.rmtree(FIGURES, ignore_errors=True)
            FIGURES.mkdir(parents=True)
            for label, svg in charts.items():
                (FIGURES / f"{_slug(label)}.svg").write_text(svg + "\n")
        golden = {p.stem: p.read_text().rstrip("\n") for p in FIGURES.glob("*.svg")}
        assert sorted(golden) == sorted(_slug(label) for label in charts)
        for label, svg in charts.items():
            assert svg == golden[_slug(label)], f"chart {label!r} differs from {FIGURES / _slug(label)}.svg"

    def test_the_guarantees_side_by_side(self, tmp_path):
        """One row per case in table#comparison, read by its columns: its verdict, its p99, its
        losses, duplicates and recovery as summary.json has them."""
        page = html.write(_copy(tmp_path)).read_text()
        summary = json.loads((STORED / "summary.json").read_text())
        rows = {r["case"]: r for r in html_table(page, "comparison")}
        assert sorted(rows) == sorted(c["name"] for c in summary["cases"])
        for case in summary["cases"]:
            row = rows[case["name"]]
            assert row["verdict"] == ("PASS" if case["verdict"]["holds"] else "FAIL")
            assert row["guarantee"] == case["guarantee"]
            assert row["lost"] == f'{case["events"]["lost"]:,}'
            assert row["dup"] == f'{case["events"]["duplicated"]:,}'
            assert row["ev-time p99 ms"] == f'{case["latency_measured_ms"]["event_time"]["p99"]:,.0f}'
            drained = max(f["recovery"]["lag_recovered_s"] for f in case["faults"]
                          if f["recovery"].get("lag_recovered_s") is not None)
            assert row["recovery s"] == f"{drained:,.1f}"

    def test_a_failed_verdict_shows_its_discrepancies(self, tmp_path):
        run = _copy(tmp_path)
        summary = json.loads((run / "summary.json").read_text())
        case = summary["cases"][0]
        case["verdict"].update(holds=False, detail="exactly-once did not hold (observed at-most-once)")
        (run / "summary.json").write_text(json.dumps(summary))
        pd.DataFrame({"kind": ["lost", "lost"], "item": ["17", "18"], "expected": ["1", "1"],
                      "actual": ["0", "0"], "batch_id": [4, -1]}).to_parquet(
            run / "cases" / case["name"] / "discrepancies.parquet", index=False)
        page = html.write(run).read_text()
        assert "Why it failed" in page and f'id="discrepancies-{case["name"]}"' in page
        assert '<span class="fail">FAIL</span>' in page and "<td>4</td>" in page

    def test_the_report_command_rebuilds_it_from_the_directory_alone(self, tmp_path):
        run = _copy(tmp_path)
        proc = run_cli("report", str(run))
        assert proc.returncode == 0, proc.stderr
        assert (run / "report.html").read_text() == html.render(run, summary_mod.load(run / "summary.json"))

    def test_an_unknown_schema_version_is_refused(self, tmp_path):
        run = _copy(tmp_path)
        summary = json.loads((run / "summary.json").read_text())
        (run / "summary.json").write_text(json.dumps({**summary, "schema_version": 99}))
        proc = run_cli("report", str(run))
        assert proc.returncode == 2 and "schema_version 99 is not supported" in proc.stderr
        assert not (run / "report.html").exists()


# injected into a copy of the page: what the browser laid out, written where --dump-dom shows it
_PROBE = """<script>
addEventListener("load", () => {
  const drawn = [...document.querySelectorAll("svg.chart")]
    .filter(s => s.getBoundingClientRect().width > 100);
  const rows = document.querySelectorAll("#comparison tbody tr").length;
  document.body.setAttribute("data-probe", JSON.stringify({charts: drawn.length, rows: rows,
    lines: document.querySelectorAll("svg.chart polyline").length}));
});
</script></body>"""


@pytest.mark.integration   # needs Debian's chromium: not in the unit lane, which needs nothing installed
def test_the_page_renders_in_headless_chromium(tmp_path):
    """Chromium (Debian's package) lays the report out: every chart drawn at its size, the
    comparison table's rows, lines in the charts; and a screenshot of it is taken."""
    chromium = shutil.which("chromium")
    assert chromium, "chromium is not on PATH: apt-get install chromium (python -m harness.sysdeps does)"
    run = _copy(tmp_path)
    page = html.write(run).read_text()
    probe = run / "probe.html"
    probe.write_text(page.replace("</body>", _PROBE))
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*flags, "--dump-dom", probe.as_uri()], capture_output=True, text=True,
                         timeout=120)
    found = re.search(r'data-probe="([^"]*)"', dom.stdout)
    assert found, f"chromium did not run the page: {dom.stderr[-2000:]}"
    laid_out = json.loads(found.group(1).replace("&quot;", '"'))
    summary = json.loads((run / "summary.json").read_text())
    assert laid_out["charts"] == len(_charts(page)) and laid_out["rows"] == len(summary["cases"])
    assert laid_out["lines"] >= len(summary["cases"]) * 4
    shot = tmp_path / "report.png"
    subprocess.run([*flags, "--window-size=1280,2400", f"--screenshot={shot}",
                    (run / "report.html").as_uri()], capture_output=True, timeout=120)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000, len(data)
