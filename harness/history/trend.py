"""`python -m harness history report STORE --out trend.html`: one self-contained page.

Per series (a case of a scenario hash on one kind of machine): a chart per compared figure
over the nights, with its change points, its A/A noise band (the median of the nights since
the last change, +- 2 noise sd), the nights whose verdict flipped, and dashed marks where a
dependency version changed; each night's point links to its run's report.html where the
history knows it. Then the correctness of each night: the verdict, the counts, the faults.
"""

from __future__ import annotations

import statistics
from html import escape
from pathlib import Path

from harness.history import changes as changes_mod
from harness.history.check import Checked, check
from harness.history.store import Series, Store, moved_versions
from harness.report import svg
from harness.results import figures

_CSS = """
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1100px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; }
th { background: #f3f3f3; } td.text, th.text { text-align: left; }
.pass { color: #1a7f37; font-weight: bold; } .fail { color: #c62828; font-weight: bold; }
svg.chart { display: block; margin: 8px 0; } .muted { color: #666; font-size: 12px; }
"""


def write(store: Store, out: Path) -> Path:
    checked = check(store.require())
    out = Path(out)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(render(store, checked, out.parent), encoding="utf-8")
    tmp.replace(out)
    return out


def render(store: Store, checked: Checked, where: Path) -> str:
    title = f"Nightly history: {store.path.name}"
    parts = [f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
             f"<style>{_CSS}</style></head><body>", f"<h1>{escape(title)}</h1>",
             f'<p class="muted">{sum(len(s.nights) for s in checked.series)} case-nights in '
             f"{len(checked.series)} series; {len(checked.alarms)} change(s) for the worse in the newest "
             f"{changes_mod.NEWEST} nights. Marks: change points (red), dependency versions (grey, dashed), "
             f"verdict flips (dark red, dotted); the blue band is the A/A noise (+- 2 sd).</p>"]
    for s in checked.series:
        parts.append(_series(s, checked, where))
    parts.append("</body></html>")
    return "\n".join(parts)


def _series(s: Series, checked: Checked, where: Path) -> str:
    table = checked.noise.get((s.scenario, s.scenario_hash, s.quick, s.cpus), {})
    labels = [f"{n.started_at[5:16].replace('T', ' ')} {(n.commit or '?')[:7]}" for n in s.nights]
    links = [_link(n.report, where) for n in s.nights]
    versions = _version_marks(s)
    flips = [svg.Mark(f.night, f"{f.what} {f.after}", "flip") for f in checked.flips if f.series is s]
    out = [f"<h2>{escape(s.label)} <span class=\"muted\">hash {escape(s.scenario_hash)}, {s.cpus} CPU(s), "
           f"{len(s.nights)} nights</span></h2>"]
    for f in figures.shown_in(figures.COMPARE):
        if f.better is None:
            continue
        values = s.values(f.name)
        found = [c for c in checked.speed if c.series is s and c.figure == f.name]
        marks = [svg.Mark(c.night - 0.5, f"{c.size:+.0%}", "change") for c in found] + versions + flips
        out.append(svg.nights_chart(f"{f.label} ({f.unit})", values, y_label=f.unit, labels=labels,
                                    links=links, band=_band(values, found, table.get(f.name)), marks=marks))
    out.append(_correctness(s))
    return "\n".join(out)


def _band(values, found, n) -> tuple[float, float] | None:
    """The noise band about the median of the nights since the last change point."""
    if n is None or n.sd is None:
        return None
    start = max((c.night for c in found), default=0)
    recent = [v for v in values[start:] if v is not None]
    if not recent:
        return None
    mid = statistics.median(recent)
    return (mid * (1 - 2 * n.sd), mid * (1 + 2 * n.sd))


def _version_marks(s: Series) -> list[svg.Mark]:
    marks = []
    for i in range(1, len(s.nights)):
        a, b = s.nights[i - 1].versions, s.nights[i].versions
        moved = [f"{k} {b.get(k)}" for k in moved_versions(a, b)]
        if moved:
            marks.append(svg.Mark(i - 0.5, ", ".join(moved), "version"))
    return marks


def _link(report: str | None, where: Path) -> str | None:
    if not report:
        return None
    if "://" in report:
        return report
    path = Path(report)
    if not path.exists():
        return None
    try:
        return str(path.resolve().relative_to(where.resolve()))
    except ValueError:
        return path.resolve().as_uri()


def _correctness(s: Series) -> str:
    rows = []
    for i, n in enumerate(s.nights):
        asked = sum(int(e.faults.get("asked") or 0) for e in n.entries)
        seen = sum(int(e.faults.get("seen") or 0) for e in n.entries)
        verdict = '<span class="pass">PASS</span>' if n.holds else '<span class="fail">FAIL</span>'
        observed = ", ".join(sorted({str(e.verdict.get("observed")) for e in n.entries}))
        counts = [f"{n.count(k):,}" if n.count(k) is not None else "-"
                  for k in ("lost", "duplicated", "unexpected")]
        rows.append(f'<tr><td>{i + 1}</td><td class="text">{escape(n.run_id)}</td>'
                    f'<td class="text">{escape((n.commit or "?")[:7])}</td><td class="text">{verdict}</td>'
                    f'<td class="text">{escape(observed)}</td>' + "".join(f"<td>{c}</td>" for c in counts)
                    + f"<td>{seen}/{asked}</td></tr>")
    columns = [("night", ""), ("run", "text"), ("commit", "text"), ("verdict", "text"), ("observed", "text"),
               ("lost", ""), ("dup", ""), ("unexpected", ""), ("faults seen", "")]
    head = "".join(f'<th class="{c}">{h}</th>' for h, c in columns)
    return f'<table class="correctness"><tr>{head}</tr>{"".join(rows)}</table>'
