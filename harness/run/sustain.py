"""`python -m harness sustain`: the highest constant rate a case's pipeline keeps up with.

A trial runs the case (no faults) at one constant rate for the workload's duration, on
the run's services. It passes when the lag's trend over the measured window stays flat
(harness/metrics/flow.py: below [measure] lag_trend_max of the offered rate) and the
event-time p99 stays under the bound. The search doubles the rate from `min_eps` until a
trial fails (or `max_eps` passes), then bisects between the last pass and the first
failure until the failure is within 10% of the pass (Theodolite's and ShuffleBench's
method, coarse then fine), and reports a rate only once it held a second time on freshly
started services (harness/run/bracket.py plans it, harness/run/fresh.py restarts them),
with its bracket: [the rate held twice, the lowest above it that failed]. Every trial is
a case of the run directory, checked like any other. Each says the cores Spark used and
the cores the whole stack used (the broker, PostgreSQL and the harness that runs the
generator as well). Then, as a reference, Spark's own ceiling for the same query without
Kafka or the sink (harness/run/ceiling.py); the sustained rate's share of it is what they
cost, per second and per core Spark used (the ceiling has the machine to itself), and a
share above 1 comes with why (`above_ceiling`). Beside it,
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
from harness.results.verdict import FAIL
from harness.run import bracket, ceiling, fresh
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
    steps: int | None = None    # at most this many bisections; None: until the bracket is within precision
    precision: float = bracket.PRECISION   # the first rate that failed over the last held, at most 1 + this


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
    if case.verdict.status == FAIL:   # UNKNOWN (a noop sink's speed run) judges no delivery
        why.append(f"its verdict failed: {case.verdict.detail}")
    if keeping_up is not True:
        why.append(f"the lag grew {case.backpressure.get('lag_trend_records_per_s')} records/s a second")
    if over != UNMEASURABLE and (p99 is None or p99 > p99_ms):
        why.append(f"event-time p99 {p99} ms over {p99_ms:g} ms")
    return not why, "; ".join(why)


def search(scenario, spec, stack, run_dir: RunDir, run_id: str, progress, registry, bounds: Bounds,
           cases: list[CaseResult], trials: list[dict] | None = None, tag: dict | None = None) -> dict:
    """Run the trials `bracket.Plan` asks for, the confirming ones on freshly started services
    (fresh.Services; `stack` may be one already, shared by the sizes of `scale`), appending
    each trial's case entry to `cases` and its line (with `tag`'s fields) to `trials` as it
    ends, so that an interrupted search keeps the trials it finished, in summary.json's cases
    and in its sustain section; returns the sustain section of summary.json, with this
    search's trials."""
    services = stack if isinstance(stack, fresh.Services) else fresh.Services(
        scenario, stack, run_dir.services, registry, progress)
    plan = bracket.Plan(bounds.min_eps, bounds.max_eps, bounds.steps, bounds.precision)
    mine: list[dict] = []
    while (step := plan.next()) is not None:
        eps, on_fresh = step
        restarted = services.restart() if on_fresh else None
        name = f"{spec.name}-{int(eps)}eps" + ("-fresh" if on_fresh else "")
        workload = replace(scenario.workload, rate=shapes.Constant(eps=eps))
        trial_scenario = replace(scenario, workload=workload, faults=(), cases=(replace(spec, name=name),))
        progress.step(f"sustain: trial {len(mine) + 1} at {eps:,.0f} events/s"
                      + (" on freshly started services, to confirm it" if on_fresh else ""))
        case = run_case(Case.create(trial_scenario, trial_scenario.cases[0], services.stack, run_dir, run_id,
                                    progress, registry))
        ok, why = trial_verdict(case, bounds.p99_ms)
        plan.record(eps, ok, fresh=on_fresh)
        cases.append(case)
        trial = {**(tag or {}), **_trial(run_dir, case, eps, ok, why), "fresh": on_fresh,
                 "restarted": restarted}
        mine.append(trial)
        if trials is not None:
            trials.append(trial)
        progress.step(f"sustain: {eps:,.0f} events/s " + ("kept up" if ok else f"did not: {why}"))
    found = plan.result()
    rate = found["rate_eps"]
    alone = Case.create(scenario, replace(spec, name=f"{spec.name}-ceiling"), services.stack, run_dir, run_id,
                        progress, registry)
    reference = ceiling.measure(alone, ceiling.batch_for(rate, alone.pipeline))
    progress.step(f"sustain: Spark's ceiling for the query {reference['eps']} events/s")
    held = next((t for t in mine if t["eps"] == rate and t["fresh"]), {})
    busiest = max((t for t in mine if t["busy_eps"]), key=lambda t: t["busy_eps"], default=None)
    busy = {"eps": busiest["busy_eps"], "trial": busiest["case"]} if busiest else None
    section = {**found, "confirmed_by": held.get("case"), "spark_ceiling": reference,
               "rate_of_ceiling": _ratio(rate, reference["eps"]), "busy_ceiling": busy,
               "rate_of_busy_ceiling": _ratio(rate, busy["eps"] if busy else None),
               **_per_core(rate, held, reference),
               "bounds": {"p99_ms": bounds.p99_ms, "lag_trend_max": scenario.measure.lag_trend_max,
                          "min_eps": bounds.min_eps, "max_eps": bounds.max_eps, "steps": bounds.steps,
                          "precision": bounds.precision},
               "trials": sorted(mine, key=lambda t: (t["eps"], t["fresh"]))}
    section["above_ceiling"] = above_ceiling(section, alone.pipeline)
    return section


