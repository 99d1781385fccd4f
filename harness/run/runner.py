"""Run a scenario: services, then each case (generator -> pipeline -> sink -> checker).

Data flows one way and every stage leaves its output in the run directory, so a
report can be rebuilt from the directory alone. Each stage takes the case (run/case.py).
"""

from __future__ import annotations

import logging
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from harness import check as checker
from harness import environment, jvm, metrics, pipelines, tools
from harness.check import checkpoint
from harness.errors import HarnessError, RunAborted
from harness.metrics import batches as batch_times
from harness.metrics import flow, latency, resources
from harness.report import summary as summary_mod
from harness.run.case import Case
from harness.run.faults import FaultRunner
from harness.run.live import LiveStatus
from harness.run.stack import needs_postgres, start_stack
from harness.scenario.faults import needs_proxy
from harness.services.base import Registry
from harness.services.spark import DriverDied
from harness.wait import WaitTimeout, wait_until
from workloads.errors import Problem
from workloads.progress import Progress
from workloads.sinks import sink_needs

log = logging.getLogger(__name__)

__all__ = ["preflight", "run", "run_case", "start_stack"]


def run(scenario, run_dir: Path, run_id: str, progress: Progress, registry: Registry,
        cases=None) -> dict:
    """Run every case of `scenario`; returns the summary (already written to run_dir).
    `cases(stack, result)`, when given, runs the cases instead (the sustain search)."""
    result = _skeleton(scenario, run_id)
    try:
        stack = start_stack(scenario, run_dir / "services", registry, progress)
        if cases is not None:
            cases(stack, result)
        for spec in scenario.cases if cases is None else ():
            case = Case.create(scenario, spec, stack, run_dir, run_id, progress, registry)
            result["cases"].append(run_case(case))
        sweep = watermark_sweep(scenario, result["cases"])
        if sweep:
            result["watermark_sweep"] = sweep
        result["status"] = "completed"
    except RunAborted as exc:
        result.update(status="aborted", error=str(exc))
        raise
    except Exception as exc:
        result.update(status="error", error=f"{type(exc).__name__}: {exc}")
        raise
    finally:
        result["ended_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        summary_mod.write(run_dir, result)
    return result


def watermark_sweep(scenario, cases: list[dict]) -> list[dict] | None:
    """Latency against completeness, when the cases differ in watermark delay only by a
    [matrix] watermark axis (or by hand): per delay, the event-time p99 and the share of
    the events sent that were dropped as late. None when there is one delay or none."""
    delays = {c.name: (c.pipeline or scenario.pipeline).values.get("watermark_ms") for c in scenario.cases}
    if len({d for d in delays.values() if d is not None}) < 2:
        return None
    rows = []
    for case in cases:
        delay, events = delays.get(case["name"]), case["events"]
        if delay is None:
            continue
        sent = events.get("produced") or 0
        rows.append({"case": case["name"], "watermark_ms": delay,
                     "event_time_p99_ms": case["latency_ms"]["event_time"]["p99"],
                     "dropped_late": events["dropped_late"],
                     "late_share": round(events["dropped_late"] / sent, 5) if sent else None})
    return sorted(rows, key=lambda r: r["watermark_ms"])


def preflight(scenario) -> None:
    """Check the environment before anything starts or is written: java, the jars,
    pyspark's version, PostgreSQL's binaries. Raises EnvironmentProblem with the fix."""
    from harness.services.postgres import find_bindir

    jvm.java()
    environment.check_spark_version()
    jvm.spark_connector_jars()
    artifacts = {a for case in scenario.cases for a in sink_needs(case.sink)[0]}
    for artifact in sorted(artifacts):
        jvm.spark_extra_jars(artifact)
    if "delta" in artifacts:
        environment.check_delta_version()
    if scenario.services.kafka.bootstrap_servers is None:
        jvm.jars("kafka")
        jvm.jars("kafka-log")
    if needs_postgres(scenario):
        find_bindir()
    if needs_proxy(scenario.faults):
        tools.toxiproxy()


def _skeleton(scenario, run_id: str) -> dict:
    return {
        "schema_version": summary_mod.SCHEMA_VERSION, "run_id": run_id, "status": "error",
        "scenario": {"name": scenario.name, "path": str(scenario.path), "quick": scenario.quick,
                     "repeat": max((c.repeat for c in scenario.cases), default=1)},
        "environment": environment.describe(scenario.services.spark.master,
                                            scenario.services.kafka.bootstrap_servers is None),
        "cases": [], "error": None, "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def run_case(case: Case) -> dict:
    """Generator -> Kafka -> Spark driver -> sink, then the checker: one summary case.

    A driver that dies fails this case, with how it died and how far the case had got;
    the checker still reads what the sink holds, and the next case runs."""
    schedule = FaultRunner(case.scenario.faults, case.targets(), say=case.progress.step)
    case.dir.mkdir(parents=True, exist_ok=True)
    sampler = resources.Sampler(case.registry, case.dir / "resources.parquet")
    if case.scenario.measure.enabled:
        sampler.start()
    try:
        _start_driver(case)
        _offer_load(case, schedule)
        if case.failure is None:
            _drain(case)
            case.spark.request_stop()
    except DriverDied as exc:
        _driver_died(case, exc)
    except BaseException:
        schedule.stop(aborted=True)   # SIGCONT, unlock, no restart: the registry stops the rest
        sampler.stop()
        raise
    schedule.stop()
    used = sampler.stop()
    if case.failure is not None:
        case.spark.stop()
    return {**_case_result(case, case.failure, schedule), "resources": used}


def _driver_died(case: Case, exc: DriverDied) -> None:
    """Say at once how the driver died, how far the case had got, and its log's errors."""
    case.failure = f"driver of case {case.name} {exc.how} {case.whereabouts()}"
    lines = "\n".join(f"    {line}" for line in exc.error_lines) or "    (none)"
    more = "; the workload goes on to the end of its schedule (open loop)" if case.phase == "sending" else ""
    case.progress.step(f"FAILED: {case.failure}{more}; its log's error lines:\n{lines}")


def _start_driver(case: Case) -> None:
    """Create the topic, start the case's driver and wait until its first batch ran."""
    from workloads import generator

    generator.create_topic(case.stack.bootstrap_servers, case.topic, case.scenario.workload.partitions)
    case.progress.step(f"case {case.name}: starting Spark driver ({case.scenario.services.spark.master})")
    case.phase = "starting the Spark driver"
    case.start_driver()
    case.phase = "warming up"
    _warm_up(case)


def _warm_up(case: Case, timeout_s: float = 180.0) -> None:
    """Send control events at event time 0 and wait for the batch that reads them, so
    that JVM warm-up is paid before measurement starts."""
    from workloads import generator

    case.progress.step("warming up: waiting for the first micro-batch")
    partitions = case.scenario.workload.partitions
    case.warmup = generator.send_control(case.stack.bootstrap_servers, case.topic, partitions, -partitions, 0)

    def first_batch_done() -> bool:   # from the checkpoint: progress reports may be off
        case.spark.check_alive()
        return any(b.committed and b.rows for b in checkpoint.read_batches(case.checkpoint, case.topic))

    wait_until(first_batch_done, timeout_s, 0.5, f"no micro-batch completed within {timeout_s:.0f}s")
    case.registry.changed()   # the executors registered after the driver was ready: record them


def _offer_load(case: Case, schedule: FaultRunner) -> None:
    """Send the workload open-loop, then the control events that move the watermark past
    the last output; ground truth goes to the case's truth/ directory."""
    from workloads import generator
    from workloads.generator import shapes, truth

    wl = case.scenario.measure.offered(case.scenario.workload)
    rate = shapes.describe(wl.rate)
    warmup = rate.pop("warmup", None)
    params = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in rate.items()
                       if k != "shape")
    first = ("" if warmup is None
             else f", after a {warmup['for_s']:g}s warm-up at {warmup['eps']:,.0f} events/s")
    case.progress.step(f"case {case.name}: sending for {wl.duration_s:g}s "
                       f"at a {rate['shape']} rate ({params}){first}")
    case.phase = "sending"
    live = LiveStatus(case.spark.progress_path, case.topic, len(case.warmup))

    def on_progress(sent: int, planned: int) -> None:
        case.sent, case.planned = sent, planned
        if case.failure is None and not case.expect_down:
            try:
                case.spark.check_alive()
            except DriverDied as exc:   # the schedule never waits for the system, nor stops for it
                if not case.expect_down:   # a fault may have killed it between the two checks
                    _driver_died(case, exc)
        case.progress.update(live.line(sent, planned))

    start_ms = time.time_ns() // 1_000_000 + generator.START_LEAD_MS
    schedule.start(t0=start_ms / 1000)   # a fault's `at` counts from the first event sent
    try:
        report = generator.generate(wl, case.stack.bootstrap_servers, case.truth_dir, topic=case.topic,
                                    start_ms=start_ms, progress=on_progress)
    finally:
        truth.write_control(case.truth_dir, case.warmup)   # the warm-up events are truth too
    if schedule.specs:
        case.progress.step(f"case {case.name}: waiting for the faults to heal and be observed")
        schedule.join()
    case.sent, case.report = report["events"], report
    generator.write_report(case.dir / "generator.json", report)
    if not report["events"]:
        raise HarnessError("the workload sent no event (idle partitions or a custom shape ended at once)",
                           "check [workload] in the scenario")
    pl = case.pipeline
    max_ms = report["event_time_ms"]["max"]
    final_wm = checker.final_watermark_ms(pl, max_ms)
    # Spark's watermark is the largest event time read by earlier batches minus the delay
    flush_ms = (max_ms if final_wm is None else final_wm) + pl.watermark_ms + pl.trigger_ms + 1000
    control = generator.send_control(case.stack.bootstrap_servers, case.topic, wl.partitions,
                                     report["events"], flush_ms)
    truth.write_control(case.truth_dir, case.warmup + control)
    case.flush_offsets = {c["partition"]: c["offset"] + 1 for c in control}


def _drain(case: Case) -> None:
    """Wait until a committed batch ran with a watermark at which all output is final (or,
    for a pipeline without a watermark, until the batches have read every offset): every
    result has then been emitted and committed to the sink."""
    pl, timeout_s = case.pipeline, case.scenario.drain_timeout_s
    assert case.report is not None, "drain after the load"
    final_wm = checker.final_watermark_ms(pl, case.report["event_time_ms"]["max"])
    case.phase = "draining"
    case.progress.step(f"waiting for the pipeline to emit every result (up to {timeout_s:.0f}s)")

    def behind() -> int:
        read = checkpoint.committed_offsets(case.checkpoint, case.topic)
        return sum(max(0, end - read.get(p, 0)) for p, end in case.flush_offsets.items())

    def drained() -> bool:
        case.spark.check_alive()
        if final_wm is None:
            left = behind()
            case.progress.update(f"{left:,} records not yet read by a committed batch")
            return left == 0
        wm = checkpoint.committed_watermark(case.checkpoint, case.topic)
        if wm > 0:
            case.progress.update(f"watermark {(wm - final_wm) / 1000:+,.1f} s from the last window end")
        return wm >= final_wm

    try:
        wait_until(drained, timeout_s, 0.5)
    except WaitTimeout:
        # a result of the system under test, not bad input: this case fails, the checker
        # still reads what the sink holds, and the next case runs
        if final_wm is None:
            where = f"{behind():,} records were still unread by a committed batch"
        else:
            wm = checkpoint.committed_watermark(case.checkpoint, case.topic)
            where = ("its watermark stayed " + (f"{(wm - final_wm) / 1000:+,.1f} s from" if wm > 0
                                                 else "never past the start of") + " the last window end")
        case.failure = (f"the pipeline did not emit every result within drain_timeout ({timeout_s:.0f}s): "
                        f"{where}; read {case.spark.log_path}")
        case.progress.step(f"FAILED: {case.failure}")


def _case_result(case: Case, failure: str | None, schedule: FaultRunner) -> dict:
    """Check the sink against ground truth and build the case's summary entry."""
    from workloads.generator import truth as truth_mod
    from workloads.sinks import CUSTOM_SINK, SINKS

    pl, spec = case.pipeline, case.spec
    sink, sink_report = _read_sink(case)
    sink.to_parquet(case.dir / "sink.parquet", index=False)
    truth = (truth_mod.read(case.truth_dir, checker.truth_columns(pl)) if truth_mod.has_parts(case.truth_dir)
             else None)
    progress_records = metrics.read_progress(case.dir / "progress.jsonl")
    result: dict[str, Any] = {
              "name": spec.name, "series": spec.series or spec.name, "repeat": spec.repeat,
              "guarantee": spec.guarantee, "pipeline": pl.kind, "sink": spec.sink,
              "faults": schedule.records(), "error": failure, "batches": len(progress_records),
              "topic": case.topic,
              "sink_table": case.sink_name,
              "spark_pids": {"driver": case.driver.pid if case.driver else None,
                             "executors": sorted(case.driver.seen_executor_pids) if case.driver else []},
              "spark_dropped_by_watermark": metrics.dropped_by_watermark(progress_records),
              "batch_time": batch_times.breakdown(progress_records,
                                                  pl.trigger_ms if pl.trigger == "processing-time" else None),
              "spark_settings": {**pl.spark.describe(), "trigger": pl.trigger, "trigger_ms": pl.trigger_ms,
                                 "watermark_ms": pl.values.get("watermark_ms"),
                                 "conf": case.spark_conf()}}
    if sink_report:
        result["sink_report"] = sink_report
    if pl.build:
        result["build"] = pl.build
    if spec.sink == CUSTOM_SINK:
        result["sink_class"] = spec.sink_class
    if case.report is not None:
        result["generator"] = _generator_summary(case.report)
    if truth is None:   # died before sending: nothing to check
        return {**result, **_nothing_checked(spec.guarantee, failure)}
    batch_times.table(progress_records).to_parquet(case.dir / "batches.parquet", index=False)
    batches = checkpoint.read_queries(case.checkpoints, case.topic)
    speed, (rates, lag) = _speed(case, truth, progress_records, sink, batches)
    start_ms = _first_send_ms(truth)

    def timeline(latencies: dict) -> None:
        import pandas as pd

        used = case.dir / "resources.parquet"
        frame = flow.per_second(rates, lag, latencies, start_ms,
                                pd.read_parquet(used) if used.exists() else None)
        frame.to_parquet(case.dir / "timeline.parquet", index=False)

    if spec.sink != CUSTOM_SINK and not SINKS[spec.sink].checked:   # a speed run: nothing to read back
        timeline({})
        unchecked = _nothing_checked(spec.guarantee, failure, checked=False)
        return {**result, **unchecked, **speed, "faults": result["faults"]}
    try:
        checked = checker.check(pl, truth, sink, batches)
    except Problem:
        raise   # the user's oracle returned the wrong shape: named with the fix, exit 2
    except Exception as exc:  # noqa: BLE001 - an oracle that raises fails its case, not the run
        where = case.dir / "checker-error.txt"
        where.write_text(traceback.format_exc())
        why = f"the checker raised {type(exc).__name__}: {exc}; traceback in {where}"
        case.progress.step(f"FAILED: {why}")
        failed = _nothing_checked(spec.guarantee, "; ".join(filter(None, [failure, why])))
        timeline({})
        return {**result, **failed, **speed, "faults": result["faults"]}
    checked.write_discrepancies(case.dir / "discrepancies.parquet")
    for line in checked.first_discrepancies():
        case.progress.step(f"  {line}")
    c = checked.counts
    problems = ([failure] if failure else []) + schedule.problems() + checked.problems
    verdict = summary_mod.verdict(spec.guarantee, c["lost"], c["duplicated"], c["unexpected"],
                                  expected_count=c["expected"], problems=problems)
    warmup_ms = case.scenario.measure.warmup_s * 1000
    latency_ms, measured_ms, latencies = latency.record(case.dir, checked, start_ms, start_ms + warmup_ms)
    timeline(latencies)
    return {
        **result, "events": c, "verdict": verdict, "unit": checked.unit,
        "discrepancies": checked.discrepancies["kind"].value_counts().to_dict(),
        **speed, "latency_ms": latency_ms, "latency_measured_ms": measured_ms,
    } | {"faults": _with_lag_recovery(result["faults"], schedule.t0,
                                      metrics.lag_series(truth, progress_records, case.topic))}


def _speed(case: Case, truth, progress_records: list[dict], sink, batches) -> tuple[dict, tuple]:
    """Throughput and backpressure for summary.json: the run's overall rates; the four
    throughputs measured after [measure] warmup; the lag's trend; whether Spark's count
    of records read agrees with the harness's. And per second, the throughputs and each
    partition's lag (the latter saved as lag.parquet) for the case's timeline."""
    start_ms, measure = _first_send_ms(truth), case.scenario.measure
    delivered_ms = sink["committed_ms"].to_numpy() if sink is not None and len(sink) else np.array([])
    # a windowed count's row stands for its count of events (the pipeline's delivered_weight)
    kind = case.pipeline.kind
    weight = None if kind == pipelines.CUSTOM else pipelines.kind(kind).delivered_weight
    weights = sink[weight].to_numpy() if len(delivered_ms) and weight else None
    rates, lag = flow.timeline(truth, progress_records, case.topic, delivered_ms, start_ms, weights)
    lag.to_parquet(case.dir / "lag.parquet", index=False)
    window = flow.measured(rates, lag, truth, start_ms, measure.warmup_s, measure.lag_trend_max)
    backpressure = metrics.backpressure(truth, progress_records, case.topic)
    # real-time mode commits a batch's offsets only at its end: the lag rebuilt from them is
    # the batch duration's worth of records, not what is waiting, so no verdict on it
    keeping_up = None if case.pipeline.trigger == "real-time" else window["keeping_up"]
    trend = None if keeping_up is None else ("keeping-up" if keeping_up else "falling-behind")
    backpressure.update(lag_trend=trend, lag_trend_records_per_s=window["lag_trend_records_per_s"],
                        keeping_up=keeping_up)
    burst = _burst_drain(case.scenario.workload.rate, start_ms,
                         lambda: metrics.lag_series(truth, progress_records, case.topic))
    if burst is not None:
        backpressure["burst"] = burst
    eps = window["eps"]
    committed = flow.committed_eps(batches, start_ms, window["window_s"])
    throughput = {"offered": metrics.offered_eps(truth),
                  "processed": metrics.processed_eps(progress_records, start_ms),
                  "ingested": eps["ingested"], "delivered": eps["delivered"],
                  "measured": {"window_s": window["window_s"], **eps, "committed": committed}}
    return ({"throughput_eps": throughput, "backpressure": backpressure,
             "records_read": flow.counts_agree(truth, progress_records)}, (rates, lag))


def _burst_drain(rate, start_ms: float, series) -> dict | None:
    """For a `burst` rate shape: when the burst came and how long after its end the lag was
    back at its level before it (`drained_s`; None when it never was, or the run had not yet
    run 10 s of batches when it came). None for any other shape."""
    from workloads.generator import shapes

    shape = rate.shape if isinstance(rate, shapes.WarmUp) else rate
    if not isinstance(shape, shapes.Burst):
        return None
    began_ms, ended_ms = start_ms + shape.at_s * 1000, start_ms + (shape.at_s + shape.length_s) * 1000
    back_s = metrics.lag_recovered_s(series(), began_ms, ended_ms)
    return {"at_s": shape.at_s, "length_s": shape.length_s,
            "drained_s": None if back_s is None else round(max(back_s - shape.length_s, 0.0), 3)}


def _read_sink(case: Case) -> tuple[Any, dict | None]:
    """What a consumer of the case's sink sees: the output columns plus committed_ms. A
    scenario's own sink whose read() returns something else is named with the fix."""
    import pandas as pd

    from workloads.sinks import load, sink_target

    spec, columns = case.spec, list(case.pipeline.columns)
    target = sink_target(spec.sink, spec.sink_class)
    sink = load(target)(case.sink_context())
    out = sink.read()
    wanted = [*columns, "committed_ms"]
    if not isinstance(out, pd.DataFrame) or any(c not in out.columns for c in wanted):
        got = list(out.columns) if isinstance(out, pd.DataFrame) else type(out).__name__
        raise HarnessError(f"the sink {target} of case {spec.name}: read() returned {got}, "
                           f"not a pandas DataFrame with the columns {wanted}",
                           "return the pipeline's output columns plus committed_ms (epoch ms at which "
                           "a reader could first see each row) from read()")
    return out, _sink_report(sink)


def _sink_report(sink) -> dict | None:
    """The sink's own figures (files outside its log...), if it has any; a report that fails
    is recorded as its error: it describes the output, the verdict does not rest on it."""
    from workloads.sinks import ReportingSink

    if not isinstance(sink, ReportingSink):
        return None
    try:
        return sink.report()
    except Exception as exc:  # noqa: BLE001 - a user's sink may raise anything
        return {"error": f"{type(exc).__name__}: {exc}"}


def _with_lag_recovery(faults: list[dict], t0: float | None, series) -> list[dict]:
    """Each fault's recovery.lag_recovered_s, from the lag at every batch's end."""
    for fault in faults:
        if t0 is not None and fault["started_s"] is not None:
            ended = fault["ended_s"] if fault["ended_s"] is not None else fault["started_s"]
            fault["recovery"]["lag_recovered_s"] = metrics.lag_recovered_s(
                series, (t0 + fault["started_s"]) * 1000, (t0 + ended) * 1000)
    return faults


def _nothing_checked(guarantee: str, failure: str | None, checked: bool = True) -> dict:
    """The summary of a case whose output was not checked: nothing was sent, or its sink
    keeps nothing to read back (a speed run: its verdict holds unless the run failed)."""
    none = latency.percentiles(latency.histogram(np.array([])))
    counts = dict.fromkeys(("produced", "expected", "delivered", "lost", "duplicated", "unexpected",
                            "dropped_late"), 0)
    if checked:
        verdict = summary_mod.verdict(guarantee, 0, 0, 0, problems=[failure or "nothing was sent"])
    else:
        verdict = summary_mod.unchecked(guarantee, failure)
    return {"events": counts, "verdict": verdict,
            "throughput_eps": {"offered": 0.0, "processed": 0.0},
            "latency_ms": {"event_time": none, "processing_time": none},
            "backpressure": {"max_lag_records": 0, "max_lag_s": 0.0, "recovery_s": None}}


def _first_send_ms(truth) -> float:
    return float(truth.loc[~truth["control"], "sent_ms"].min())


def _generator_summary(report: dict) -> dict:
    """The generator's own numbers: did it offer what the workload asked, on time?"""
    slip = report["schedule_slip_us"] or {}
    return {"target_eps": report["target_eps"], "achieved_eps": report["achieved_eps"],
            "pacing_error": report["pacing_error"], "late_by_design": report["late_by_design"],
            "per_partition": report["per_partition"],
            "schedule_slip_ms": {k: slip[q] / 1000 for k, q in
                                 (("p50", "p50"), ("p99", "p99"), ("p999", "p99.9"), ("max", "max"))
                                 if q in slip}}
