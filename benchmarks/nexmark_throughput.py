"""Nexmark's throughput per core on Structured Streaming, beside nexmark/nexmark's published
Flink figures (docs/performance.md, "Nexmark throughput per core").

For each query, `python -m harness sustain` on nexmark.toml's case: the highest constant rate
that keeps up (exactly-once into PostgreSQL, Kafka in between), the cores Spark's driver and
executors used at it (Nexmark's Cores: its TaskManagers' CPU), and Spark's own ceiling for
the query in the same run (the rate source into noop, no Kafka, no sink). Rates count all
three streams (person, auction and bid), as Nexmark does.

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


def search(query: str, out: Path, quick: bool, start_eps: float | None = None, steps: int = 2) -> dict:
    """One sustain search of `query`, from `start_eps` (default START_EPS): its sustain section
    of summary.json."""
    start = start_eps or START_EPS.get(query, 500)
    args = [sys.executable, "-m", "harness", "sustain", str(SCENARIO), "--case", query, "--out", str(out),
            "--min-eps", str(int(start)), "--max-eps", str(MAX_EPS), "--steps", str(steps),
            "--p99", f"{P99_MS}ms"]
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
    ceiling_per_core = med([(s.get("spark_ceiling") or {}).get("eps_per_spark_core") for s in searches])
    of_per_core = med([s.get("rate_of_ceiling_per_core") for s in searches])
    machine = rate / machine_cores() if rate else None
    return {"query": query, "repeats": len(searches), "sustained_eps": rate, "spark_cores": cores,
            "eps_per_spark_core": per_core, "eps_per_machine_core": machine,
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


def table(rows: list[dict]) -> str:
    def n(v, fmt="{:,.0f}"):
        return "-" if v is None else fmt.format(v)

    lines = ["| query | sustained events/s | Spark cores used | per Spark core | per machine core "
             "| Spark's ceiling events/s (its batch) | sustained / ceiling | ceiling per Spark core "
             "| per core / it "
             "| ceiling on the stack events/s | sustained / it | Flink per core (nexmark/nexmark) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        spread = (" (" + ", ".join(n(v) for v in r["rates"]) + ")") if r["repeats"] > 1 else ""
        lines.append(f"| {r['query']} | {n(r['sustained_eps'])}{spread} | {n(r['spark_cores'], '{:.2f}')} "
                     f"| {n(r['eps_per_spark_core'])} | {n(r['eps_per_machine_core'])} "
                     f"| {n(r['ceiling_eps'])} ({n(r.get('ceiling_rows_per_batch'))}) "
                     f"| {n(r['of_ceiling'], '{:.2f}')} "
                     f"| {n(r['ceiling_eps_per_spark_core'])} | {n(r['of_ceiling_per_core'], '{:.2f}')} "
                     f"| {n(r['busy_ceiling_eps'])} | {n(r['of_busy_ceiling'], '{:.2f}')} "
                     f"| {n(r['flink_eps_per_core'])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--queries", default=",".join(STATELESS))
    p.add_argument("--quick", action="store_true")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--start-eps", type=float, default=None,
                   help="the first search's first rate, for every query (default: START_EPS)")
    p.add_argument("--steps", type=int, default=2, help="bisections after the first failure (default 2)")
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for query in a.queries.split(","):
        # the first search doubles from START_EPS; a repeat starts at half the rate the first
        # found, so it doubles once past it and bisects the same span in three trials fewer
        searches = [search(query, a.out / (query if a.repeat == 1 else f"{query}-r1"), a.quick,
                           a.start_eps, a.steps)]
        first = searches[0].get("rate_eps")
        searches += [search(query, a.out / f"{query}-r{i + 1}", a.quick, first / 2 if first else None,
                            a.steps) for i in range(1, a.repeat)]
        rows.append(row(query, searches))
        (a.out / "throughput.json").write_text(json.dumps(rows, indent=2))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