def _trial(run_dir: RunDir, case: CaseResult, eps: float, ok: bool, why: str) -> dict:
    """A trial's line in the sustain section: its outcome and what it measured."""
    p99, p99_over = trial_p99(case)
    cores = _cores(run_dir, case)
    return {"eps": eps, "sustained": ok, "why_not": why or None, "case": case.name,
            "processed_eps": case.throughput, "p99_ms": p99, "p99_over": p99_over,
            "lag_trend_records_per_s": case.backpressure.get("lag_trend_records_per_s"),
            "busy_eps": _busy_eps(run_dir, case), "spark_cores": cores.get("spark"),
            "stack_cores": cores.get("stack"), "cores_by": cores.get("by")}


def _per_core(rate: float | None, held: dict, reference: dict) -> dict:
    """The rate per core Spark used and per core the whole stack used, at the confirming
    trial (Flink's figure counts its generator, which runs inside its job, so the stack's
    cores are the ones to set beside it), and per Spark core against the ceiling's."""
    spark, stack = held.get("spark_cores"), held.get("stack_cores")
    per_core = _ratio(rate, spark, 1)
    return {"spark_cores": spark, "eps_per_spark_core": per_core, "stack_cores": stack,
            "eps_per_stack_core": _ratio(rate, stack, 1), "cores_by": held.get("cores_by"),
            "rate_of_ceiling_per_core": _ratio(per_core, reference.get("eps_per_spark_core"))}


def _ratio(a: float | None, b: float | None, digits: int = 3) -> float | None:
    return round(a / b, digits) if a and b else None


