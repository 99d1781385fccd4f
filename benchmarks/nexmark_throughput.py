"""Nexmark's throughput per core on Structured Streaming, beside nexmark/nexmark's published
Flink figures (docs/performance.md, "Nexmark throughput per core").

For each query, `python -m harness sustain` on nexmark.toml's case: the highest constant rate
that keeps up (exactly-once into PostgreSQL, Kafka in between), held twice, the second time on
freshly started services, with its bracket (the first rate above it that failed, within 10%);
the cores Spark's driver and executors used at it (Nexmark's Cores: its TaskManagers' CPU) and
the cores the whole stack used (the broker, PostgreSQL and the generator too: Flink's
generator runs inside its job, so its figure counts it); and Spark's own ceiling for the query
in the same run (the rate source into noop, no Kafka, no sink). Rates count all three streams
(person, auction and bid), as Nexmark does.

    python -m benchmarks.nexmark_throughput --out DIR [--queries q0,q1] [--quick] [--repeat N]

Prints the table in Markdown and writes DIR/throughput.json; each search's run directory is
DIR/<query>[-rN]. With --repeat N, each figure is the median over the N searches; the first
doubles from the query's start rate, the others from half the rate the first found.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from harness.paths import REPO_ROOT

SCENARIO = REPO_ROOT / "harness" / "scenario" / "scenarios" / "nexmark.toml"
STATELESS = ("q0", "q1", "q2", "q14", "q21", "q22")
# nexmark/nexmark GUIDE_V1.md, "Nexmark Benchmark Result" (Flink 1.13 ~ 2.0): Throughput/Cores,
# thousands of events per second per core of its TaskManagers; q6 has no row
FLINK_K_PER_CORE = {"q0": 155.02, "q1": 157.94, "q2": 175.21, "q3": 152.12, "q4": 34.33, "q5": 22.14,
                    "q7": 12.33, "q8": 146.14, "q9": 14.24, "q10": 57.81, "q11": 39.7, "q12": 75.67,
                    "q13": 130.73, "q14": 161.23, "q15": 72.42, "q16": 18.65, "q17": 116.8, "q18": 53.7,
                    "q19": 44.04, "q20": 18.98, "q21": 98.49, "q22": 129.96}
# where a search starts: 8,000 events/s for the stateless queries, which every one kept up
# with (run nxa: q0 from 1,000 passed 1,000-7,000), 500 for the rest. A first trial that
# fails ends a search with nothing: q1 and q2 once failed theirs at 2,000 on the lag's trend
# sampled by the second, which the trend at the batches' ends no longer reads (flow.py)
START_EPS = {q: 8000 for q in STATELESS}
# the event-time p99 a sustained rate must stay under: nexmark.toml sends 1% of its events 10 s
# late, so its p99 sits at their 10 s plus the watermark's 4 s at any rate; 5 s above that
P99_MS = 19_000


# the search's cap: twice q2's 64,000, the generator's measured headroom (docs/performance.md)
MAX_EPS = 128_000


def search(query: str, out: Path, quick: bool, start_eps: float | None = None,
           steps: int | None = None) -> dict:
    """One sustain search of `query`, from `start_eps` (default START_EPS), bisecting until its
    bracket is within 10% (or `steps` times): its sustain section of summary.json."""
    start = start_eps or START_EPS.get(query, 500)
    args = [sys.executable, "-m", "harness", "sustain", str(SCENARIO), "--case", query, "--out", str(out),
            "--min-eps", str(int(start)), "--max-eps", str(MAX_EPS), "--p99", f"{P99_MS}ms"]
    if steps is not None:
        args += ["--steps", str(steps)]
    if quick:
        args.append("--quick")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run(args, cwd=REPO_ROOT, env=env, text=True, capture_output=True)
    print(proc.stdout[-1500:], file=sys.stderr)
    summary = out / "summary.json"
    if not summary.exists():
        raise SystemExit(f"{query}: sustain wrote no summary (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(summary.read_text())["sustain"]


def row(query: str, searches: list[dict]) -> dict:
    """The median over the repeats of each figure."""
    def med(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    rate = med([s.get("rate_eps") for s in searches])
    ceiling = med([(s.get("spark_ceiling") or {}).get("eps") for s in searches])
    ceiling_batch = med([(s.get("spark_ceiling") or {}).get("rows_per_batch") for s in searches])
    busy = med([(s.get("busy_ceiling") or {}).get("eps") for s in searches])
    cores = med([s.get("spark_cores") for s in searches])
    per_core = med([s.get("eps_per_spark_core") for s in searches])
    stack_cores = med([s.get("stack_cores") for s in searches])
    per_stack_core = med([s.get("eps_per_stack_core") for s in searches])
    ceiling_per_core = med([(s.get("spark_ceiling") or {}).get("eps_per_spark_core") for s in searches])
    of_per_core = med([s.get("rate_of_ceiling_per_core") for s in searches])
    machine = rate / machine_cores() if rate else None
    return {"query": query, "repeats": len(searches), "sustained_eps": rate, "spark_cores": cores,
            "eps_per_spark_core": per_core, "eps_per_machine_core": machine,
            "stack_cores": stack_cores, "eps_per_stack_core": per_stack_core,
            "brackets": [s.get("bracket") for s in searches],
            "bracket_limits": [s.get("bracket_limit") for s in searches],
            "above_ceiling": above_ceiling(rate, ceiling, of_per_core, searches),
            "ceiling_eps": ceiling, "ceiling_rows_per_batch": ceiling_batch,
            "of_ceiling": round(rate / ceiling, 3) if rate and ceiling else None,
            "ceiling_eps_per_spark_core": ceiling_per_core, "of_ceiling_per_core": of_per_core,
            "busy_ceiling_eps": busy, "of_busy_ceiling": round(rate / busy, 3) if rate and busy else None,
            "flink_eps_per_core": FLINK_K_PER_CORE.get(query, 0) * 1000 or None,
            "rates": [s.get("rate_eps") for s in searches]}


def machine_cores() -> int:
    """The cores this process may run on: the machine's, or fewer under `taskset`, whose
    affinity every service the search starts inherits."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:   # no affinity on this platform
        return os.cpu_count() or 1


