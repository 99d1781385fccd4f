"""`python -m harness history report STORE --out trend.html`: one self-contained page that
answers "what regressed" at its top.

1. The answer: `history check`'s first line (ALARM, CANNOT JUDGE or OK, and what cannot be
   judged yet).
2. Each case's newest night with its verdict and counts, FAILs first, then UNKNOWNs.
3. Every alarm: FAILs and correctness flips first, then each change for the worse in speed
   (figure, size, since which night, the commit range), each linking to its chart or its
   night; then what is pending or cannot be judged.
4. Per series (a case on one machine, or on every machine for the figures that travel): a
   small chart per figure it judges, with its change points through their first night (red for
   the worse, green for the better, labelled with their size), its noise band (the level since
   the last change +- 2 noise sd), version and machine changes, and verdict flips; each
   night's point links to its run's report.html where the history knows it. Then each case's
   correctness night by night.
"""

from __future__ import annotations

import statistics
from html import escape
from pathlib import Path

from harness.history import changes as changes_mod
from harness.history import correctness
from harness.history.check import Checked, check, headline
from harness.history.store import Night, Series, Store, moved_versions
from harness.report import judge, svg
from harness.results import figures
from harness.results.machine import differences

CHART_W, CHART_H = 350, 180

_CSS = """
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1120px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 18px; margin-top: 28px; border-bottom: 1px solid #ddd; }
h3 { font-size: 15px; margin: 20px 0 4px; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: right; }
th { background: #f3f3f3; } td.text, th.text { text-align: left; }
span.PASS { color: #1a7f37; font-weight: bold; } span.FAIL { color: #c62828; font-weight: bold; }
span.UNKNOWN { color: #b26a00; font-weight: bold; }
tr.FAIL td { background: #fdecea; } tr.UNKNOWN td { background: #fff4e0; }
.answer { font-size: 16px; padding: 8px 12px; border-radius: 4px; margin: 12px 0; }
.answer.ALARM { background: #fdecea; border: 1px solid #c62828; }
.answer.CANNOT { background: #fff4e0; border: 1px solid #b26a00; }
.answer.OK { background: #eaf6ec; border: 1px solid #1a7f37; }
ul.alarms li { margin: 3px 0; } li.worse, li.fail { color: #a31515; }
li.pending, li.unknown { color: #8a5a00; }
.grid { display: flex; flex-wrap: wrap; gap: 4px 12px; }
.grid > div { border: 1px solid transparent; } .grid > div.alarmed { border-color: #d62728; }
svg.chart { display: block; } .muted { color: #666; font-size: 12px; }
"""


def write(store: Store, out: Path) -> Path:
    checked = check(store.require())
    out = Path(out)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(render(checked, out.parent), encoding="utf-8")
    tmp.replace(out)
    return out


def title(checked: Checked) -> str:
    """The store's scenario(s): "bench (quick): nightly history"."""
    names = sorted({f"{s.scenario}{' (quick)' if s.quick else ''}" for s in checked.series})
    return f"{', '.join(names)}: nightly history"


def render(checked: Checked, where: Path) -> str:
    nights = {n.run_id: n for s in checked.series for n in s.nights}
    first, last = min(n.started_at for n in nights.values()), max(n.started_at for n in nights.values())
    machines = {n.on for n in nights.values()}
    answer = headline(checked)
    parts = [f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title(checked))}'
             f"</title><style>{_CSS}</style></head><body>", f"<h1>{escape(title(checked))}</h1>",
             f'<p class="muted">{len(nights)} nights from {first[:16].replace("T", " ")} to '
             f'{last[:16].replace("T", " ")}, on {len(machines)} machine(s); each figure is judged on one '
             f"machine, the ratios to references measured on the same machine on every machine.</p>",
             f'<div class="answer {answer.split(":")[0].split()[0]}">{escape(answer)}</div>',
             _newest(checked, where), _alarms(checked)]
    parts.append("<h2>Series</h2>")
    alarmed = {id(a.series) for a in checked.alarms if isinstance(a, changes_mod.Change)}
    order = sorted(checked.series, key=lambda s: (id(s) not in alarmed, not checked.live(s)))
    parts += [_series(s, checked, where) for s in order]
    parts.append("</body></html>")
    return "\n".join(p for p in parts if p)


