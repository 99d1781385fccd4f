"""The terminal table of a run: one row per case."""

from __future__ import annotations

from collections.abc import Callable

from harness.report import state
from harness.results import figures
from harness.results.model import PASS, CaseResult, RunResult

# the columns around the figures: who the case is and its verdict, then whether it kept up and
# its faults; every number in between is a figure of harness/results/figures.py
_HEAD: list[tuple[str, Callable[[CaseResult], str]]] = [
    ("case", lambda c: c.name),
    ("guarantee", lambda c: c.guarantee),
    ("observed", lambda c: c.verdict.observed),
    ("verdict", lambda c: c.verdict.status),
]
_TAIL: list[tuple[str, Callable[[CaseResult], str]]] = [
    ("keeps up", lambda c: keeps_up(c)),
    ("faults seen", lambda c: _faults_seen(c)),
]
_AFTER: dict[str, str] = {"max_lag": "keeps up", "batch_p50": "faults seen"}   # placed right after a figure
_LEFT = {"case", "guarantee", state.COLUMN, "observed", "verdict"}


def columns() -> list[tuple[str, Callable[[CaseResult], str]]]:
    """The table's columns in order: the head, each figure shown in the table (keeps up right
    after max lag, as the report has it), then the rest of the tail."""
    out = list(_HEAD)
    tail = dict(_TAIL)
    for f in figures.shown_in(figures.TABLE):
        out.append((f.column, f.cell))
        after = _AFTER.get(f.name)
        if after:
            out.append((after, tail.pop(after)))
    return out + list(tail.items())


COLUMNS = columns()


def columns_for(cases: list[CaseResult]) -> list[tuple[str, Callable[[CaseResult], str]]]:
    """COLUMNS, with the cases' state settings right after the guarantee when a [matrix] swept
    them (harness/report/state.py): side by side, as the guarantees are."""
    if not state.swept(cases):
        return COLUMNS
    at = [name for name, _ in COLUMNS].index("guarantee") + 1
    return [*COLUMNS[:at], (state.COLUMN, state.text), *COLUMNS[at:]]

# what the columns that are no figure mean, printed under the table (docs/measurement.md says more)
LEGEND = ("column verdict: PASS, FAIL or UNKNOWN (nothing failed, but the case could not be decided; "
          "never a pass)",
          "column keeps up: over the measured window, the lag at the batches' ends grew no faster than "
          "[measure] lag_trend_max of the offered rate (-: not judged)")


def keeps_up(case: CaseResult) -> str:
    """Whether the case kept up (LEGEND says what that is): yes, NO, or - when not judged."""
    value = case.backpressure.get("keeping_up")
    return "-" if value is None else ("yes" if value else "NO")


def _faults_seen(case: CaseResult) -> str:
    return f"{sum(f.observed for f in case.faults)}/{len(case.faults)}" if case.faults else "-"


def not_measured(case: CaseResult, where: str = figures.TABLE) -> dict[str, list[str]]:
    """Each reason a figure shown `where` has no value, with the labels of the figures it holds for."""
    out: dict[str, list[str]] = {}
    for f in figures.shown_in(where):
        why = f.why_missing(case)
        if why:
            out.setdefault(why, []).append(f.label)
    return out


def _status(result: RunResult) -> str:
    missed = [f"{c.name}: {f.kind} ({f.asked})" for c in result.cases for f in c.missed]
    line = f"status: {result.status}  verdict: {result.verdict_status}  run: {result.run_id}"
    if missed:
        line += ("\nthe schedule did not fit the run (UNKNOWN unless the case failed, exit 4; nothing said "
                 "of the pipeline): " + "; ".join(missed) + " could not land before the workload's end "
                 "(max_duration)")
    return line


def render(result: RunResult) -> str:
    """The table, each case's verdict sentence, its faults (when each was asked and when it took
    effect), the figures it could not measure and why, and the status line. Every figure comes
    from the figure registry, as report.html's and compare's do."""
    cols = columns_for(result.cases)
    rows = [[name for name, _ in cols]] + [[cell(c) for _, cell in cols] for c in result.cases]
    widths = [max(len(row[i]) for row in rows) for i in range(len(cols))]
    lines = ["  ".join(cell.ljust(w) if cols[i][0] in _LEFT else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(row, widths, strict=True))) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines += LEGEND
    for case in result.cases:
        lines.append(f"{case.name}: {case.verdict.detail}")
        if case.workload_text:
            lines.append(f"  {case.workload_text}")
        lines += [f"  fault {f.kind} at {f.when}: "
                  f"{'MISSED' if f.missed else 'seen' if f.observed else 'NOT SEEN'}: {f.detail}"
                  for f in case.faults]
        lines += [f"  {', '.join(labels)} not measured: {why}" for why, labels in not_measured(case).items()]
        lines += [f"  incident {i.kind} at {i.at_s:g}s (not scheduled): {i.target}: {i.cause}"
                  for i in case.incidents if not i.scheduled]
        if case.verdict.status != PASS:
            lines += [f"  finding {f.cls} ({f.count:,}): {f.story}" for f in case.findings]
    for row in result.sections.get("watermark_sweep") or []:
        share = (row["late_share"] or 0) * 100
        lines.append(f"watermark {row['watermark_ms']:>7,} ms: {said('p99', row['event_time_p99_ms'])}, "
                     f"{row['dropped_late']:,} dropped as late "
                     f"({share:.2f}% of sent)")
    lines.append(_status(result))
    return "\n".join(lines)


