"""`python -m harness compare BASE NEW [--fail-on RULES]`: what changed between two runs, and
whether it is more than the noise.

BASE and NEW are run directories or summary.json files; BASE may also be a directory of
baselines (`results/baseline/`), of which the one of NEW's scenario is picked. Runs of
different workloads are refused (exit 2): quick against full, another scenario hash, other
event counts; comparing them would call the difference a regression.

Verdicts come first, and each change of one is a regression: a case that passed and now fails,
a weaker observed guarantee, a fault seen before and not now. Then, per case and figure (the
figure registry, harness/results/figures.py, as the table and report.html print them), the
median and the min-max of each side and the change of the medians. With at least two runs on
each side it asks whether the change is larger than the noise, as pyperf does: a two-sided
Welch t-test, at 5% for the whole comparison (Bonferroni: each change judged by a rule at 5%
divided by how many are judged, so that many cases and figures do not make a false alarm
likely). A rule fails only on a change past its threshold that is also significant (or,
without repeats, past its threshold: the noise is then unknown, and the output says so).

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
from harness.results import figures
from harness.results import summary as summary_mod
from harness.results.model import CaseResult, RunResult

DEFAULT_RULES = "p99:+10%,throughput:-5%,lost:>0"


@dataclass(frozen=True)
class Metric:
    unit: str
    higher_is_better: bool
    get: Callable[[CaseResult], float | None]
    digits: int = 0


# every figure with a direction, read as the terminal table and report.html read it
METRICS = {f.name: Metric(f.unit, f.better == figures.HIGHER, figures.JUDGED.get(f.name, f.get), f.digits)
           for f in figures.shown_in(figures.COMPARE) if f.better is not None}

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


def load(path: Path) -> RunResult:
    """A run's summary from its directory or its summary.json (any version this harness reads)."""
    path = Path(path)
    file = path / "summary.json" if path.is_dir() else path
    if not file.exists():
        raise HarnessError(f"{path}: no summary.json there", "give a run directory or a summary.json file")
    try:
        return summary_mod.load(file)
    except ValueError as exc:
        raise HarnessError(str(exc),
                           "compare runs written by a harness that knows their schema version") from None


def load_base(path: Path, new: RunResult) -> RunResult:
    """BASE: a run, or a directory of baselines (`*.summary.json`, as results/baseline/ holds),
    of which the one of NEW's scenario (its name, quick or not, its hash) is picked."""
    path = Path(path)
    if not path.is_dir() or (path / "summary.json").exists():
        return load(path)
    files = sorted(path.glob("*.summary.json"))
    if not files:
        raise HarnessError(f"{path}: no summary.json there, nor any baseline (*.summary.json)",
                           "give a run directory, a summary.json file, or a directory of baselines")
    why = {f.name: workload_difference(load(f), new) for f in files}
    matching = [f for f in files if why[f.name] is None]
    if len(matching) != 1:
        listed = "; ".join(f"{name}: {reason or 'matches'}" for name, reason in why.items())
        problem = (f"{path}: {'no' if not matching else 'more than one'} baseline matches the new run's "
                   f"workload ({listed})")
        raise HarnessError(problem, "pass the baseline file itself, or regenerate the baselines from "
                                    "today's scenarios (results/baseline/README.md)")
    return load(matching[0])


def workload_difference(base: RunResult, new: RunResult) -> str | None:
    """How two runs' workloads differ, or None when they are the same: the scenario, quick
    against full, the scenario's hash (where both record one), a case's events."""
    b, n = base.scenario, new.scenario
    if b.get("name") != n.get("name"):
        return f"scenario {b.get('name')!r} against {n.get('name')!r}"
    if bool(b.get("quick")) != bool(n.get("quick")):
        kinds = ["quick" if s.get("quick") else "full" for s in (b, n)]
        return f"a {kinds[0]} run against a {kinds[1]} one"
    if b.get("hash") and n.get("hash") and b["hash"] != n["hash"]:
        return f"scenario hash {b['hash']} against {n['hash']} (the scenario changed)"
    base_cases = series(base)
    for name, runs in series(new).items():
        before = {int(c.events["produced"]) for c in base_cases.get(name, []) if c.events.get("produced")}
        now = {int(c.events["produced"]) for c in runs if c.events.get("produced")}
        if before and now and before != now:
            return (f"case {name} produced {', '.join(f'{x:,}' for x in sorted(before))} events against "
                    f"{', '.join(f'{x:,}' for x in sorted(now))}")
    return None


