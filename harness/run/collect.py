"""After a case's stages: read what the sink holds, check it against ground truth, measure
what the case's files say, and build its CaseResult (harness/results/model.py).

Everything here reads the case's directory; nothing runs any more.
"""

from __future__ import annotations

import time
import traceback
from typing import Any

import numpy as np

from harness import check as checker
from harness import findings, metrics, pipelines
from harness.check import checkpoint
from harness.check.large import RunFiles
from harness.errors import HarnessError
from harness.metrics import batches as batch_times
from harness.metrics import flow, latency
from harness.metrics import resources as sampled_resources
from harness.results import verdict as verdicts
from harness.results.model import CaseResult, FaultRecord
from harness.run import incidents
from harness.run.case import Case
from harness.run.faults import FaultRunner
from workloads.errors import Problem


def case_result(case: Case, schedule: FaultRunner, resources: dict | None) -> CaseResult:
    """Check the sink against ground truth and build the case's result."""
    from workloads.generator import truth as truth_mod
    from workloads.sinks import CUSTOM_SINK, SINKS

    pl, spec, files, failure = case.pipeline, case.spec, case.files, case.failure
    sink, sink_report = _read_sink(case)
    sink.to_parquet(files.sink, index=False)
    truth = None
    if truth_mod.has_parts(case.truth_dir):
        # a run checked from its files holds truth for the measurements and findings only: its
        # keys as categories (an hour's 80 million rows: 3.5 GB, where strings took over 20)
        lean = checker.checks_from_files(pl, RunFiles(case.truth_dir, files.sink))
        truth = truth_mod.read(case.truth_dir, checker.truth_columns(pl), categorical=lean)
    progress_records = metrics.read_progress(files.progress)
    sections: dict[str, Any] = {
        "batches": len(progress_records), "topic": case.topic, "sink_table": case.sink_name,
        "spark_pids": {"driver": case.driver.pid if case.driver else None,
                       "executors": sorted(case.driver.seen_executor_pids) if case.driver else []},
        "spark_dropped_by_watermark": metrics.dropped_by_watermark(progress_records),
        "batch_time": batch_times.breakdown(progress_records,
                                            pl.trigger_ms if pl.trigger == "processing-time" else None),
        "spark_settings": {**pl.spark.describe(), "trigger": pl.trigger, "trigger_ms": pl.trigger_ms,
                           "watermark_ms": pl.values.get("watermark_ms"), "conf": case.spark_conf()}}
    if resources is not None:
        sections["resources"] = resources
    if files.resources.exists():
        import pandas as pd

        sections["drift"] = sampled_resources.drift(pd.read_parquet(files.resources))
    if sink_report:
        sections["sink_report"] = sink_report
    if pl.build:
        sections["build"] = pl.build
    if spec.sink == CUSTOM_SINK:
        sections["sink_class"] = spec.sink_class
    if case.report is not None:
        sections["generator"] = _generator_summary(case.report)
    result = _empty(case, [FaultRecord.from_json(r) for r in schedule.records()], sections)
    until_ms = case.stopping_ms if case.stopping_ms is not None else time.time() * 1000
    result.incidents = incidents.collect(files, schedule.t0, case.running_from_ms, until_ms, result.faults)
    if truth is None:   # died before sending: nothing to check
        return result
    batch_times.table(progress_records).to_parquet(files.batches, index=False)
    batches = checkpoint.read_queries(case.checkpoints, case.topic)
    speed, (rates, lag) = _speed(case, truth, progress_records, sink, batches)
    result.throughput_eps, result.backpressure = speed["throughput_eps"], speed["backpressure"]
    result.sections["records_read"] = speed["records_read"]
    start_ms = _first_send_ms(truth)

    def timeline(latencies: dict) -> None:
        import pandas as pd

        used = files.resources
        sampled = pd.read_parquet(used) if used.exists() else None
        frame = flow.per_second(rates, lag, latencies, start_ms, sampled)
        frame.to_parquet(files.timeline, index=False)

    if spec.sink != CUSTOM_SINK and not SINKS[spec.sink].checked:   # a speed run: nothing to read back
        timeline({})
        result.verdict = verdicts.unchecked(spec.guarantee, failure)
        return result
    ranges = [d for f in result.faults for d in f.more.get("deleted", [])]
    truth, deleted = _without_deleted(truth, ranges)
    run_files = RunFiles(case.truth_dir, files.sink, ranges)
    try:
        with sampled_resources.PeakRss() as peak:
            began = time.perf_counter()
            checked = checker.check(pl, truth, sink, batches, run_files)
        result.sections["checker"] = {"seconds": round(time.perf_counter() - began, 3),
                                      "peak_rss_bytes": peak.bytes, "events": int(len(truth))}
    except Problem:
        raise   # the user's oracle returned the wrong shape: named with the fix, exit 2
    except Exception as exc:  # noqa: BLE001 - an oracle that raises fails its case, not the run
        files.checker_error.write_text(traceback.format_exc())
        why = f"the checker raised {type(exc).__name__}: {exc}; traceback in {files.checker_error}"
        case.progress.step(f"FAILED: {why}")
        result.verdict = verdicts.verdict(spec.guarantee, 0, 0, 0, problems=[*filter(None, [failure, why])])
        timeline({})
        return result
    checked.write_discrepancies(files.discrepancies)
    for line in checked.first_discrepancies():
        case.progress.step(f"  {line}")
    inputs = findings.Inputs(truth=truth, sink=sink, batches=batches, checked=checked, pipeline=pl,
                             faults=result.faults, incidents=result.incidents,
                             checkpoints=list(case.checkpoints), progress=progress_records,
                             t0_s=_first_send_ms(truth) / 1000,
                             spark_dropped_by_watermark=sections["spark_dropped_by_watermark"])
    result.findings = _findings(inputs, files)
    c = checked.counts
    if deleted:   # sent and acknowledged, then deleted by Kafka before any batch read them
        c.update(produced=c["produced"] + deleted, deleted_before_read=deleted)
    problems = ([failure] if failure else []) + schedule.problems() + checked.problems
    result.events, result.sections["unit"] = c, checked.unit
    result.verdict = verdicts.verdict(spec.guarantee, c["lost"], c["duplicated"], c["unexpected"],
                                      expected_count=c["expected"], problems=problems)
    result.sections["discrepancies"] = checked.discrepancies["kind"].value_counts().to_dict()
    warmup_ms = case.scenario.measure.warmup_s * 1000
    result.latency_ms, result.latency_measured_ms, latencies = latency.record(
        files.path, checked, start_ms, start_ms + warmup_ms)
    timeline(latencies)
    _lag_recovery(result.faults, schedule.t0, metrics.lag_series(truth, progress_records, case.topic))
    result.backpressure["recovery_s"] = result.recovery_s   # schema 2: the case's recovery
    return result


