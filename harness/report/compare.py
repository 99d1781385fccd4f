"""`python -m harness compare BASE NEW [--fail-on RULES] [--history STORE] [--across-machines]`:
what changed between two runs, and whether it is more than the noise.

BASE and NEW are run directories or summary.json files; BASE may also be a directory of
baselines (`results/baseline/`), of which the one of NEW's scenario is picked. Unlike runs are
refused (exit 2), each difference named: other workloads (quick against full, another scenario
hash, other event counts), and other machines (CPU model, usable CPUs, memory), whose times and
rates differ by the machine. `--across-machines` compares runs of two machines on the figures
that travel (`Figure.travels`: ratios to references measured on the same machine), and on
their verdicts.

Verdicts come first, and each change of one is a regression: a case that passed and now fails,
a weaker observed guarantee, a fault seen before and not now. Then, per case and figure of the
registry (harness/results/figures.py) with a direction, the judged value of each side (an
at-most-once case's throughput with what it lost counted back: harness/report/judge.py), its
median and min-max, and the change of the medians. A change is larger than the noise when the
noise measured says so, at 5% for the whole comparison (Bonferroni: each change a rule judges is
tested at 5% divided by how many are judged):
- with at least two runs on each side: a two-sided Welch t-test, as pyperf does;
- else, with `--history STORE`: the noise that the history measured for that case and figure
  on NEW's machine (its A/A nights or night-to-night differences), which is the noise of one
  night's value (a median of its --repeat runs), taken back to one run and scaled to the count
  of runs on each side (harness/history/noise.py `one_run`).
A rule fails only on a change past its threshold that is also larger than the noise. Without
a measured noise (one run on a side, no history), differences are reported, and judged on
verdicts and limits (`lost:>0`) alone: a threshold within unknown noise decides nothing (the
history measured one run's p99 noise at 8.5-16.9% sd, beyond the default 10%).

Never green on a broken run: NEW must have run every case of BASE to its end. When a NEW run
ended early (its summary's status `aborted` or `error`) or lacks a case that BASE has, compare
exits 4 (when nothing regressed), naming the run and the cases: what did not run cannot be
judged, and is no "no regression".

Rules, comma-separated `metric:threshold` (a metric is a figure with a direction):
  p99:+10%          fails when NEW's median is more than 10% above BASE's
  throughput:-5%    fails when NEW's median is more than 5% below BASE's
  p99:+500          fails when NEW's median is more than 500 (the figure's unit) above BASE's
  lost:>0           fails when any NEW run's value is above 0 (no comparison with BASE)

`lost` counts only in cases whose guarantee forbids losing events (not at-most-once), and
`duplicated` only where duplicates are forbidden (not at-least-once).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError
from harness.report import judge, state
from harness.report.unlike import (
    check_same_machine,
    check_same_workload,
    load,
    load_base,
    machine,
    series,
    with_repeats,
    workload_difference,
)
from harness.results import figures
from harness.results.machine import differences
from harness.results.model import CaseResult, RunResult

__all__ = ["DEFAULT_RULES", "METRICS", "Row", "Rule", "check_same_machine", "check_same_workload", "compare",
           "incomplete", "load", "load_base", "main", "parse_rules", "regressed", "render", "series", "tests",
           "verdict_changes", "with_repeats", "workload_difference"]

DEFAULT_RULES = "p99:+10%,throughput:-5%,lost:>0"
ALPHA = 0.05   # the family-wise error rate of one compare, over all the changes its rules judge

# every figure compare judges, by name: the registry's, read as the table and report.html read it
METRICS = {f.name: f for f in figures.compared()}

_RULE = re.compile(r"^\s*([a-z_0-9]+)\s*:\s*"
                   r"(?:([+-])\s*(\d+(?:\.\d+)?)\s*(%?)|([<>])\s*(-?\d+(?:\.\d+)?))\s*$")


@dataclass(frozen=True)
class Rule:
    metric: str
    kind: str          # "relative" (+-N%), "absolute" (+-N), "limit" (>N or <N)
    sign: str          # "+", "-", ">" or "<"
    value: float
    text: str

    def crossed(self, base: float | None, new: float | None, new_values: list[float]) -> bool:
        """Whether NEW is past the threshold (significance is judged apart)."""
        if self.kind == "limit":
            vals = [v for v in new_values if v is not None]
            if self.sign == ">":
                return any(v > self.value for v in vals)
            return any(v < self.value for v in vals)
        if base is None or new is None:
            return False
        change = new - base if self.kind == "absolute" else (new - base) / abs(base) if base else (
            math.inf if new > base else -math.inf if new < base else 0.0)
        limit = self.value / 100 if self.kind == "relative" else self.value
        return change > limit if self.sign == "+" else change < -limit


def parse_rules(text: str) -> list[Rule]:
    """`--fail-on`'s rules; a bad one raises HarnessError (exit 2) naming it and the forms."""
    rules = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = _RULE.match(part)
        if not m or m.group(1) not in METRICS:
            known = ", ".join(METRICS)
            raise HarnessError(f"--fail-on: {part!r} is not a rule",
                               "write metric:+N% / metric:-N% / metric:+N / metric:>N, "
                               f"with a metric from {known}; "
                               f'e.g. --fail-on "{DEFAULT_RULES}"')
        metric, sign, number, percent, op, limit = m.groups()
        if op:
            rules.append(Rule(metric, "limit", op, float(limit), part))
        else:
            rules.append(Rule(metric, "relative" if percent else "absolute", sign, float(number), part))
    return rules