def check_same_workload(base: RunResult, new: RunResult) -> None:
    """Refuse runs of different workloads: the difference would read as a regression."""
    why = workload_difference(base, new)
    if why is not None:
        raise HarnessError(f"the runs are of different workloads: {why}",
                           "compare runs of the same scenario, both quick or both full (a baseline of "
                           "the same scenario: results/baseline/)")


def with_repeats(first: RunResult, others: list[RunResult]) -> RunResult:
    """`first` with the cases of `others` as more runs of the same series (the confirmation
    job's interleaved runs: before, after, before, after). Each must be of the same workload."""
    from dataclasses import replace

    if not others:
        return first
    cases = list(first.cases)
    for other in others:
        why = workload_difference(first, other)
        if why is not None:
            raise HarnessError(f"run {other.run_id} is of another workload than {first.run_id}: {why}",
                               "give runs of one scenario on each side")
        cases += other.cases
    counts: dict[str, int] = {}
    renumbered = []
    for c in cases:
        name = c.series or c.name
        counts[name] = counts.get(name, 0) + 1
        renumbered.append(replace(c, series=name, repeat=counts[name]))
    return replace(first, cases=renumbered, run_id=f"{first.run_id}+{len(others)}")


def series(result: RunResult) -> dict[str, list[CaseResult]]:
    """The cases of a run grouped by series (a repeated case's runs together), in run order."""
    out: dict[str, list[CaseResult]] = {}
    for c in result.cases:
        out.setdefault(c.series or c.name, []).append(c)
    return out


ALPHA = 0.05   # the family-wise error rate of one compare, over all the changes its rules judge


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for aa in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                   -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x)
                     + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def welch_p(a: list[float], b: list[float]) -> float | None:
    """The two-sided p-value of Welch's t-test on the means of `a` and `b` (pyperf's model);
    None with fewer than two values on a side (the noise is unknown)."""
    if len(a) < 2 or len(b) < 2:
        return None
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return 0.0 if ma != mb else 1.0
    t = abs(ma - mb) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / ((va ** 2 / (len(a) - 1) if va else 0) + (vb ** 2 / (len(b) - 1) if vb else 0))
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def significant(a: list[float], b: list[float], alpha: float = ALPHA) -> bool | None:
    """Is the difference larger than the noise, at level `alpha`? None: the noise is unknown."""
    p = welch_p(a, b)
    return None if p is None else p < alpha


@dataclass
class Row:
    case: str
    metric: str
    base: list[float]
    new: list[float]
    significant: bool | None
    failed: list[str]
    p: float | None = None

    def side(self, values: list[float]) -> str:
        """The median, with the min-max when there are several, all printed as the figure is:
        the range always holds the median as printed (25.7 [25.6-29.1], never 25.7 [26-29])."""
        if not values:
            return "-"
        shown = figures.figure(self.metric).text
        med = shown(statistics.median(values))
        return med if len(values) == 1 else f"{med} [{shown(min(values))}-{shown(max(values))}]"

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
            if not (self.base and self.new):
                return ""
            side = "each side" if len(self.base) < 2 and len(self.new) < 2 else (
                "base" if len(self.base) < 2 else "new")
            return f"noise unknown (one run on {side})"
        p = "" if self.p is None else f" (p={self.p:.2g})"
        return ("larger than the noise" if self.significant else "within the noise") + p


def _values(runs: list[CaseResult], metric: Metric) -> list[float]:
    return [float(v) for v in (metric.get(c) for c in runs) if v is not None]