def _findings(inputs, files) -> list:
    """Each anomaly's class, witness and story; a crash here is written down and costs the case
    its findings, never its verdict (the counts and discrepancies are already in place)."""
    try:
        return findings.build(inputs)
    except Exception:  # noqa: BLE001 - the findings explain a verdict; they never decide it
        files.findings_error.write_text(traceback.format_exc())
        return []


def _empty(case: Case, faults: list[FaultRecord], sections: dict) -> CaseResult:
    """The result of a case whose output was not checked (yet): nothing was sent, or its
    sink keeps nothing to read back; the stages fill in what they measured."""
    spec, failure = case.spec, case.failure
    none = latency.percentiles(latency.histogram(np.array([])))
    counts = dict.fromkeys(("produced", "expected", "delivered", "lost", "duplicated", "unexpected",
                            "dropped_late"), 0)
    return CaseResult(
        name=spec.name, series=spec.series or spec.name, repeat=spec.repeat, guarantee=spec.guarantee,
        pipeline=case.pipeline.kind, sink=spec.sink, events=counts,
        verdict=verdicts.verdict(spec.guarantee, 0, 0, 0, problems=[failure or "nothing was sent"]),
        throughput_eps={"offered": 0.0, "processed": 0.0},
        latency_ms={"event_time": none, "processing_time": none},
        backpressure={"max_lag_records": 0, "max_lag_s": 0.0, "recovery_s": None},
        faults=faults, error=failure, sections=sections)


def _speed(case: Case, truth, progress_records: list[dict], sink, batches) -> tuple[dict, tuple]:
    """Throughput and backpressure: the run's overall rates; the four throughputs measured
    after [measure] warmup; the lag's trend; whether Spark's count of records read agrees
    with the harness's. And per second, the throughputs and each partition's lag (the
    latter saved as lag.parquet) for the case's timeline."""
    start_ms, measure = _first_send_ms(truth), case.scenario.measure
    delivered_ms = sink["committed_ms"].to_numpy() if sink is not None and len(sink) else np.array([])
    # a windowed count's row stands for its count of events (the pipeline's delivered_weight)
    kind = case.pipeline.kind
    weight = None if kind == pipelines.CUSTOM else pipelines.kind(kind).delivered_weight
    weights = sink[weight].to_numpy() if len(delivered_ms) and weight else None
    rates, lag = flow.timeline(truth, progress_records, case.topic, delivered_ms, start_ms, weights)
    lag.to_parquet(case.files.lag, index=False)
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


def _lag_recovery(faults: list[FaultRecord], t0: float | None, series) -> None:
    """Each fault's recovery.lag_recovered_s, from the lag at every batch's end; where there is
    none, recovery.note says why."""
    for fault in faults:
        if t0 is None or fault.started_s is None:
            fault.recovery.update(lag_recovered_s=None, note="the fault was not injected")
            continue
        ended = fault.ended_s if fault.ended_s is not None else fault.started_s
        seconds, note = metrics.lag_recovery(series, (t0 + fault.started_s) * 1000, (t0 + ended) * 1000)
        fault.recovery["lag_recovered_s"] = seconds
        if note:
            fault.recovery["note"] = note


def _without_deleted(truth, ranges: list[dict]):
    """Ground truth without the events Kafka deleted before the query read them (a
    kafka-retention fault's `deleted` ranges), and how many those were: the sink cannot be
    blamed for input it never had, so they are neither expected nor lost."""
    if not ranges:
        return truth, 0
    gone = np.zeros(len(truth), dtype=bool)
    part, offset = truth["partition"].to_numpy(), truth["offset"].to_numpy()
    for d in ranges:
        gone |= (part == d["partition"]) & (offset >= d["from"]) & (offset < d["to"])
    gone &= ~truth["control"].to_numpy()
    return truth[~gone].reset_index(drop=True), int(gone.sum())


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
