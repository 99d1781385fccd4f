"""`python -m harness sustain`: the highest constant rate a case's pipeline keeps up with.

A trial runs the case (no faults) at one constant rate for the workload's duration, on
services started once for the whole search. It passes when the lag's trend over the
measured window stays flat (harness/metrics/flow.py: below [measure] lag_trend_max of the
offered rate) and the event-time p99 stays under the bound. The search doubles the rate
from `min_eps` until a trial fails (or `max_eps` passes), then bisects between the last
pass and the first failure `steps` times: Theodolite's and ShuffleBench's method, coarse
then fine. Every trial is a case of the run directory, checked like any other. Then, as
a reference, Spark's own ceiling for the same query without Kafka or the sink
(harness/run/ceiling.py); the sustained rate's share of it is what they cost, per second
and per core Spark used (the ceiling has the machine to itself). Beside it,
the query's ceiling on the real stack, from the trials themselves (`busy_ceiling`): the
most rows per second of batch time any trial's batches showed (after its first four),
which the trial that fell behind shows when Spark runs back to back on Kafka, the JSON,
the sink and the generator beside it; the sustained rate's share of it is what keeping up
(a batch a trigger interval, the lag flat) costs against running flat out.

With `executors` (`--executors 1,2,4`) the whole search runs once per size, and the sizes
make a scaling curve: each size's sustained rate and its speed-up over the smallest size,
as Theodolite's scalability benchmarks report it (`scale`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

from harness.errors import ScenarioError
from harness.metrics import flow
from harness.results.model import CaseResult, Percentiles
from harness.results.rundir import RunDir
from harness.run import ceiling
from harness.run.case import Case
from harness.run.runner import run_case
from workloads.generator import shapes

P99_OVER_WATERMARK_MS = 5000   # the default p99 bound: the declared watermark delay plus this
LATE_SHARE_IN_P99 = 0.01       # a late share at least this large reaches the p99


def default_p99_ms(watermark_ms: float, delay) -> float:
    """The p99 bound without --p99: the watermark's delay plus P99_OVER_WATERMARK_MS, and the
    workload's `late_by` when at least 1% of its events are sent that late, since their event
    time is that much older at any rate (nexmark.toml's 1% 10 s late put q5's p99 at 10.5 s at
    4,000 events/s, over a bound of 9 s, and the search found nothing)."""
    late = delay.late_by_ms if delay.late_share >= LATE_SHARE_IN_P99 else 0
    return watermark_ms + late + P99_OVER_WATERMARK_MS


@dataclass(frozen=True)
class Bounds:
    p99_ms: float = 5000.0      # event-time p99 must stay under this
    min_eps: float = 250.0
    max_eps: float = 32_000.0
    steps: int = 3              # bisections after the coarse search


def trial_p99(case: CaseResult) -> tuple[float | None, str | None]:
    """The trial's event-time p99 and what it is over: the output after the warm-up, as the
    lag trend is; else, when that output came from too few of the sink's commits to measure
    (a tumbling window of 10 s closes once or twice in a quick trial: q8 at 1,000 events/s
    wrote its 121 rows in two commits), the whole run's output, warm-up included, which can
    only read higher. None when no row of the output is timed: over `UNMEASURABLE` when the
    checker left every delivered row untimed because only the harness's flush closed it
    (Nexmark's q15-q17 count by the day), else over None."""
    measured = case.p99_ms
    if measured is not None:
        return measured, "measured window"
    whole = Percentiles.from_json((case.latency_ms or {}).get("event_time")).p99
    if whole is not None:
        return whole, "whole run"
    return None, (UNMEASURABLE if closed_on_flush_only(case) else None)


def closed_on_flush_only(case: CaseResult) -> bool:
    """Whether the case's output, every expected row of it delivered, was all made possible by
    the harness's end-of-run flush: the checker says how many rows it left untimed for that
    (`events.closed_on_flush`). Not a case with nothing delivered, one that lost rows, one its
    sink leaves unchecked (noop) or a pipeline that times no row at all."""
    events = case.events or {}
    return (case.verdict.holds and not events.get("lost") and bool(events.get("delivered"))
            and int(events.get("closed_on_flush") or 0) > 0)


# a trial's p99 when no row of its output could close before the harness's flush
# (closed_on_flush_only): a row's latency is measured only when the workload's own events
# close it (harness/check/rows.py, latency_until_ms). A stuck watermark is not this: its rows
# are still timed, from their windows' ends to the flush
UNMEASURABLE = "unmeasurable: no row could close before the harness's flush"


def trial_verdict(case: CaseResult, p99_ms: float) -> tuple[bool, str]:
    """Whether a trial kept up, and why not. A trial whose p99 is unmeasurable is judged by
    its lag and its verdict."""
    keeping_up = case.backpressure.get("keeping_up")
    p99, over = trial_p99(case)
    why = []
    if not case.verdict.holds:
        why.append(f"its verdict failed: {case.verdict.detail}")
    if keeping_up is not True:
        why.append(f"the lag grew {case.backpressure.get('lag_trend_records_per_s')} records/s a second")
    if over != UNMEASURABLE and (p99 is None or p99 > p99_ms):
        why.append(f"event-time p99 {p99} ms over {p99_ms:g} ms")
    return not why, "; ".join(why)


def next_rate(passed: list[float], failed: list[float], bisections: int, bounds: Bounds) -> float | None:
    """The next rate to try, or None when the search is done. `bisections`: the trials run
    since the first failure."""
    if not failed:
        top = max(passed, default=None)
        if top is None:
            return bounds.min_eps
        return None if top >= bounds.max_eps else min(top * 2, bounds.max_eps)
    high = min(failed)
    low = max((p for p in passed if p < high), default=None)
    if low is None or bisections >= bounds.steps or high - low < 0.02 * high:
        return None
    return round((low + high) / 2, 1)


def search(scenario, spec, stack, run_dir: RunDir, run_id: str, progress, registry, bounds: Bounds,
           cases: list[CaseResult], trials: list[dict] | None = None, tag: dict | None = None) -> dict:
    """Run trials until next_rate says done, appending each trial's case entry to `cases`
    and its line (with `tag`'s fields) to `trials` as it ends, so that an interrupted search
    keeps the trials it finished, in summary.json's cases and in its sustain section; returns
    the sustain section of summary.json, with this search's trials."""
    passed: list[float] = []
    failed: list[float] = []
    mine: list[dict] = []
    bisections = 0
    while (eps := next_rate(passed, failed, bisections, bounds)) is not None:
        bisections += 1 if failed else 0
        name = f"{spec.name}-{int(eps)}eps"
        workload = replace(scenario.workload, rate=shapes.Constant(eps=eps))
        trial_scenario = replace(scenario, workload=workload, faults=(), cases=(replace(spec, name=name),))
        progress.step(f"sustain: trial {len(mine) + 1} at {eps:,.0f} events/s")
        case = run_case(Case.create(trial_scenario, trial_scenario.cases[0], stack, run_dir, run_id,
                                    progress, registry))
        ok, why = trial_verdict(case, bounds.p99_ms)
        (passed if ok else failed).append(eps)
        cases.append(case)
        p99, p99_over = trial_p99(case)
        trial = {**(tag or {}), "eps": eps, "sustained": ok, "why_not": why or None, "case": name,
                 "processed_eps": case.throughput, "p99_ms": p99, "p99_over": p99_over,
                 "lag_trend_records_per_s": case.backpressure.get("lag_trend_records_per_s"),
                 "busy_eps": _busy_eps(run_dir, case), "spark_cores": _spark_cores(run_dir, case)}
        mine.append(trial)
        if trials is not None:
            trials.append(trial)
        progress.step(f"sustain: {eps:,.0f} events/s " + ("kept up" if ok else f"did not: {why}"))
    found = max(passed, default=None)
    alone = Case.create(scenario, replace(spec, name=f"{spec.name}-ceiling"), stack, run_dir, run_id,
                        progress, registry)
    reference = ceiling.measure(alone, ceiling.batch_for(found, alone.pipeline))
    progress.step(f"sustain: Spark's ceiling for the query {reference['eps']} events/s")
    ratio = round(found / reference["eps"], 3) if found and reference["eps"] else None
    cores = next((t["spark_cores"] for t in mine if t["eps"] == found), None)
    busiest = max((t for t in mine if t["busy_eps"]), key=lambda t: t["busy_eps"], default=None)
    busy = {"eps": busiest["busy_eps"], "trial": busiest["case"]} if busiest else None
    per_core = round(found / cores, 1) if found and cores else None
    top_per_core = reference.get("eps_per_spark_core")
    return {"rate_eps": found, "spark_ceiling": reference, "rate_of_ceiling": ratio,
            "busy_ceiling": busy,
            "rate_of_busy_ceiling": round(found / busy["eps"], 3) if found and busy else None,
            "spark_cores": cores, "eps_per_spark_core": per_core,
            "rate_of_ceiling_per_core": round(per_core / top_per_core, 3) if per_core and top_per_core
            else None,
            "bounds": {
        "p99_ms": bounds.p99_ms, "lag_trend_max": scenario.measure.lag_trend_max,
        "min_eps": bounds.min_eps, "max_eps": bounds.max_eps, "steps": bounds.steps},
        "trials": sorted(mine, key=lambda t: t["eps"])}


LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\]")


