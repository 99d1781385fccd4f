"""`python -m harness compare BASE NEW [--fail-on RULES]`: what changed between two runs, and
whether it is more than the noise.

BASE and NEW are run directories or summary.json files. Cases are matched by their series
(a case's name in the scenario; `run --repeat N` runs each one N times, as `<name>-r<k>`).
Per case and metric it prints the median and the min-max of each side and the change of
the medians. With at least two runs on each side it asks whether the change is larger
than the noise, as pyperf does: a two-sided Welch t-test at 95%. A rule fails only on a
change past its threshold that is also significant (or, without repeats, past its
threshold: the noise is then unknown, and the output says so).

Rules, comma-separated `metric:threshold`:
  p99:+10%          fails when NEW's median is more than 10% above BASE's
  throughput:-5%    fails when NEW's median is more than 5% below BASE's
  p99:+500          fails when NEW's median is more than 500 (the metric's unit) above BASE's
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
from harness.report import summary as summary_mod

DEFAULT_RULES = "p99:+10%,throughput:-5%,lost:>0"


def _get(case: dict, *path, default=None):
    for key in path:
        if not isinstance(case, dict) or case.get(key) is None:
            return default
        case = case[key]
    return case


def _throughput(c: dict):
    measured = _get(c, "throughput_eps", "measured") or {}
    return measured.get("processed", _get(c, "throughput_eps", "processed"))


def _latency(kind: str, q: str) -> Callable[[dict], float | None]:
    def get(c: dict):
        return _get(c, "latency_measured_ms", kind, q, default=_get(c, "latency_ms", kind, q))
    return get


def _recovery(c: dict):
    times = [_get(f, "recovery", "lag_recovered_s") for f in c.get("faults", [])]
    times = [t for t in times if t is not None]
    return max(times) if times else None


@dataclass(frozen=True)
class Metric:
    unit: str
    higher_is_better: bool
    get: Callable[[dict], float | None]


METRICS = {
    "throughput": Metric("events/s", True, _throughput),
    "p50": Metric("ms", False, _latency("event_time", "p50")),
    "p99": Metric("ms", False, _latency("event_time", "p99")),
    "processing_p99": Metric("ms", False, _latency("processing_time", "p99")),
    # only where the case's guarantee forbids them: at-most-once may lose, at-least-once duplicate
    "lost": Metric("events", False, lambda c: _get(c, "events", "lost")
                   if c.get("guarantee") != "at-most-once" else None),
    "duplicated": Metric("events", False, lambda c: _get(c, "events", "duplicated")
                         if c.get("guarantee") != "at-least-once" else None),
    "max_lag": Metric("records", False, lambda c: _get(c, "backpressure", "max_lag_records")),
    "recovery": Metric("s", False, _recovery),
    "batch_p50": Metric("ms", False,
                        lambda c: _get(c, "batch_time", "phases_ms", "triggerExecution", "median")),
}

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


def load(path: Path) -> dict:
    """A run's summary from its directory or its summary.json (unknown schema versions refused)."""
    path = Path(path)
    file = path / "summary.json" if path.is_dir() else path
    if not file.exists():
        raise HarnessError(f"{path}: no summary.json there", "give a run directory or a summary.json file")
    try:
        return summary_mod.load(file)
    except ValueError as exc:
        raise HarnessError(str(exc),
                           "compare runs written by a harness that knows their schema version") from None


def series(summary: dict) -> dict[str, list[dict]]:
    """The cases of a run grouped by series (a repeated case's runs together), in run order."""
    out: dict[str, list[dict]] = {}
    for c in summary.get("cases", []):
        out.setdefault(c.get("series") or c["name"], []).append(c)
    return out


# two-sided 95% critical values of Student's t, by degrees of freedom (then 1.96)
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042]


def significant(a: list[float], b: list[float]) -> bool | None:
    """Welch's t-test at 95% (pyperf's model): is the difference of means larger than the
    noise? None with fewer than two values on a side (the noise is unknown)."""
    if len(a) < 2 or len(b) < 2:
        return None
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return ma != mb
    t = abs(ma - mb) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / ((va ** 2 / (len(a) - 1) if va else 0) + (vb ** 2 / (len(b) - 1) if vb else 0))
    critical = _T95[min(max(int(df), 1), len(_T95)) - 1] if df < len(_T95) + 1 else 1.96
    return t > critical


@dataclass
class Row:
    case: str
    metric: str
    base: list[float]
    new: list[float]
    significant: bool | None
    failed: list[str]

    @staticmethod
    def _side(values: list[float]) -> str:
        if not values:
            return "-"
        med = statistics.median(values)
        text = f"{med:,.1f}" if abs(med) < 100 and med != int(med) else f"{med:,.0f}"
        return text if len(values) == 1 else f"{text} [{min(values):,.0f}-{max(values):,.0f}]"

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
        return "larger than the noise" if self.significant else "within the noise"


def compare(base: dict, new: dict, rules: list[Rule]) -> list[Row]:
    rows = []
    base_series, new_series = series(base), series(new)
    for name, runs in new_series.items():
        before = base_series.get(name, [])
        for metric_name, metric in METRICS.items():
            b = [v for v in (metric.get(c) for c in before) if v is not None]
            n = [v for v in (metric.get(c) for c in runs) if v is not None]
            if not b and not n:
                continue
            sig = significant(b, n)
            failed = []
            for rule in (r for r in rules if r.metric == metric_name):
                crossed = rule.crossed(statistics.median(b) if b else None,
                                       statistics.median(n) if n else None, n)
                if crossed and (rule.kind == "limit" or sig is not False):
                    failed.append(rule.text)
            rows.append(Row(name, metric_name, [float(v) for v in b], [float(v) for v in n], sig, failed))
    return rows


def render(base: dict, new: dict, rows: list[Row]) -> str:
    def label(s: dict) -> str:
        counts = [len(v) for v in series(s).values()]
        repeats = max(counts) if counts else 0
        return f"run {s.get('run_id')}" + (f" ({repeats} runs a case)" if repeats > 1 else "")

    headers = ["case", "metric", "base", "new", "change", "noise", "rule"]
    table = [[r.case, f"{r.metric} ({METRICS[r.metric].unit})", Row._side(r.base), Row._side(r.new), r.change,
              r.noise, "FAILED " + ", ".join(r.failed) if r.failed else ""] for r in rows]
    widths = [max(len(h), *(len(t[i]) for t in table)) if table else len(h) for i, h in enumerate(headers)]
    lines = [f"compare: base {label(base)} -> new {label(new)}",
             "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(t, widths, strict=True)).rstrip() for t in table]
    missing = sorted(set(series(base)) - set(series(new)))
    if missing:
        lines.append(f"cases only in base: {', '.join(missing)}")
    failed = [r for r in rows if r.failed]
    if failed:
        lines.append("regressions:")
        lines += [f"  {r.case}: {r.metric} {r.change} ({', '.join(r.failed)}; {r.noise or 'new run only'})"
                  for r in failed]
    else:
        lines.append("no regression")
    return "\n".join(lines)