def tests(base: RunResult, new: RunResult, rules: list[Rule]) -> int:
    """How many changes the rules judge against the noise (a case and a metric with a
    relative or absolute rule, repeats on both sides): the Bonferroni divisor, so that one
    compare cries wolf at most ALPHA of the time in all, not ALPHA per case and metric."""
    judged = {r.metric for r in rules if r.kind != "limit"}
    base_series = series(base)
    return sum(1 for name, runs in series(new).items() for m in judged
               if len(_values(runs, METRICS[m])) >= 2
               and len(_values(base_series.get(name, []), METRICS[m])) >= 2)


def compare(base: RunResult, new: RunResult, rules: list[Rule]) -> list[Row]:
    rows = []
    base_series, new_series = series(base), series(new)
    alpha = ALPHA / max(tests(base, new, rules), 1)
    for name, runs in new_series.items():
        before = base_series.get(name, [])
        for metric_name, metric in METRICS.items():
            b, n = _values(before, metric), _values(runs, metric)
            if not b and not n:
                continue
            p = welch_p(b, n)
            sig = None if p is None else p < alpha
            failed = []
            for rule in (r for r in rules if r.metric == metric_name):
                crossed = rule.crossed(statistics.median(b) if b else None,
                                       statistics.median(n) if n else None, n)
                if crossed and (rule.kind == "limit" or sig is not False):
                    failed.append(rule.text)
            rows.append(Row(name, metric_name, b, n, sig, failed, p))
    return rows


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
    """Each case that passed in every BASE run and failed in a NEW one; each weaker observed
    guarantee; each fault seen in every BASE run and not seen in a NEW one."""
    out: list[Change] = []
    base_series = series(base)
    for name, runs in series(new).items():
        before = base_series.get(name)
        if not before:
            continue
        failing = [c for c in runs if not c.verdict.holds]
        if all(c.verdict.holds for c in before) and failing:
            out.append(Change(name, f"verdict PASS -> FAIL ({len(failing)} of {len(runs)} runs): "
                                    f"{failing[0].verdict.detail}"))
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


def render(base: RunResult, new: RunResult, rows: list[Row], judged: int = 0) -> str:
    def label(s: RunResult) -> str:
        counts = [len(v) for v in series(s).values()]
        repeats = max(counts) if counts else 0
        return f"run {s.run_id}" + (f" ({repeats} runs a case)" if repeats > 1 else "")

    changes = verdict_changes(base, new)
    headers = ["case", "metric", "base", "new", "change", "noise", "rule"]
    table = [[r.case, f"{r.metric} ({METRICS[r.metric].unit})", r.side(r.base), r.side(r.new), r.change,
              r.noise, "FAILED " + ", ".join(r.failed) if r.failed else ""] for r in rows]
    widths = [max(len(h), *(len(t[i]) for t in table)) if table else len(h) for i, h in enumerate(headers)]
    level = (f"; larger than the noise: Welch's p below {ALPHA:g} / {judged} changes judged"
             if judged else "")
    lines = [f"compare: base {label(base)} -> new {label(new)}{level}"]
    lines += (["verdicts:", *(f"  {c.case}: {c.what}" for c in changes)] if changes
              else ["verdicts: unchanged"])
    lines += ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(),
              "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(t, widths, strict=True)).rstrip() for t in table]
    faults = _fault_lines(base, new)
    if faults:
        lines += ["faults (asked; when each took effect):", *faults]
    missing = sorted(set(series(base)) - set(series(new)))
    if missing:
        lines.append(f"cases only in base: {', '.join(missing)}")
    failed = [r for r in rows if r.failed]
    if changes or failed:
        lines.append("regressions:")
        lines += [f"  {c.case}: {c.what}" for c in changes]
        lines += [f"  {r.case}: {r.metric} {r.change} ({', '.join(r.failed)}; {r.noise or 'new run only'})"
                  for r in failed]
    else:
        lines.append("no regression")
    return "\n".join(lines)


def regressed(base: RunResult, new: RunResult, rows: list[Row]) -> bool:
    """Whether NEW regressed: a verdict changed for the worse, or a rule failed."""
    return bool(verdict_changes(base, new)) or any(r.failed for r in rows)