def sized(spark, executors: int):
    """The scenario's Spark settings with `executors` executors.

    local-cluster[N,c,m] becomes local-cluster[executors,c,m]; a standalone cluster (the
    harness's own or a spark:// URL) gets spark.cores.max for that many executors of
    spark.executor.cores; any other master (Kubernetes, YARN) spark.executor.instances."""
    conf = dict(spark.conf)
    local = LOCAL_CLUSTER.fullmatch(spark.master.strip())
    if local:
        return replace(spark, master=f"local-cluster[{executors},{local[2]},{local[3]}]")
    if spark.master.startswith("local"):
        raise ScenarioError(f"--executors: the master {spark.master!r} runs no executors",
                            'use master = "local-cluster[2,1,1024]" (the default), "standalone" or a cluster')
    if spark.standalone or spark.master.startswith("spark://"):
        default = spark.worker_cores if spark.standalone else 1
        cores = int(conf.setdefault("spark.executor.cores", str(default)))
        if spark.standalone and executors * cores > spark.workers * spark.worker_cores:
            raise ScenarioError(
                f"--executors {executors}: the standalone cluster has {spark.workers} workers of "
                f"{spark.worker_cores} cores, room for "
                f"{spark.workers * spark.worker_cores // cores} executors",
                "raise [services.spark] workers or worker_cores, or ask for fewer executors")
        conf["spark.cores.max"] = str(executors * cores)
    else:
        conf["spark.executor.instances"] = str(executors)
    return replace(spark, conf=MappingProxyType(conf))


