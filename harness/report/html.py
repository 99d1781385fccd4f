"""report.html: one self-contained page per run, rebuilt from the run directory alone.

It reads summary.json (refusing a schema version it does not know) and, per case,
timeline.parquet, the latency-*.hdr histograms and discrepancies.parquet. The charts are
inline SVG (harness/report/svg.py), so the file needs nothing beside it. It shows:

- the run: scenario, status, environment (versions, CPU, memory, git commit);
- the guarantees side by side: throughput, p99, lost, duplicated, recovery time, verdict;
- per case, over time: the four throughputs, latency p50 and p99, the lag and each
  component's CPU, with each fault's period shaded and labelled; the latency percentile
  plot; and, when the verdict failed, the discrepancies;
- the sustain search and the watermark sweep, when the run had them.
"""

from __future__ import annotations

import math
from html import escape
from pathlib import Path

from harness.findings import evidence
from harness.report import state, svg
from harness.report.table import LEGEND, keeps_up, not_measured
from harness.results import figures
from harness.results import summary as summary_mod
from harness.results.model import FAIL, PASS, CaseResult, RunResult
from harness.results.rundir import CaseDir, RunDir

# the percentile plot's points: dense towards the tail, as HdrHistogram's output is
PLOT_PERCENTILES = (0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.999, 100.0)
DISCREPANCIES_SHOWN = 20
_CSS = """
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1100px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ddd; }
h3 { font-size: 15px; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; }
th { background: #f3f3f3; } td.text, th.text { text-align: left; }
.pass { color: #1a7f37; font-weight: bold; } .fail { color: #c62828; font-weight: bold; }
.unknown { color: #8a6d00; font-weight: bold; }
svg.chart { display: block; margin: 8px 0; }
.muted { color: #666; font-size: 12px; }
"""


def write(run_dir: Path) -> Path:
    """Build report.html in `run_dir` from what the directory holds; returns its path."""
    files = RunDir(Path(run_dir))
    result = summary_mod.load(files.summary)
    path = files.report
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(render(files.path, result), encoding="utf-8")
    tmp.replace(path)
    return path


def render(run_dir: Path, result: RunResult) -> str:
    cases, files = result.cases, RunDir(Path(run_dir))
    parts = [f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
             f"<title>{escape(_title(result))}</title><style>{_CSS}</style></head><body>",
             f"<h1>{escape(_title(result))}</h1>", _run_table(result),
             "<h2>The guarantees side by side</h2>", _comparison(cases)]
    if result.error:
        parts.append(f"<p class=\"fail\">run error: {escape(str(result.error))}</p>")
    if result.sections.get("sustain"):
        parts.append(_sustain(result.sections["sustain"]))
    if result.sections.get("watermark_sweep"):
        parts.append(_sweep(result.sections["watermark_sweep"]))
    parts += [_case(files.case(c.name).path, c) for c in cases]
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _title(result: RunResult) -> str:
    scenario = result.scenario
    quick = " (quick)" if scenario.get("quick") else ""
    return f"Run {result.run_id}: scenario {scenario.get('name', '?')}{quick}"