# -- the figures, against the noise ---------------------------------------------------------------
# per (case, figure name): the relative noise of one run that a history measured
HistoryNoise = dict[tuple[str, str], float]


@dataclass
class Row:
    case: str
    metric: str
    base: list[float]
    new: list[float]
    significant: bool | None
    failed: list[str]
    p: float | None = None
    guarantee: str | None = None
    noise_from: str = ""          # "repeats", "history", or "" (unknown)
    crossed: list[str] | None = None   # rules past their threshold, not judged (noise unknown)

    def side(self, values: list[float]) -> str:
        """The median, with the min-max when there are several, all printed as the figure is:
        the range always holds the median as printed (25.7 [25.6-29.1], never 25.7 [26-29])."""
        if not values:
            return "-"
        shown = figures.figure(self.metric).text
        med = shown(statistics.median(values))
        return med if len(values) == 1 else f"{med} [{shown(min(values))}-{shown(max(values))}]"

    @property
    def title(self) -> str:
        return judge.judged_title(figures.figure(self.metric), self.guarantee)

    @property
    def change(self) -> str:
        if not self.base or not self.new:
            return "-"
        b, n = statistics.median(self.base), statistics.median(self.new)
        if b == 0:
            return "=" if n == 0 else f"+{n:,.0f}" if n > 0 else f"{n:,.0f}"
        return f"{(n - b) / abs(b):+.1%}"

    @property
    def noise(self) -> str:
        if self.significant is None:
            if not (self.base and self.new) or sorted(self.base) == sorted(self.new):
                return ""
            side = "each side" if len(self.base) < 2 and len(self.new) < 2 else (
                "base" if len(self.base) < 2 else "new")
            return f"noise unknown (one run on {side}; no history): not judged"
        p = "" if self.p is None else f" (p={self.p:.2g}"
        p += f", {self.noise_from})" if p else ""
        return ("larger than the noise" if self.significant else "within the noise") + p


def _values(runs: list[CaseResult], f: figures.Figure) -> list[float]:
    return [float(v) for v in (f.judged(c) for c in runs) if v is not None]


def _judged_figures(across: bool) -> list[figures.Figure]:
    return [f for f in figures.compared() if f.travels or not across]