def scale(scenario, spec, stack, run_dir: RunDir, run_id: str, progress, registry, bounds: Bounds,
          cases: list[CaseResult], executors: list[int], trials: list[dict] | None = None) -> dict:
    """The search once per size in `executors`; the sustain section with the curve in
    `scaling` (one search's fields per size) and every trial, tagged with its size (each
    appended to `trials` as it ends, as `search` does)."""
    sizes: list[dict] = []
    for n in executors:
        spark = sized(scenario.services.spark, n)
        at_n = replace(scenario, services=replace(scenario.services, spark=spark))
        progress.step(f"sustain: {n} executor{'s' if n != 1 else ''} ({spark.master})")
        found = search(at_n, replace(spec, name=f"{spec.name}-x{n}"), stack, run_dir, run_id, progress,
                       registry, bounds, cases, trials=trials, tag={"executors": n})
        sizes.append({"executors": n, "master": spark.master, **found})
    return curve(sizes)


def curve(sizes: list[dict]) -> dict:
    """The sizes' searches as a scaling curve: speed-up = rate / the smallest size's rate,
    efficiency = speed-up / (executors / the smallest size's executors)."""
    base = sizes[0]
    for size in sizes:
        rate, first = size["rate_eps"], base["rate_eps"]
        size["speedup"] = round(rate / first, 3) if rate and first else None
        more = size["executors"] / base["executors"]
        size["efficiency"] = round(size["speedup"] / more, 3) if size["speedup"] is not None else None
        top, first_top = ((s.get("spark_ceiling") or {}).get("eps") for s in (size, base))
        size["ceiling_speedup"] = round(top / first_top, 3) if top and first_top else None
    rates = [s["rate_eps"] for s in sizes if s["rate_eps"] is not None]
    trials = [{**t, "executors": s["executors"]} for s in sizes for t in s["trials"]]
    return {"rate_eps": max(rates, default=None), "executors": [s["executors"] for s in sizes],
            "speedup_base_executors": base["executors"], "scaling": sizes, "bounds": base["bounds"],
            "trials": trials}


def _busy_eps(run_dir: RunDir, case: CaseResult) -> float | None:
    """Rows per second of batch time over the trial's batches with input after the first
    four (ceiling.ceiling_of, as for Spark's own ceiling)."""
    from harness.metrics import read_progress

    path = run_dir.case(case.name).progress
    return ceiling.ceiling_of(read_progress(path))["eps"] if path.exists() else None


def _spark_cores(run_dir: RunDir, case: CaseResult) -> float | None:
    """The cores Spark's driver and executors used over the trial's measured window."""
    window = case.sections.get("measured_window") or {}
    path = run_dir.case(case.name).timeline
    if window.get("from_s") is None or window.get("to_s") is None or not path.exists():
        return None
    import pandas as pd

    return flow.spark_cores(pd.read_parquet(path), window["from_s"], window["to_s"])


def write(run_dir: RunDir, found: dict) -> Path:
    """sustain.json: the rate found (`rate_eps`), Spark's ceiling and every trial."""
    run_dir.sustain.write_text(json.dumps(found, indent=2))
    return run_dir.sustain
