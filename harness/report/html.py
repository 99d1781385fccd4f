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

from harness.report import summary as summary_mod
from harness.report import svg

REPORT = "report.html"
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
.unchecked { color: #777; font-weight: bold; }
svg.chart { display: block; margin: 8px 0; }
.muted { color: #666; font-size: 12px; }
"""


def write(run_dir: Path) -> Path:
    """Build report.html in `run_dir` from what the directory holds; returns its path."""
    run_dir = Path(run_dir)
    summary = summary_mod.load(run_dir / "summary.json")
    path = run_dir / REPORT
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(render(run_dir, summary), encoding="utf-8")
    tmp.replace(path)
    return path


def render(run_dir: Path, summary: dict) -> str:
    cases = summary.get("cases", [])
    parts = [f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
             f"<title>{escape(_title(summary))}</title><style>{_CSS}</style></head><body>",
             f"<h1>{escape(_title(summary))}</h1>", _run_table(summary),
             "<h2>The guarantees side by side</h2>", _comparison(cases)]
    if summary.get("error"):
        parts.append(f"<p class=\"fail\">run error: {escape(str(summary['error']))}</p>")
    if summary.get("sustain"):
        parts.append(_sustain(summary["sustain"]))
    if summary.get("watermark_sweep"):
        parts.append(_sweep(summary["watermark_sweep"]))
    parts += [_case(run_dir / "cases" / c["name"], c) for c in cases]
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _title(summary: dict) -> str:
    scenario = summary.get("scenario", {})
    quick = " (quick)" if scenario.get("quick") else ""
    return f"Run {summary.get('run_id', '?')}: scenario {scenario.get('name', '?')}{quick}"


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


def _run_table(summary: dict) -> str:
    env, scenario = summary.get("environment", {}), summary.get("scenario", {})
    commit = env.get("git_sha") or "-"
    if env.get("git_dirty"):
        commit += " (with uncommitted changes)"
    rows = [("status", summary.get("status")), ("scenario", scenario.get("path")),
            ("started", summary.get("started_at")), ("ended", summary.get("ended_at")),
            ("harness", env.get("harness")), ("python", env.get("python")), ("java", env.get("java")),
            ("spark", env.get("spark")), ("kafka", env.get("kafka")),
            ("spark master", env.get("spark_master")),
            ("cpu", f"{env.get('cpus', '?')} x {env.get('cpu_model') or 'unknown model'}"),
            ("memory", _fmt(env["memory_bytes"] / 2**30, 1, " GiB") if env.get("memory_bytes") else "-"),
            ("git commit", commit)]
    return _table(["", ""], [[escape(k), _fmt(v)] for k, v in rows], "run", text_columns=2)


def _verdict(case: dict) -> str:
    v = case.get("verdict", {})
    if v.get("holds") is None:
        return '<span class="unchecked">UNCHECKED</span>'
    return '<span class="pass">PASS</span>' if v.get("holds") else '<span class="fail">FAIL</span>'


def _measured(case: dict, kind: str) -> float | None:
    lat = case.get("latency_measured_ms") or case.get("latency_ms") or {}
    return (lat.get(kind) or {}).get("p99")


def _comparison(cases: list[dict]) -> str:
    headers = ["case", "guarantee", "sink", "verdict", "observed", "offered/s", "processed/s",
               "event-time p99 ms", "processing p99 ms", "lost", "duplicated", "recovery s", "keeps up"]
    rows = []
    for c in cases:
        eps, events = c.get("throughput_eps", {}), c.get("events", {})
        measured = eps.get("measured") or {}
        rows.append([escape(c["name"]), escape(c.get("guarantee", "")), escape(c.get("sink", "")),
                     _verdict(c),
                     escape(str(c.get("verdict", {}).get("observed") or "-")),
                     _fmt(measured.get("offered", eps.get("offered"))),
                     _fmt(measured.get("processed", eps.get("processed"))),
                     _fmt(_measured(c, "event_time")), _fmt(_measured(c, "processing_time")),
                     _fmt(events.get("lost")), _fmt(events.get("duplicated")),
                     _fmt(summary_mod.lag_recovered_s(c), 1),
                     _fmt(c.get("backpressure", {}).get("keeping_up"))])
    return _table(headers, rows, "comparison", text_columns=5)


def _bands(case: dict) -> list[svg.Band]:
    out = []
    for f in case.get("faults", []):
        if f.get("started_s") is None:
            continue
        end = f.get("ended_s") if f.get("ended_s") is not None else f["started_s"]
        out.append(svg.Band(float(f["started_s"]), float(end), f.get("kind", "fault")))
    return out


def _timeline_charts(case_dir: Path, case: dict) -> list[str]:
    path = case_dir / "timeline.parquet"
    if not path.exists():
        return ['<p class="muted">no timeline.parquet: the case sent nothing</p>']
    import pandas as pd

    t = pd.read_parquet(path)
    xs, bands, name = t["second"].tolist(), _bands(case), case["name"]

    def series(columns: dict[str, str], connect: bool = False) -> list[svg.Series]:
        return [svg.Series(label, xs, [None if pd.isna(v) else float(v) for v in t[col]], connect)
                for col, label in columns.items() if col in t]

    charts = [svg.line_chart(f"{name}: throughput", series(
                  {"offered": "offered", "ingested": "ingested", "processed": "processed",
                   "delivered": "delivered"}),
                  x_label="seconds since the first event", y_label="events/s", bands=bands),
              svg.line_chart(f"{name}: latency", series(
                  {"event_time_p50_ms": "event time p50", "event_time_p99_ms": "event time p99",
                   "processing_time_p50_ms": "processing p50", "processing_time_p99_ms": "processing p99"},
                  connect=True),   # output comes in bursts (windows close): join the seconds that had some
                  x_label="seconds since the first event (output visible)", y_label="ms", bands=bands),
              svg.line_chart(f"{name}: consumer lag", series({"lag_records": "lag (records)"}),
                             x_label="seconds since the first event", y_label="records", bands=bands)]
    cpu = {c: c.split(":", 1)[1] for c in t.columns if c.startswith("cpu_percent:")}
    if cpu:   # what each process used meanwhile (resources.parquet, joined per second)
        charts.append(svg.line_chart(f"{name}: CPU by component", series(cpu),
                                     x_label="seconds since the first event", y_label="% of one core",
                                     bands=bands))
    return charts


def _percentile_chart(case_dir: Path, name: str) -> str:
    from harness.metrics import latency

    curves = {}
    for kind in (*latency.KINDS, *latency.OPTIONAL):
        path = case_dir / f"latency-{kind}.hdr"
        if not path.exists():
            continue
        h = latency.load(path)
        if h.get_total_count() == 0:
            continue
        curves[kind.replace("_", " ")] = [(p, float(h.get_value_at_percentile(p))) for p in PLOT_PERCENTILES]
    return svg.percentile_chart(f"{name}: latency by percentile", curves)


def _discrepancies(case_dir: Path, case: dict) -> str:
    if case.get("verdict", {}).get("holds") is not False:
        return ""
    detail = escape(case.get("verdict", {}).get("detail", ""))
    out = [f"<h3>Why it failed</h3><p>{detail}</p>"]
    if case.get("error"):
        out.append(f"<p>{escape(str(case['error']))}</p>")
    path = case_dir / "discrepancies.parquet"
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
                              f"discrepancies-{case['name']}", text_columns=4))
    return "\n".join(out)


def _faults_table(case: dict) -> str:
    faults = case.get("faults", [])
    if not faults:
        return ""
    rows = [[escape(f.get("kind", "")), _fmt(f.get("started_s"), 1), _fmt(f.get("ended_s"), 1),
             escape(str(f.get("target", ""))), _fmt(f.get("observed")), escape(str(f.get("detail", ""))),
             _fmt(f.get("recovery", {}).get("lag_recovered_s"), 1)] for f in faults]
    return _table(["fault", "from s", "to s", "target", "observed", "what happened", "lag recovered s"],
                  rows, text_columns=1)


def _case(case_dir: Path, case: dict) -> str:
    name = case["name"]
    head = (f'<h2 id="case-{escape(name)}">{escape(name)} {_verdict(case)}</h2>'
            f'<p>{escape(case.get("guarantee", ""))} into {escape(case.get("sink", ""))}, '
            f'pipeline {escape(case.get("pipeline", ""))}: '
            f'{escape(case.get("verdict", {}).get("detail", ""))}</p>')
    return "\n".join([head, _faults_table(case), *_timeline_charts(case_dir, case),
                      _percentile_chart(case_dir, name), _discrepancies(case_dir, case)])


def _sustain(found: dict) -> str:
    trials = sorted(found.get("trials", []), key=lambda t: t["eps"])
    ceiling = (found.get("spark_ceiling") or {}).get("eps")
    rows = [[_fmt(t["eps"]), "kept up" if t["sustained"] else "behind", _fmt(t.get("processed_eps")),
             _fmt(t.get("p99_ms")), _fmt(t.get("lag_trend_records_per_s"), 2), escape(t.get("why_not") or "")]
            for t in trials]
    chart = svg.line_chart(f"sustain: event-time p99 against the offered rate (case {found.get('case')})",
                           [svg.Series("p99 ms", [t["eps"] for t in trials],
                                       [t.get("p99_ms") for t in trials])],
                           x_label="offered events/s", y_label="ms")
    return "\n".join([f"<h2>Sustainable rate: {_fmt(found.get('rate_eps'))} events/s</h2>",
                      "<p>Spark's own ceiling for the query (rate source, noop sink): "
                      f"{_fmt(ceiling)} events/s; the sustained rate is "
                      f"{_fmt((found.get('rate_of_ceiling') or 0) * 100, 0)}% of it.</p>",
                      _table(["offered/s", "result", "processed/s", "p99 ms", "lag trend", "why not"], rows,
                             "sustain", text_columns=0), chart])


def _sweep(sweep: list[dict]) -> str:
    rows = [[escape(str(s.get("case"))), _fmt(s.get("watermark_ms")), _fmt(s.get("event_time_p99_ms")),
             _fmt((s.get("late_share") or 0) * 100, 2, "%")] for s in sweep]
    chart = svg.line_chart("latency against completeness",
                           [svg.Series("event-time p99 ms", [float(s["watermark_ms"]) for s in sweep],
                                       [s.get("event_time_p99_ms") for s in sweep])],
                           x_label="watermark delay (ms)", y_label="ms")
    return "\n".join(["<h2>Watermark sweep</h2>",
                      _table(["case", "watermark ms", "event-time p99 ms", "dropped as late"], rows,
                             "watermark-sweep"), chart])