def above_ceiling(section: dict, pipeline) -> str | None:
    """Why the sustained rate reads above Spark's ceiling, per second or per core Spark used
    (None when it does not), so that no report prints such a rate without a reason. The
    ceiling is the same query on another source, not a bound: the rate source makes each row
    inside Spark (Nexmark's strings from hashes) and spreads the keys its own way, where the
    stack's Spark parses records the generator made outside it; its batches run back to back;
    and per core, Spark alone has the cores that on the stack it shares."""
    of, per_core = section.get("rate_of_ceiling"), section.get("rate_of_ceiling_per_core")
    if not ((of or 0) > 1 or (per_core or 0) > 1):
        return None
    reference, rate = section.get("spark_ceiling") or {}, section["rate_eps"]
    why = [f"the sustained rate is {of}x Spark's ceiling" if (of or 0) > 1
           else f"per core Spark used, the sustained rate is {per_core}x Spark's ceiling"]
    timed = pipeline.trigger == "processing-time" and pipeline.trigger_ms
    batch = rate * pipeline.trigger_ms / 1000 if timed else None
    if batch and (reference.get("rows_per_batch") or 0) < batch:
        why.append(f"the ceiling ran on batches of {reference['rows_per_batch']:,} rows, fewer than the "
                   f"sustained rate's {batch:,.0f}, each paying a batch's fixed cost")
    busy = (section.get("busy_ceiling") or {}).get("eps")
    if busy and reference.get("eps") and busy > reference["eps"]:
        why.append(f"the trials' own batches on the stack ran at up to {busy:,.0f} rows per second of "
                   "batch time, above the ceiling too")
    why.append("the ceiling is the query on Spark's rate source (rows made inside Spark, keys spread its "
               "own way), a reference rather than a bound on the query over Kafka's records")
    if (per_core or 0) > 1 and not (of or 0) > 1:
        why.append(f"Spark used {section.get('spark_cores')} cores on the stack and "
                   f"{reference.get('spark_cores')} alone")
    return "; ".join(why)


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
    services = fresh.Services(scenario, stack, run_dir.services, registry, progress)
    for n in executors:
        spark = sized(scenario.services.spark, n)
        at_n = replace(scenario, services=replace(scenario.services, spark=spark))
        progress.step(f"sustain: {n} executor{'s' if n != 1 else ''} ({spark.master})")
        found = search(at_n, replace(spec, name=f"{spec.name}-x{n}"), services, run_dir, run_id, progress,
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


def _cores(run_dir: RunDir, case: CaseResult) -> dict:
    """The cores used over the trial's measured window: Spark's driver and executors
    (`spark`), the whole stack (`stack`: Spark, the broker, PostgreSQL, the harness that
    runs the generator), and each component's (`by`); empty without a timeline."""
    window = case.sections.get("measured_window") or {}
    path = run_dir.case(case.name).timeline
    if window.get("from_s") is None or window.get("to_s") is None or not path.exists():
        return {}
    import pandas as pd

    timeline = pd.read_parquet(path)
    by = cores_by_component(timeline, window["from_s"], window["to_s"])
    return {"spark": flow.spark_cores(timeline, window["from_s"], window["to_s"]),
            "stack": round(sum(by.values()), 3) if by else None, "by": by}


def cores_by_component(timeline, from_s: float, to_s: float) -> dict[str, float] | None:
    """Each component's cores on average over the seconds [from_s, to_s) of a case's
    timeline (its `cpu_percent:<component>` columns), Spark's driver and executors together
    as `spark`. None without samples in that span."""
    cols = [c for c in timeline.columns if c.startswith("cpu_percent:")]
    second = (timeline["at_ms"] - timeline["at_ms"].min()) // 1000 if len(timeline) else None
    inside = timeline[(second >= from_s) & (second < to_s)] if cols and second is not None else ()
    if not len(inside):
        return None
    by: dict[str, float] = {}
    for col in cols:
        name = col.removeprefix("cpu_percent:")
        name = "spark" if name == "driver" or name.startswith("executor:") else name
        by[name] = by.get(name, 0.0) + float(inside[col].fillna(0).mean()) / 100
    return {name: round(cores, 3) for name, cores in sorted(by.items())}


def write(run_dir: RunDir, found: dict) -> Path:
    """sustain.json: the rate found (`rate_eps`), Spark's ceiling and every trial."""
    run_dir.sustain.write_text(json.dumps(found, indent=2))
    return run_dir.sustain