def _p(b: list[float], n: list[float], sd: float | None) -> tuple[float | None, str]:
    """The p that the sides differ by noise alone, and where the noise came from."""
    p = judge.welch_p(b, n)
    if p is not None:
        return p, "repeats"
    p = judge.beyond_p(b, n, sd) if sd else None
    return (p, "history") if p is not None else (None, "")


def tests(base: RunResult, new: RunResult, rules: list[Rule], noise: HistoryNoise | None = None,
          across: bool = False) -> int:
    """How many changes the rules judge against the noise (a case and a metric with a relative
    or absolute rule, and a measured noise): the Bonferroni divisor, so that one compare cries
    wolf at most ALPHA of the time in all, not ALPHA per case and metric."""
    judged = {r.metric for r in rules if r.kind != "limit"}
    base_series = series(base)
    return sum(1 for name, runs in series(new).items() for f in _judged_figures(across) if f.name in judged
               and _p(_values(base_series.get(name, []), f), _values(runs, f),
                      (noise or {}).get((name, f.name)))[0] is not None)


def compare(base: RunResult, new: RunResult, rules: list[Rule], noise: HistoryNoise | None = None,
            across: bool = False) -> list[Row]:
    rows = []
    base_series = series(base)
    alpha = ALPHA / max(tests(base, new, rules, noise, across), 1)
    for name, runs in series(new).items():
        before = base_series.get(name, [])
        for f in _judged_figures(across):
            b, n = _values(before, f), _values(runs, f)
            if not b and not n:
                continue
            p, source = _p(b, n, (noise or {}).get((name, f.name)))
            sig = None if p is None else p < alpha
            failed, crossed = [], []
            for rule in (r for r in rules if r.metric == f.name):
                mid_b, mid_n = (statistics.median(b) if b else None), (statistics.median(n) if n else None)
                if not rule.crossed(mid_b, mid_n, n):
                    continue
                if rule.kind == "limit" or sig is True:
                    failed.append(rule.text)
                elif sig is None:
                    crossed.append(rule.text)
            rows.append(Row(name, f.name, b, n, sig, failed, p, runs[0].guarantee, source, crossed))
    return rows


# -- verdicts ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Change:
    """A change of what a case's verdict rests on: a regression, whatever the noise."""

    case: str
    what: str


# which observed guarantee is at least as strong as which: exactly-once implies the others
_AT_LEAST = {"exactly-once": {"exactly-once", "at-least-once", "at-most-once", "none"},
             "at-least-once": {"at-least-once", "none"}, "at-most-once": {"at-most-once", "none"},
             "none": {"none"}}


def verdict_changes(base: RunResult, new: RunResult) -> list[Change]:
    """Each case that failed in a NEW run: after passing in every BASE run, and also after a
    BASE that failed, could not say (UNKNOWN) or had no such case, since a FAIL is never green;
    each weaker observed guarantee; each fault seen in every BASE run and not seen in a NEW one."""
    out: list[Change] = []
    base_series = series(base)
    for name, runs in series(new).items():
        before = base_series.get(name)
        failing = [c for c in runs if c.verdict.status == "FAIL"]
        if failing:
            then = ("PASS" if all(c.verdict.holds for c in before) else
                    "/".join(sorted({c.verdict.status for c in before}))) if before else "absent in BASE"
            out.append(Change(name, f"verdict {then} -> FAIL ({len(failing)} of {len(runs)} runs): "
                                    f"{failing[0].verdict.detail}"))
        if not before:
            continue
        was = {c.verdict.observed for c in before} - {"unchecked"}
        for now in sorted({c.verdict.observed for c in runs} - {"unchecked"} - was):
            if was and not all(w in _AT_LEAST.get(now, {now}) for w in was):   # not at least as strong
                weaker = all(now in _AT_LEAST.get(w, {w}) for w in was)
                out.append(Change(name, f"observed {'/'.join(sorted(was))} -> {now} "
                                        f"({'a weaker guarantee' if weaker else 'another guarantee'})"))
        out += [Change(name, f"fault {kind} ({asked}) seen in every base run, NOT SEEN in a new run")
                for kind, asked in _seen_before_not_now(before, runs)]
    return out