def _fmt(value, digits: int = 0, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return f"{value:,.{digits}f}{unit}"
    return escape(str(value))


def _table(headers: list[str], rows: list[list[str]], table_id: str = "", text_columns: int = 1) -> str:
    ident = f' id="{table_id}"' if table_id else ""
    if not any(headers):   # a table of names and values: no header row
        body = "".join("<tr>" + "".join(f'<td class="text">{c}</td>' for c in row) + "</tr>" for row in rows)
        return f"<table{ident}><tbody>{body}</tbody></table>"
    head = "".join(f'<th class="text">{escape(h)}</th>' if i < text_columns else f"<th>{escape(h)}</th>"
                   for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f'<td class="text">{c}</td>' if i < text_columns else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _run_table(result: RunResult) -> str:
    env, scenario = result.environment, result.scenario
    commit = env.get("git_sha") or "-"
    if env.get("git_dirty"):
        commit += " (with uncommitted changes)"
    rows = [("status", result.status), ("scenario", scenario.get("path")),
            ("started", result.started_at), ("ended", result.ended_at),
            ("harness", env.get("harness")), ("python", env.get("python")), ("java", env.get("java")),
            ("spark", env.get("spark")), ("kafka", env.get("kafka")),
            ("spark master", env.get("spark_master")),
            ("cpu", f"{env.get('cpus', '?')} x {env.get('cpu_model') or 'unknown model'}"),
            ("memory", _fmt(env["memory_bytes"] / 2**30, 1, " GiB") if env.get("memory_bytes") else "-"),
            ("git commit", commit)]
    return _table(["", ""], [[escape(k), _fmt(v)] for k, v in rows], "run", text_columns=2)


def _verdict(case: CaseResult) -> str:
    status = case.verdict.status
    return f'<span class="{status.lower()}">{status}</span>'


COMPARISON_HEAD = ["case", "guarantee", "sink", "verdict", "observed"]


def _comparison(cases: list[CaseResult]) -> str:
    """The guarantees side by side: who each case is, then every figure of the registry the
    report shows (harness/results/figures.py, as the terminal table prints them), and whether it
    kept up; a figure it could not measure says why below the table."""
    shown = figures.shown_in(figures.REPORT)
    # a [matrix] over Spark's state settings: each case's beside its guarantee (harness/report/state.py)
    swept = state.swept(cases)
    head = [*COMPARISON_HEAD[:2], state.COLUMN, *COMPARISON_HEAD[2:]] if swept else COMPARISON_HEAD
    headers = [*head, *(f.column for f in shown), "keeps up"]
    rows = [[escape(c.name), escape(c.guarantee), *([escape(state.text(c))] if swept else []), escape(c.sink),
             _verdict(c), escape(c.verdict.observed or "-"), *(f.cell(c) for f in shown), keeps_up(c)]
            for c in cases]
    notes = [f"{escape(c.name)}: {escape(', '.join(labels))} not measured: {escape(why)}"
             for c in cases for why, labels in not_measured(c, figures.REPORT).items()]
    out = _table(headers, rows, "comparison", text_columns=len(head))
    legend = "".join(f'<p class="muted">{escape(line)}</p>' for line in LEGEND)
    return out + legend + "".join(f'<p class="muted">{n}</p>' for n in notes)


def _bands(case: CaseResult) -> list[svg.Band]:
    out = []
    for f in case.faults:
        start = f.landed_s if f.landed_s is not None else f.started_s
        if start is None:
            continue
        end = f.ended_s if f.ended_s is not None else start
        out.append(svg.Band(float(start), float(end), f.kind))
    out += [svg.Band(float(i.at_s), float(i.at_s), f"{i.kind}: {i.target}", incident=True)
            for i in case.incidents if not i.scheduled and i.at_s is not None]
    return out


def _timeline_charts(case_dir: Path, case: CaseResult) -> list[str]:
    path = CaseDir(case_dir).timeline
    if not path.exists():
        return ['<p class="muted">no timeline.parquet: the case sent nothing</p>']
    import pandas as pd

    t = pd.read_parquet(path)
    xs, bands, name = t["second"].tolist(), _bands(case), case.name

    def series(columns: dict[str, str], connect: bool = False) -> list[svg.Series]:
        return [svg.Series(label, xs, [None if pd.isna(v) else float(v) for v in t[col]], connect)
                for col, label in columns.items() if col in t]

    fig, since = figures.figure, "seconds since the first event"
    charts = [svg.line_chart(f"{name}: throughput", series(
                  {"offered": fig("offered").label, "ingested": "ingested",
                   "processed": fig("throughput").label, "delivered": "delivered"}),
                  x_label=since, y_label=fig("throughput").unit, bands=bands),
              svg.line_chart(f"{name}: latency", series(
                  {f"{column}_ms": fig(figure_name).label for column, figure_name in _LATENCY_SERIES.items()},
                  connect=True),   # output comes in bursts (windows close): join the seconds that had some
                  x_label=f"{since} (output visible)", y_label=fig("p99").unit, bands=bands),
              svg.line_chart(f"{name}: consumer lag", series({"lag_records": "lag"}),
                             x_label=since, y_label=fig("max_lag").unit, bands=bands)]
    cpu = {c: c.split(":", 1)[1] for c in t.columns if c.startswith("cpu_percent:")}
    if cpu:   # what each process used meanwhile (resources.parquet, joined per second)
        charts.append(svg.line_chart(f"{name}: CPU by component", series(cpu),
                                     x_label="seconds since the first event", y_label="% of one core",
                                     bands=bands))
    return charts


# timeline.parquet's latency columns (without _ms) -> the figure whose label names the series
_LATENCY_SERIES = {"event_time_p50": "p50", "event_time_p99": "p99", "processing_time_p50": "processing_p50",
                   "processing_time_p99": "processing_p99"}


def _percentile_chart(case_dir: Path, name: str) -> str:
    from harness.metrics import latency

    curves = {}
    for kind in (*latency.LATENCY_KINDS, *latency.OPTIONAL):
        path = CaseDir(case_dir).latency(kind)
        if not path.exists():
            continue
        h = latency.load(path)
        if h.get_total_count() == 0:
            continue
        curves[kind.replace("_", " ")] = [(p, float(h.get_value_at_percentile(p))) for p in PLOT_PERCENTILES]
    return svg.percentile_chart(f"{name}: latency by percentile", curves)


def _discrepancies(case_dir: Path, case: CaseResult) -> str:
    if case.verdict.status == PASS:
        return ""
    why = "Why it failed" if case.verdict.status == FAIL else "Why it is unknown"
    out = [f"<h3>{why}</h3><p>{escape(case.verdict.detail)}</p>"]
    if case.error:
        out.append(f"<p>{escape(str(case.error))}</p>")
    path = CaseDir(case_dir).discrepancies
    if path.exists():
        import pandas as pd

        d = pd.read_parquet(path)
        if len(d):
            rows = [[escape(str(r.kind)), escape(str(r.item)), escape(str(r.expected)), escape(str(r.actual)),
                     _fmt(int(r.batch_id)) if r.batch_id >= 0 else "-"]
                    for r in d.head(DISCREPANCIES_SHOWN).itertuples()]
            out.append(f'<p class="muted">the first {len(rows)} of {len(d):,} '
                       "kept in discrepancies.parquet</p>")
            out.append(_table(["kind", "item", "expected", "actual", "batch"], rows,
                              f"discrepancies-{case.name}", text_columns=4))
    return "\n".join(out)


def _faults_table(case: CaseResult) -> str:
    """Each fault: when the schedule asked for it ("5s", "batch 2") and when it took effect."""
    if not case.faults:
        return ""
    rows = [[escape(f.kind), escape(f.asked), _fmt(f.landed_s if f.landed_s is not None else f.started_s, 1),
             _fmt(f.ended_s, 1), escape(f.target), "missed" if f.missed else _fmt(f.observed),
             escape(f.detail), _recovered(f)] for f in case.faults]
    return _table(["fault", "asked", "landed s", "to s", "target", "observed", "what happened",
                   figures.figure("recovery").column], rows, f"faults-{case.name}", text_columns=2)


def _incidents_table(case: CaseResult) -> str:
    """What nobody scheduled (and what the schedule explains, marked so)."""
    if not case.incidents:
        return ""
    rows = [[escape(i.kind), _fmt(i.at_s, 1), escape(i.target), escape(i.cause),
             "yes" if i.scheduled else '<span class="fail">no</span>'] for i in case.incidents]
    headers = ["incident", "at s", "target", "cause", "explained by a fault"]
    return "<h3>Incidents</h3>" + _table(headers, rows, f"incidents-{case.name}", text_columns=1)


def _recovered(fault) -> str:
    """The fault's lag recovery in seconds (as the case's recovery figure prints), or why there is none."""
    seconds = fault.recovery.get("lag_recovered_s")
    note = fault.recovery.get("note")
    if seconds is not None or not note:
        return figures.figure("recovery").text(seconds)
    return f'<span class="muted">{escape(note)}</span>'


def _case(case_dir: Path, case: CaseResult) -> str:
    name = case.name
    head = (f'<h2 id="case-{escape(name)}">{escape(name)} {_verdict(case)}</h2>'
            f'<p>{escape(case.guarantee)} into {escape(case.sink)}, pipeline {escape(case.pipeline)}: '
            f'{escape(case.verdict.detail)}</p>'
            + (f'<p class="muted">{escape(case.workload_text)}</p>' if case.workload_text else ""))
    return "\n".join([head, _findings(case), _faults_table(case), _incidents_table(case),
                      *_timeline_charts(case_dir, case), _percentile_chart(case_dir, name),
                      _discrepancies(case_dir, case)])


def _findings(case: CaseResult) -> str:
    """A failed case's anomalies first: each class, its count, its story, and its witnesses."""
    if case.verdict.holds or not case.findings:
        return ""
    out = [f'<h3 id="findings-{escape(case.name)}">Findings</h3>']
    for f in case.findings:
        out.append(f'<h4 class="fail">{escape(f.cls)}: {_fmt(f.count)}</h4><p>{escape(f.story)}</p>')
        keys, rows = evidence.table(f)   # the witnesses in the story's units (harness/findings/evidence.py)
        if keys:
            out.append(_table(keys, [[escape(c) for c in row] for row in rows], text_columns=len(keys)))
        if f.faults:
            out.append(f'<p class="muted">in effect: {escape("; ".join(f.faults))}</p>')
        if f.checkpoint_files:
            out.append(f'<p class="muted">checkpoint: {escape(", ".join(f.checkpoint_files))}</p>')
    return "\n".join(out)


def _sustain(found: dict) -> str:
    if found.get("scaling"):
        return _scaling(found)
    trials = sorted(found.get("trials", []), key=lambda t: t["eps"])
    ceiling = (found.get("spark_ceiling") or {}).get("eps")
    offered, processed, p99 = (figures.figure(n) for n in ("offered", "throughput", "p99"))
    rows = [[offered.text(t["eps"]), "kept up" if t["sustained"] else "behind",
             processed.text(t.get("processed_eps")), p99.text(t.get("p99_ms")),
             _fmt(t.get("lag_trend_records_per_s"), 2), escape(t.get("why_not") or "")] for t in trials]
    chart = svg.line_chart(f"sustain: {p99.label} against the offered rate (case {found.get('case')})",
                           [svg.Series(p99.label, [t["eps"] for t in trials],
                                       [t.get("p99_ms") for t in trials])],
                           x_label=offered.title, y_label=p99.unit)
    return "\n".join([f"<h2>Sustainable rate: {_fmt(found.get('rate_eps'))} events/s</h2>",
                      "<p>Spark's own ceiling for the query (rate source, noop sink): "
                      f"{_fmt(ceiling)} events/s; the sustained rate is "
                      f"{_fmt((found.get('rate_of_ceiling') or 0) * 100, 0)}% of it"
                      + (f", and {_fmt(found['rate_of_ceiling_per_core'] * 100, 0)}% of it per core Spark "
                         "used" if found.get("rate_of_ceiling_per_core") else "")
                      + ". On this stack (Kafka, "
                      "the sink and the generator beside it), the most rows per second of batch time a "
                      f"trial showed: {_fmt((found.get('busy_ceiling') or {}).get('eps'))} events/s; the "
                      f"sustained rate is {_fmt((found.get('rate_of_busy_ceiling') or 0) * 100, 0)}% "
                      "of it."
                      + (" Held twice, the second time on freshly started services; bracket (held, first "
                         f"failed above it): {_fmt(found['bracket'][0])}-{_fmt(found['bracket'][1])} events/s"
                         + (f" ({escape(found['bracket_limit'])})" if found.get("bracket_limit") else "")
                         + "."
                         if found.get("bracket") else "")
                      + (f" Above Spark's ceiling: {escape(found['above_ceiling'])}."
                         if found.get("above_ceiling") else "") + "</p>",
                      _table([offered.column, "result", processed.column, p99.column, "lag trend", "why not"],
                             rows, "sustain", text_columns=0), chart])


def _scaling(found: dict) -> str:
    """The scaling curve: each size's sustained rate against the executors, beside linear
    speed-up from the smallest size and Spark's own ceiling at each size; then each search."""
    sizes = found["scaling"]
    base = sizes[0]
    xs = [float(s["executors"]) for s in sizes]
    first = base["rate_eps"]
    linear = [first * s["executors"] / base["executors"] if first else None for s in sizes]
    chart = svg.line_chart(f"scaling: sustained rate against executors (case {found.get('case')})",
                           [svg.Series("sustained events/s", xs, [s["rate_eps"] for s in sizes]),
                            svg.Series("linear from the smallest size", xs, linear),
                            svg.Series("Spark's ceiling (rate source, noop sink)", xs,
                                       [(s.get("spark_ceiling") or {}).get("eps") for s in sizes])],
                           x_label="executors", y_label="events/s")
    rows = [[_fmt(s["executors"]), escape(s["master"]), _fmt(s["rate_eps"]), _fmt(s.get("speedup"), 2),
             _fmt(s.get("efficiency"), 2), _fmt((s.get("spark_ceiling") or {}).get("eps")),
             _fmt(s.get("ceiling_speedup"), 2)] for s in sizes]
    parts = [f"<h2>Scaling: {_fmt(found.get('rate_eps'))} events/s at best</h2>",
             _table(["executors", "master", "sustained/s", f"speed-up (vs {base['executors']})", "efficiency",
                     "Spark ceiling/s", "ceiling speed-up"], rows, "scaling", text_columns=2), chart]
    for s in sizes:
        one = _sustain({**s, "case": f"{found.get('case')}, {s['executors']} executors"})
        parts.append(one.replace("<h2>", "<h3>").replace("</h2>", "</h3>"))
    return "\n".join(parts)


def _sweep(sweep: list[dict]) -> str:
    p99 = figures.figure("p99")
    rows = [[escape(str(s.get("case"))), _fmt(s.get("watermark_ms")), p99.text(s.get("event_time_p99_ms")),
             _fmt((s.get("late_share") or 0) * 100, 2, "%")] for s in sweep]
    chart = svg.line_chart("latency against completeness",
                           [svg.Series(p99.label, [float(s["watermark_ms"]) for s in sweep],
                                       [s.get("event_time_p99_ms") for s in sweep])],
                           x_label="watermark delay (ms)", y_label=p99.unit)
    return "\n".join(["<h2>Watermark sweep</h2>",
                      _table(["case", "watermark ms", p99.column, "dropped as late"], rows,
                             "watermark-sweep"), chart])