# -- the top: the newest nights and the alarms ------------------------------------------------
_ORDER = {"FAIL": 0, "UNKNOWN": 1, "PASS": 2}


def _newest(checked: Checked, where: Path) -> str:
    """Each case's newest night (on every machine), FAILs first; a case not run lately (a
    scenario hash since changed) is left to its series below."""
    cases = sorted((s for s in checked.series if s.machine is None and checked.live(s)),
                   key=lambda s: (_ORDER.get(s.nights[-1].status, 3), s.label))
    one = len({(s.scenario, s.quick) for s in cases}) == 1   # then the title names it
    rows = []
    for s in cases:
        n = s.nights[-1]
        name = s.case if one else f"{s.scenario}{' (quick)' if s.quick else ''} {s.case}"
        rows.append(f'<tr class="{n.status}"><td class="text"><a href="#{s.anchor}-correctness">'
                    f"{escape(name)}</a></td>" + _night_cells(n, where) + "</tr>")
    head = "".join(f'<th class="{c}">{h}</th>' for h, c in _NIGHT_COLUMNS)
    return (f'<h2>Newest nights</h2><table class="newest"><tr><th class="text">case</th>{head}</tr>'
            f'{"".join(rows)}</table>')


_NIGHT_COLUMNS = [("when", "text"), ("run", "text"), ("commit", "text"), ("machine", "text"),
                  ("verdict", "text"), ("observed", "text"), ("lost", ""), ("dup", ""), ("unexpected", ""),
                  ("faults seen", "")]


def _night_cells(n: Night, where: Path) -> str:
    asked = sum(int(e.faults.get("asked") or 0) for e in n.entries)
    seen = sum(int(e.faults.get("seen") or 0) for e in n.entries)
    observed = ", ".join(sorted({str(e.verdict.get("observed")) for e in n.entries}))
    counts = [f"{n.count(k):,}" if n.count(k) is not None else "-" for k in correctness.COUNTS]
    link = _link(n.report, where)
    run = f'<a href="{escape(link)}">{escape(n.run_id)}</a>' if link else escape(n.run_id)
    return (f'<td class="text">{escape(n.date)}</td><td class="text">{run}</td>'
            f'<td class="text">{escape((n.commit or "?")[:7])}</td>'
            f'<td class="text">{escape(n.on.short())}</td>'
            f'<td class="text"><span class="{n.status}">{n.status}</span></td>'
            f'<td class="text">{escape(observed)}</td>' + "".join(f"<td>{c}</td>" for c in counts)
            + f"<td>{seen}/{asked}</td>")


def _alarms(checked: Checked) -> str:
    items = []
    for a in checked.alarms:
        if isinstance(a, correctness.Flip):
            items.append(f'<li class="fail"><a href="#{a.series.anchor}-correctness">'
                         f'{"FAIL" if a.fail else "correctness"}</a>: {escape(a.text())} on '
                         f"{escape(a.run.text())}</li>")
        else:
            items.append(f'<li class="worse">{_change_item(a)}</li>')
    items += [f'<li class="unknown"><a href="#{f.series.anchor}-correctness">cannot judge</a>: '
              f"{escape(f.text())} on {escape(f.run.text())}</li>" for f in checked.unknown]
    items += [f'<li class="pending">pending ({c.after.nights} of {changes_mod.MIN_AFTER} nights at the new '
              f"level): {_change_item(c)}</li>" for c in checked.speed if checked.pending(c)]
    items += [f'<li class="pending">speed not judged yet: {escape(s.label)}: {escape(why)}</li>'
              for s, why in checked.unjudged]
    body = f'<ul class="alarms">{"".join(items)}</ul>' if items else "<p>No alarm.</p>"
    return f"<h2>Alarms</h2>{body}"