def _seen_before_not_now(before: list[CaseResult], runs: list[CaseResult]) -> list[tuple[str, str]]:
    def seen(case: CaseResult) -> set[tuple[str, str]]:
        return {(f.kind, f.asked) for f in case.faults if f.observed}

    always = set.intersection(*(seen(c) for c in before)) if before else set()
    asked = {(f.kind, f.asked) for c in runs for f in c.faults}
    return sorted(k for k in always & asked if any(k not in seen(c) for c in runs))


def regressed(base: RunResult, new: RunResult, rows: list[Row]) -> bool:
    """Whether NEW regressed: a verdict changed for the worse, or a rule failed."""
    return bool(verdict_changes(base, new)) or any(r.failed for r in rows)


# summary.json's `status` of a run that ended before all its cases had run (harness/run/runner.py)
ENDED_EARLY = ("aborted", "error")


def incomplete(base: RunResult, news: list[RunResult]) -> list[str]:
    """Why NEW was not run whole, one sentence each: a NEW run (NEW, each --new-also) that ended
    early (aborted, error) and a case of BASE that a NEW run lacks. Never a pass: what did not
    run is not judged, so compare exits 4 when nothing regressed."""
    out = []
    for run in news:
        if run.status in ENDED_EARLY:
            why = f": {run.error}" if run.error else ""
            out.append(f"run {run.run_id} ended {run.status} before all its cases had run{why}")
        missing = [name for name in series(base) if name not in series(run)]
        if missing:
            out.append(f"run {run.run_id} lacks {len(missing)} case(s) of base: {', '.join(missing)}")
    return out


def unknown(new: RunResult) -> list[str]:
    """NEW's cases whose verdict is UNKNOWN: never a pass (exit 4 when nothing regressed)."""
    return sorted({c.series or c.name for c in new.cases if c.verdict.status == "UNKNOWN"})


# -- what it prints, and its exit code --------------------------------------------------------------
def describe(run: RunResult) -> str:
    """"run X (3 runs a case), commit 9c8ce19, Intel(R) Xeon(R) Processor, 2 CPUs, 24 GiB"."""
    counts = [len(v) for v in series(run).values()]
    repeats = f" ({max(counts)} runs a case)" if counts and max(counts) > 1 else ""
    env = run.environment
    commit = (env.get("git_sha") or "?")[:7] + (" (dirty)" if env.get("git_dirty") else "")
    return f"run {run.run_id}{repeats}, commit {commit}, {machine(run).text()}"