def said(name: str, value) -> str:
    """A figure's value in a sentence, label, text and unit: "ev-time p99 1,234 ms"."""
    f = figures.figure(name)
    return f"{f.label} {f.text(value)} {f.unit}"


def _p99_text(trial: dict) -> str:
    """A trial's p99, or why it has none that could be measured."""
    if (trial.get("p99_over") or "").startswith("unmeasurable"):
        return f"{figures.figure('p99').label} unmeasurable (no row closed before the flush)"
    return said("p99", trial["p99_ms"])


def render_sustain(sustain: dict) -> str:
    """The search's trials, lowest rate first, and the rate found; with sizes, each size's
    search and then the scaling curve."""
    if sustain.get("scaling"):
        return render_scaling(sustain)
    lines = [f"sustain: case {sustain['case']}"]
    for t in sustain.get("trials", []):
        lines.append(f"  {t['eps']:>9,.0f} events/s  {'kept up' if t['sustained'] else 'behind '}  "
                     f"{said('throughput', t['processed_eps'])}  {_p99_text(t)}  "
                     f"lag trend {t['lag_trend_records_per_s']} records/s²"
                     + (f"  ({t['why_not']})" if t["why_not"] else "")
                     + ("  [freshly started services]" if t.get("fresh") else ""))
    top = (sustain.get("spark_ceiling") or {}).get("eps")
    if top:
        ceiling_cores = (sustain.get("spark_ceiling") or {}).get("spark_cores")
        lines.append(f"Spark's ceiling for the query (rate source, noop sink): {top:,.0f} events/s"
                     + (f" on {ceiling_cores} cores" if ceiling_cores else ""))
    busy = sustain.get("busy_ceiling") or {}
    if busy.get("eps"):
        lines.append(f"its ceiling on this stack (rows per second of batch time, trial {busy['trial']}): "
                     f"{busy['eps']:,.0f} events/s")
    lines.append(_sustained(sustain))
    if sustain.get("eps_per_spark_core"):
        lines.append(f"per Spark core: {sustain['eps_per_spark_core']:,.0f} events/s "
                     f"(Spark's driver and executors used {sustain['spark_cores']} cores)")
        if sustain.get("rate_of_ceiling_per_core"):
            lines.append("per Spark core against the ceiling per Spark core: "
                         f"{sustain['rate_of_ceiling_per_core']}")
    if sustain.get("eps_per_stack_core"):
        by = ", ".join(f"{name} {cores}" for name, cores in (sustain.get("cores_by") or {}).items())
        lines.append(f"per stack core: {sustain['eps_per_stack_core']:,.0f} events/s (the whole stack used "
                     f"{sustain['stack_cores']} cores" + (f": {by})" if by else ")"))
    if sustain.get("above_ceiling"):
        lines.append(f"above Spark's ceiling: {sustain['above_ceiling']}")
    return "\n".join(lines)


def _sustained(sustain: dict) -> str:
    """The rate found, and its bracket when the search gave one (harness/run/bracket.py): the
    rate held twice, the second time on freshly started services, and the first above it
    that failed; why the bracket is open or wider than its precision."""
    found, limit = sustain.get("rate_eps"), sustain.get("bracket_limit")
    held, failed = sustain.get("bracket") or (found, None)
    if found is None:
        return "sustained: none of the rates tried" + (
            f" held twice (the lowest that failed: {_num(failed)} events/s; lower --min-eps)"
            if "bracket" in sustain else "")
    text = f"sustained: {found:,.0f} events/s"
    if "bracket" not in sustain:
        return text
    text += f", held twice, the second time on freshly started services ({sustain.get('confirmed_by')})"
    if limit == "max-eps" or not held or not failed:
        return text + "; every rate held up to --max-eps: a lower bound"
    text += f"; bracket {held:,.0f}-{failed:,.0f} events/s ({failed / held:.3f}x)"
    return text + (": wider than 10%, --steps ran out" if limit == "steps" else "")


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


def _num(value) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _ratio(value) -> str:
    return "-" if value is None else f"{value:.2f}"
