"""The terminal table of a run: one row per case."""

from __future__ import annotations

from collections.abc import Callable

from harness.results.model import CaseResult, RunResult

COLUMNS: list[tuple[str, Callable[[CaseResult], str]]] = [
    ("case", lambda c: c.name),
    ("guarantee", lambda c: c.guarantee),
    ("observed", lambda c: c.verdict.observed),
    ("verdict", lambda c: "PASS" if c.verdict.holds else "FAIL"),
    ("produced", lambda c: _count(c.events["produced"])),
    ("expected", lambda c: _count(c.events["expected"])),
    ("lost", lambda c: _count(c.events["lost"])),
    ("dup", lambda c: _count(c.events["duplicated"])),
    ("late", lambda c: _count(c.events["dropped_late"])),
    ("offered/s", lambda c: _num(c.offered)),
    ("processed/s", lambda c: _num(c.throughput)),
    ("ev-time p50 ms", lambda c: _num(c.latency.p50)),
    ("ev-time p99 ms", lambda c: _num(c.latency.p99)),
    ("proc p99 ms", lambda c: _num(c.latency_of("processing_time").p99)),
    ("max lag", lambda c: _count(c.backpressure["max_lag_records"])),
    ("keeps up", lambda c: _yes_no(c.backpressure.get("keeping_up"))),
    ("batch p50 ms", lambda c: _num(c.batch_p50_ms)),
    ("faults seen", lambda c: _faults_seen(c)),
    ("recovery s", lambda c: "-" if c.recovery_s is None else f"{c.recovery_s:,.1f}"),
]
_LEFT = {"case", "guarantee", "observed", "verdict"}


def _count(value) -> str:
    return "-" if value is None else f"{value:,}"


def _num(value) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _yes_no(value) -> str:
    return "-" if value is None else ("yes" if value else "NO")


def _faults_seen(case: CaseResult) -> str:
    return f"{sum(f.observed for f in case.faults)}/{len(case.faults)}" if case.faults else "-"


def render(result: RunResult) -> str:
    """The table, each case's verdict sentence, and the status line. Every figure comes from
    the result model's accessors, as report.html's and compare's do."""
    rows = [[name for name, _ in COLUMNS]] + [[cell(c) for _, cell in COLUMNS] for c in result.cases]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) if COLUMNS[i][0] in _LEFT else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(row, widths, strict=True))) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for case in result.cases:
        lines.append(f"{case.name}: {case.verdict.detail}")
        lines += [f"  fault {f.kind} at {f.at_s:g}s: {'seen' if f.observed else 'NOT SEEN'}: {f.detail}"
                  for f in case.faults]
        lines += [f"  incident {i.kind} at {i.at_s:g}s (not scheduled): {i.target}: {i.cause}"
                  for i in case.incidents if not i.scheduled]
        if not case.verdict.holds:
            lines += [f"  finding {f.cls} ({f.count:,}): {f.story}" for f in case.findings]
    for row in result.sections.get("watermark_sweep") or []:
        share = (row["late_share"] or 0) * 100
        lines.append(f"watermark {row['watermark_ms']:>7,} ms: event-time p99 "
                     f"{_num(row['event_time_p99_ms'])} ms, {row['dropped_late']:,} dropped as late "
                     f"({share:.2f}% of sent)")
    lines.append(f"status: {result.status}  run: {result.run_id}")
    return "\n".join(lines)


def render_sustain(sustain: dict) -> str:
    """The search's trials, lowest rate first, and the rate found; with sizes, each size's
    search and then the scaling curve."""
    if sustain.get("scaling"):
        return render_scaling(sustain)
    lines = [f"sustain: case {sustain['case']}"]
    for t in sustain.get("trials", []):
        lines.append(f"  {t['eps']:>9,.0f} events/s  {'kept up' if t['sustained'] else 'behind '}  "
                     f"processed {_num(t['processed_eps'])}/s  p99 {_num(t['p99_ms'])} ms  "
                     f"lag trend {t['lag_trend_records_per_s']} records/s²"
                     + (f"  ({t['why_not']})" if t["why_not"] else ""))
    found, top = sustain.get("rate_eps"), (sustain.get("spark_ceiling") or {}).get("eps")
    if top:
        lines.append(f"Spark's ceiling for the query (rate source, noop sink): {top:,.0f} events/s")
    lines.append(f"sustained: {found:,.0f} events/s" if found is not None
                 else "sustained: none of the rates tried")
    return "\n".join(lines)


def render_scaling(sustain: dict) -> str:
    parts = [render_sustain({"case": f"{sustain['case']} on {s['executors']} executors ({s['master']})", **{
        k: v for k, v in s.items() if k != "scaling"}}) for s in sustain["scaling"]]
    base = sustain.get("speedup_base_executors")
    rows = [[str(s["executors"]), _num(s["rate_eps"]), _ratio(s.get("speedup")), _ratio(s.get("efficiency")),
             _num((s.get("spark_ceiling") or {}).get("eps")), _ratio(s.get("ceiling_speedup"))]
            for s in sustain["scaling"]]
    head = ["executors", "sustained/s", f"speed-up (vs {base})", "efficiency", "Spark ceiling/s",
            "ceiling speed-up"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    table = ["  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True)),
             *("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows)]
    return "\n\n".join([*parts, "scaling: case " + sustain["case"] + "\n" + "\n".join(table)])


def _ratio(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def render_hunt(hunt: dict) -> str:
    """The search's runs, the shrinking, the smallest plan, and last the line that reproduces it."""
    kinds = ", ".join(hunt.get("kinds", []))
    lines = [f"hunt: case {hunt['case']}, seed {hunt.get('seed')}, kinds {kinds}"]
    for t in hunt.get("tried", []):
        verdict = "BREAKS" if t["breaks"] else "holds "
        lines.append(f"  run {t['run']:>3}  {verdict}  observed {t['observed']:<13}  {_plan_text(t['plan'])}")
    ends = {"violation": "stopped at the first violation", "runs": "every run done",
            "budget": "stopped: the budget was spent"}
    stopped = ends.get(str(hunt.get("stopped")), str(hunt.get("stopped")))
    lines.append(f"hunt: {stopped}")
    minimal = hunt.get("minimal")
    if not minimal:
        lines.append("no violation found")
        return "\n".join(lines)
    shrunk = hunt.get("shrink") or {}
    rate = shrunk.get("flake_rate")
    lines.append(f"shrinking: {len(shrunk.get('steps', []))} candidates in {shrunk.get('runs')} runs; "
                 f"{shrunk.get('flaky')} failed only on their second run"
                 + (f" (flake rate {rate:.0%} of those run twice)" if rate is not None else ""))
    lines.append(f"smallest plan ({minimal['faults']} fault{'s' if minimal['faults'] != 1 else ''}, "
                 f"{minimal['workload_s']:g}s workload): {_plan_text(minimal['plan'])}")
    lines.append(hunt["reproduce"])
    return "\n".join(lines)


def _plan_text(plan: list[dict]) -> str:
    from faults.kinds import describe

    return describe(plan)