def render(base: RunResult, new: RunResult, rows: list[Row], judged: int = 0, across: bool = False,
           unrun: list[str] | None = None) -> str:
    """What compare prints; `unrun`: `incomplete`'s sentences (NEW not run whole)."""
    changes = verdict_changes(base, new)
    headers = ["case", "figure", "base", "new", "change", "noise", "rule"]
    table = [[r.case, r.title, r.side(r.base), r.side(r.new), r.change, r.noise,
              "FAILED " + ", ".join(r.failed) if r.failed else
              "past " + ", ".join(r.crossed) + " (not judged)" if r.crossed else ""] for r in rows]
    if state.swept(new.cases):   # a [matrix] over Spark's state settings: each case's beside its name
        settings = {name: state.text(runs[0]) for name, runs in series(new).items()}
        headers.insert(1, state.COLUMN)
        for r, line in zip(rows, table, strict=True):
            line.insert(1, settings.get(r.case, "-"))
    widths = [max(len(h), *(len(t[i]) for t in table)) if table else len(h) for i, h in enumerate(headers)]
    level = (f"larger than the noise: p below {ALPHA:g} / {judged} changes judged" if judged
             else "no change judged against a measured noise")
    lines = [f"compare: base {describe(base)}", f"     new {describe(new)}", f"  {level}"]
    if across:
        moved = differences(machine(base), machine(new))
        lines.append(f"  across machines ({'; '.join(moved) or 'the same machine'}): verdicts and the "
                     "figures that travel only")
    lines += (["verdicts:", *(f"  {c.case}: {c.what}" for c in changes)] if changes
              else ["verdicts: unchanged"])
    lines += [f"  {name}: verdict UNKNOWN in a new run (cannot judge)" for name in unknown(new)]
    lines += ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(),
              "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(t, widths, strict=True)).rstrip() for t in table]
    faults = _fault_lines(base, new)
    if faults:
        lines += ["faults (asked; when each took effect):", *faults]
    missing = sorted(set(series(base)) - set(series(new)))
    if missing:
        lines.append(f"cases only in base: {', '.join(missing)}")
    if unrun:
        lines += ["new not run whole (cannot judge what did not run):", *(f"  {why}" for why in unrun)]
    failed = [r for r in rows if r.failed]
    if changes or failed:
        lines.append("regressions:")
        lines += [f"  {c.case}: {c.what}" for c in changes]
        lines += [f"  {r.case}: {r.metric} {r.change} ({', '.join(r.failed)}; {r.noise or 'new run only'})"
                  for r in failed]
    else:
        unjudged = sum(1 for r in rows if r.crossed)
        said = ("no regression among the cases that ran, but NEW did not run every case of BASE to its "
                "end: cannot judge" if unrun else "no regression")
        lines.append(said + (f" ({unjudged} change(s) past a threshold, within a noise nobody "
                             "measured: repeat the runs (--repeat 3) or give --history)" if unjudged else ""))
    return "\n".join(lines)


def _fault_lines(base: RunResult, new: RunResult) -> list[str]:
    """Each fault of each case: when it was asked, and when it took effect on each side."""
    base_series = series(base)
    lines = []
    for name, runs in series(new).items():
        before = base_series.get(name, [])
        for k, fault in enumerate(runs[0].faults):
            base_at, new_at = _landed(before, k, fault.kind), _landed(runs, k, fault.kind)
            lines.append(f"  {name}: {fault.kind} asked {fault.asked}: base {base_at}; new {new_at}")
    return lines


def _landed(cases: list[CaseResult], k: int, kind: str) -> str:
    """When the k-th fault (of `kind`) took effect in each of the runs: "landed 17.3 s, missed"."""
    found = [c.faults[k] for c in cases if len(c.faults) > k and c.faults[k].kind == kind]
    return ", ".join(f.took_effect for f in found) or "-"


def main(args, history_noise: Callable[[Path, RunResult, bool], HistoryNoise] | None = None) -> int:
    """`compare`'s command: 0 no regression, 1 a regression (every one listed, verdicts first),
    4 none but a verdict UNKNOWN in NEW or NEW not run whole (a NEW run aborted or ended in error,
    or without a case BASE has: `incomplete`), 2 unlike runs or bad input. `history_noise(STORE, NEW,
    across)` reads a history's noise for `--history` (harness/history/check.py's `noise_for`,
    passed by the CLI: the history reads this module, not the other way round)."""
    rules = parse_rules(args.fail_on if args.fail_on is not None else DEFAULT_RULES)
    across = bool(getattr(args, "across_machines", False))
    news = [load(args.new), *(load(p) for p in args.new_also)]
    new = with_repeats(news[0], news[1:])
    base = with_repeats(load_base(args.base, new), [load(p) for p in args.base_also])
    check_same_workload(base, new)
    if not across:
        check_same_machine(base, new)
    store = getattr(args, "history", None)
    noise = history_noise(store, new, across) if store is not None and history_noise else None
    rows = compare(base, new, rules, noise, across)
    unrun = incomplete(base, news)
    print(render(base, new, rows, tests(base, new, rules, noise, across), across, unrun))
    return 1 if regressed(base, new, rows) else 4 if unknown(new) or unrun else 0