def above_ceiling(rate: float | None, ceiling: float | None, of_per_core: float | None,
                  searches: list[dict]) -> str | None:
    """Why a row's sustained rate reads above its ceiling, per second or per Spark core: its
    searches' own reason (sustain.above_ceiling); None when it does not. A row's figures are
    medians of their own, so they can cross when no single search did."""
    if not ((rate and ceiling and rate > ceiling) or (of_per_core or 0) > 1):
        return None
    said = [s["above_ceiling"] for s in searches if s.get("above_ceiling")]
    return said[0] if said else ("each figure is the median of its own searches, and no single search "
                                 "read above its own ceiling")


def _n(v, fmt="{:,.0f}") -> str:
    return "-" if v is None else fmt.format(v)


def bracket_text(bracket: list | None, limit: str | None) -> str:
    """[held, failed] as "36,000-38,000"; ">= 128,000" at --max-eps, "< 500" when none held."""
    if not bracket:
        return "-"
    held, failed = bracket
    if held is None:
        return f"< {_n(failed)}"
    if failed is None:
        return f">= {_n(held)}"
    return f"{_n(held)}-{_n(failed)}" + (" (--steps)" if limit == "steps" else "")


HEAD = ("| query | sustained events/s [bracket] | Spark cores used | stack cores used | per Spark core "
        "| per stack core | per machine core | Spark's ceiling events/s (its batch) | sustained / ceiling "
        "| ceiling per Spark core | per core / it | ceiling on the stack events/s | sustained / it "
        "| Flink per core (nexmark/nexmark) |")


def line(r: dict) -> str:
    """A row of the table; a ratio above 1 marked *, its reason under the table."""
    spread = (" (" + ", ".join(_n(v) for v in r["rates"]) + ")") if r["repeats"] > 1 else ""
    pairs = zip(r.get("brackets") or [None], r.get("bracket_limits") or [None], strict=False)
    brackets = "; ".join(bracket_text(b, limit) for b, limit in pairs)
    star = " *" if r.get("above_ceiling") else ""
    return (f"| {r['query']} | {_n(r['sustained_eps'])}{spread} [{brackets}] "
            f"| {_n(r['spark_cores'], '{:.2f}')} "
            f"| {_n(r.get('stack_cores'), '{:.2f}')} | {_n(r['eps_per_spark_core'])} "
            f"| {_n(r.get('eps_per_stack_core'))} | {_n(r['eps_per_machine_core'])} "
            f"| {_n(r['ceiling_eps'])} ({_n(r.get('ceiling_rows_per_batch'))}) "
            f"| {_n(r['of_ceiling'], '{:.2f}')}{star} "
            f"| {_n(r['ceiling_eps_per_spark_core'])} | {_n(r['of_ceiling_per_core'], '{:.2f}')}{star} "
            f"| {_n(r['busy_ceiling_eps'])} | {_n(r['of_busy_ceiling'], '{:.2f}')} "
            f"| {_n(r['flink_eps_per_core'])} |")


def table(rows: list[dict]) -> str:
    """The rows in Markdown, and under them why any sustained rate reads above its ceiling."""
    lines = [HEAD, "|" + "---|" * HEAD.count(" | ") + "---|", *(line(r) for r in rows)]
    notes = [f"* {r['query']}: {r['above_ceiling']}" for r in rows if r.get("above_ceiling")]
    return "\n".join(lines + ([""] + notes if notes else []))


def start_rates(text: str | None) -> dict[str, float]:
    """--start-eps: one rate for every query ("16000"), or one per query ("q0=18000,q5=12000");
    a query not named starts at START_EPS."""
    if not text:
        return {}
    if "=" not in text:
        return {"*": float(text)}
    pairs = [part.split("=", 1) for part in text.split(",")]
    return {q.strip(): float(eps) for q, eps in pairs}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--queries", default=",".join(STATELESS))
    p.add_argument("--quick", action="store_true")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--start-eps", default=None,
                   help="the first search's first rate: one for every query (16000) or one per query "
                        "(q0=18000,q5=12000); default START_EPS")
    p.add_argument("--steps", type=int, default=None,
                   help="at most this many bisections after the first failure (default: until the "
                        "bracket is within 10%%)")
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    starts = start_rates(a.start_eps)
    rows = []
    for query in a.queries.split(","):
        # the first search doubles from START_EPS; a repeat starts at half the rate the first
        # found, so it doubles once past it and bisects the same span in three trials fewer
        start = starts.get(query, starts.get("*"))
        first_out = a.out / (query if a.repeat == 1 else f"{query}-r1")
        searches = [search(query, first_out, a.quick, start, a.steps)]
        first = searches[0].get("rate_eps")
        searches += [search(query, a.out / f"{query}-r{i + 1}", a.quick, first / 2 if first else None,
                            a.steps) for i in range(1, a.repeat)]
        rows.append(row(query, searches))
        (a.out / "throughput.json").write_text(json.dumps(rows, indent=2))
        print(line(rows[-1]), flush=True)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