def _change_item(c: changes_mod.Change) -> str:
    f = figures.figure(c.figure)
    name = judge.judged_title(f, c.series.nights[-1].expected)
    return (f'<a href="#{c.series.anchor}-{c.figure}">{escape(name)} {c.size:+.1%}</a> since '
            f"{escape(c.run.text())}: {escape(c.series.label)}; {escape(c.between())}")


# -- a series: its charts, and its correctness -------------------------------------------------
def _series(s: Series, checked: Checked, where: Path) -> str:
    table = checked.noise_of(s)
    labels = [n.date for n in s.nights]
    tips = [n.text() for n in s.nights]
    links = [_link(n.report, where) for n in s.nights]
    marks = _version_marks(s) + _machine_marks(s) + [
        svg.Mark(f.night, f"{f.what}: {f.after.split(':')[0]}", "flip")
        for f in checked.flips if f.series is s and not f.unknown]
    alarmed = {c.figure for c in checked.speed if c.series is s and checked.alarmed(c)}
    charts, flat = [], []
    for f in figures.compared():
        if not s.judges(f):
            continue
        values = s.values(f.name)
        if all(v is None for v in values):
            continue
        if all(v == 0 for v in values if v is not None):
            flat.append(f.label)
            continue
        found = [c for c in checked.speed if c.series is s and c.figure == f.name]
        drawn = [svg.Mark(c.night, f"{c.size:+.0%}", "worse" if c.worse else "better") for c in found]
        points = [f"{t}: {f.text(v)}" for t, v in zip(tips, values, strict=True)]
        chart = svg.nights_chart(judge.judged_title(f, s.nights[-1].expected), values, labels=labels,
                                 links=links, tips=points,
                                 band=_band(values, found, table.get(f.name)), marks=drawn + marks,
                                 integer=f.digits == 0 and f.unit in ("events", "records"),
                                 width=CHART_W, height=CHART_H)
        cls = ' class="alarmed"' if f.name in alarmed else ""
        charts.append(f'<div id="{s.anchor}-{f.name}"{cls}>{chart}</div>')
    if not charts and s.machine is not None:
        return ""
    quick = " (quick)" if s.quick else ""
    out = [f'<h3 id="{s.anchor}">{escape(s.scenario)}{quick} {escape(s.case)} '
           f'<span class="muted">{escape(s.where)}, hash {escape(s.scenario_hash)}, {len(s.nights)} nights'
           f"{'; the figures that travel, and correctness' if s.machine is None else ''}</span></h3>"]
    if charts:
        out.append(f'<div class="grid">{"".join(charts)}</div>')
    if flat:
        out.append(f'<p class="muted">0 every night: {escape(", ".join(flat))}</p>')
    if s.machine is None:
        out.append(_correctness(s, where))
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
            marks.append(svg.Mark(i, ", ".join(moved), "version"))
    return marks


def _machine_marks(s: Series) -> list[svg.Mark]:
    """Where the series on every machine moved to another machine."""
    if s.machine is not None:
        return []
    return [svg.Mark(i, s.nights[i].on.short(), "machine") for i in range(1, len(s.nights))
            if differences(s.nights[i - 1].on, s.nights[i].on)]


def _link(report: str | None, where: Path) -> str | None:
    if not report:
        return None
    if "://" in report:
        return report
    # a path relative to the page (the committed store's reports/), or to where `add` ran
    path = next((p for p in (where / report, Path(report)) if p.exists()), None)
    if path is None:
        return None
    try:
        return str(path.resolve().relative_to(where.resolve()))
    except ValueError:
        return path.resolve().as_uri()


def _correctness(s: Series, where: Path) -> str:
    rows = [f'<tr class="{n.status}"><td>{i + 1}</td>{_night_cells(n, where)}</tr>'
            for i, n in enumerate(s.nights)]
    head = "".join(f'<th class="{c}">{h}</th>' for h, c in _NIGHT_COLUMNS)
    return (f'<table class="correctness" id="{s.anchor}-correctness"><tr><th>night</th>{head}</tr>'
            f'{"".join(rows)}</table>')
