"""After a case's stages: read what the sink holds, check it against ground truth, measure
what the case's files say, and build its CaseResult (harness/results/model.py).

Everything here reads the case's directory; nothing runs any more. `case_result` is the steps
in order: read the output, describe the case, measure it, check it, explain it, judge it.
"""

from __future__ import annotations

import os
import shutil
import time
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness import check as checker
from harness import findings, metrics
from harness.check import checkpoint, state_check
from harness.check import registry as pipeline_registry
from harness.check.large import RunFiles
from harness.check.result import CheckResult
from harness.errors import HarnessError
from harness.metrics import batches as batch_times
from harness.metrics import flow, latency
from harness.metrics import resources as sampled_resources
from harness.metrics import window as measured_window
from harness.results import verdict as verdicts
from harness.results.model import CaseResult, FaultRecord
from harness.run import incidents
from harness.run.case import Case
from harness.run.schedule import FaultRunner
from workloads.errors import Problem
from workloads.pipelines.state_read import ANSWER, BEFORE


@dataclass
class Output:
    """What a finished case left behind, read once: the sink as a consumer sees it, ground
    truth, the progress records and the checkpoint's batches."""

    sink: Any
    sink_report: dict | None
    truth: Any
    progress: list[dict]
    batches: list
    unread: str | None = None   # why the sink could not be read (its read() raised): sink is None


def case_result(case: Case, schedule: FaultRunner, resources: dict | None) -> CaseResult:
    """Check the sink against ground truth and build the case's result."""
    out = _read(case)
    result = _empty(case, schedule.records(), _describe(case, out, resources))
    until_ms = case.stopping_ms if case.stopping_ms is not None else time.time() * 1000
    result.incidents = incidents.collect(case.files, schedule.t0, case.running_from_ms, until_ms,
                                         result.faults)
    if out.truth is None:   # died before sending: nothing to check
        return result
    batch_times.table(out.progress).to_parquet(case.files.batches, index=False)
    window, rates, lag = _measure(case, result, out)
    if not _checked_sink(case):   # a speed run: nothing to read back (UNKNOWN)
        _timeline(case, out, rates, lag, {})
        result.verdict = verdicts.unchecked(case.spec.guarantee, case.failure)
        return result
    if out.unread is not None:   # the sink's read() raised: nothing to check (UNKNOWN, not FAIL)
        _timeline(case, out, rates, lag, {})
        result.verdict = verdicts.undecided(case.spec.guarantee, out.unread, case.failure)
        return result
    truth, deleted = without_deleted(out.truth, deleted_ranges(result.faults))
    checked = _check(case, result, truth, out)
    if checked is None:   # the oracle raised: UNKNOWN (FAIL with a dead driver), said so
        _timeline(case, out, rates, lag, {})
        return result
    if deleted:   # sent and acknowledged, then deleted before any batch read them (the findings say so)
        checked.counts.update(produced=checked.counts["produced"] + deleted, deleted_before_read=deleted)
    checked = _state(case, result, truth, out, checked,
                     schedule.t0 if schedule.t0 is not None else _first_send_ms(truth) / 1000)
    checked = _timers(case, result, truth, out, checked)
    result.findings = _explain(case, result, truth, out, checked)
    _judge(case, result, schedule, checked)
    latencies = _latency(case, result, checked, window)
    _timeline(case, out, rates, lag, latencies)
    _lag_recovery(result.faults, schedule.t0, metrics.lag_series(truth, out.progress, case.topic),
                  window.warm.at_ms)
    result.backpressure["recovery_s"] = result.recovery_s   # schema 2: the case's recovery
    return result


# -- the steps --------------------------------------------------------------------------------
def _read(case: Case) -> Output:
    """The sink (written to sink.parquet), ground truth, progress and the checkpoint's batches;
    nothing of a case whose driver never started (its sink could not be built)."""
    from workloads.generator import truth as truth_mod

    pl, files = case.pipeline, case.files
    if case.driver is None:
        return Output(None, None, None, [], [])
    sink, sink_report, unread = _read_sink(case)
    if sink is not None:
        sink.to_parquet(files.sink, index=False)
    truth = None
    if truth_mod.has_parts(case.truth_dir):
        # a run checked from its files holds truth for the measurements and findings only: its
        # keys as categories (an hour's 80 million rows: 3.5 GB, where strings took over 20)
        lean = checker.checks_from_files(pl, RunFiles(case.truth_dir, files.sink))
        truth = truth_mod.read(case.truth_dir, checker.truth_columns(pl), categorical=lean)
    return Output(sink, sink_report, truth, metrics.read_progress(files.progress),
                  checkpoint.read_queries(case.checkpoints, case.topic), unread)


def _describe(case: Case, out: Output, resources: dict | None) -> dict[str, Any]:
    """The case's sections that describe it: its topic, table, pids, Spark's settings and
    counts, batch times, resources, drift, the sink's and the generator's reports."""
    from workloads.sinks import CUSTOM_SINK

    pl, spec, files = case.pipeline, case.spec, case.files
    sections: dict[str, Any] = {
        "batches": len(out.progress), "topic": case.topic, "sink_table": case.sink_name,
        "spark_pids": {"driver": case.driver.pid if case.driver else None,
                       "executors": sorted(case.driver.seen_executor_pids) if case.driver else []},
        "spark_dropped_by_watermark": metrics.dropped_by_watermark(out.progress),
        "batch_time": batch_times.breakdown(out.progress,
                                            pl.trigger_ms if pl.trigger == "processing-time" else None),
        "spark_settings": {**pl.spark.describe(), "trigger": pl.trigger, "trigger_ms": pl.trigger_ms,
                           "watermark_ms": pl.values.get("watermark_ms"), "conf": case.spark_conf()},
        # the state and checkpoint settings a [matrix] sweeps, side by side in the table and report
        "state_settings": pl.spark.state_settings()}
    if resources is not None:
        sections["resources"] = resources
    if files.resources.exists():
        import pandas as pd

        sections["drift"] = sampled_resources.drift(pd.read_parquet(files.resources))
    if out.sink_report:
        sections["sink_report"] = out.sink_report
    if pl.build:
        sections["build"] = pl.build
    if spec.sink == CUSTOM_SINK:
        sections["sink_class"] = spec.sink_class
    if case.report is not None:
        sections["generator"] = _generator_summary(case.report)
    return sections


def _measure(case: Case, result: CaseResult, out: Output):
    """The measured window, the throughputs and backpressure over it; returns the window and
    the per-second rates and lag (lag.parquet) for the case's timeline."""
    start_ms = _first_send_ms(out.truth)
    sent = out.truth.loc[~out.truth["control"], "sent_ms"]
    window = measured_window.of(out.batches, start_ms, case.scenario.measure.warmup_s,
                                case.scenario.workload.duration_s, float(sent.max()))
    speed, (rates, lag) = _speed(case, out, window)
    result.throughput_eps, result.backpressure = speed["throughput_eps"], speed["backpressure"]
    result.sections["records_read"] = speed["records_read"]
    result.sections["measured_window"] = window.to_json()
    return window, rates, lag


def _checked_sink(case: Case) -> bool:
    from workloads.sinks import CUSTOM_SINK, SINKS

    return case.spec.sink == CUSTOM_SINK or SINKS[case.spec.sink].checked


def _check(case: Case, result: CaseResult, truth, out: Output) -> CheckResult | None:
    """The oracle's result, its cost recorded; None when it raised (Jepsen's check-safe: the
    case's verdict is UNKNOWN, naming the exception, with the traceback in checker-error.txt)."""
    files = case.files
    run_files = RunFiles(case.truth_dir, files.sink, deleted_ranges(result.faults))
    try:
        with sampled_resources.PeakRss() as peak:
            began = time.perf_counter()
            checked = checker.check(case.pipeline, truth, out.sink, out.batches, run_files)
        result.sections["checker"] = {"seconds": round(time.perf_counter() - began, 3),
                                      "peak_rss_bytes": peak.bytes, "events": int(len(truth))}
    except Problem:
        raise   # the user's oracle returned the wrong shape: named with the fix, exit 2
    except Exception as exc:  # noqa: BLE001 - an oracle that raises leaves its case undecided, not the run
        files.checker_error.write_text(traceback.format_exc())
        why = f"the checker raised {type(exc).__name__}: {exc}; traceback in {files.checker_error}"
        result.verdict = verdicts.undecided(case.spec.guarantee, why, case.failure)
        case.progress.step(f"{result.verdict.status}: {why}")
        return None
    checked.write_discrepancies(files.discrepancies)
    for line in checked.first_discrepancies():
        case.progress.step(f"  {line}")
    return checked


def _state(case: Case, result: CaseResult, truth, out: Output, checked: CheckResult,
           t0_s: float) -> CheckResult:
    """The state check (harness/check/state_check.py), on a copy of the checkpoint: a state
    that diverged from the oracle's is a problem of the case; a check that could not run is
    written down (state-check-error.txt) and decides nothing."""
    began = time.monotonic()
    try:
        return _state_checked(case, result, truth, out, checked, t0_s, began)
    finally:   # the copies made before each fault that no read took (stages.state_snapshot)
        for copy in (case.dir / state_check.STATE_DIR / BEFORE).glob("*/checkpoint"):
            shutil.rmtree(copy, ignore_errors=True)


def _state_checked(case: Case, result: CaseResult, truth, out: Output, checked: CheckResult, t0_s: float,
                   began: float) -> CheckResult:
    kept_state = any(os.path.isdir(os.path.join(c, "state")) for c in case.checkpoints)
    if not state_check.applies(case.pipeline) or not kept_state:
        return checked   # no state this check judges: nothing to say
    # no model of its state (a job's operators, a fresh query's) says more than "too short"
    skipped = (state_check.unmodelled(case.dir, case.pipeline, case.checkpoints)
               or _state_skipped(case, began))
    if skipped:
        result.sections["state_check"] = {"diverged": 0, "checked": [], "notes": [skipped], "seconds": {}}
        return checked
    try:
        # t0_s: the faults' own zero (their records' seconds count from it), so that the batches
        # chosen are those the driver read at its end (stages.ask_state_read)
        seen = state_check.check(case.dir, case.pipeline, truth, out.batches, result.faults, t0_s,
                                 list(case.checkpoints), no_reader=_too_short(case, began))
    except Exception as exc:  # noqa: BLE001 - evidence beside the verdict: its crash is no verdict
        case.files.path.joinpath("state-check-error.txt").write_text(traceback.format_exc())
        result.sections["state_check"] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        return checked
    if seen is None:
        return checked
    # the driver's reads at its end are in the case's time already, and the check's cost too
    spent = time.monotonic() - began + float(seen.seconds.get("in_driver_s") or 0.0)
    case_s = began - case.started_at if case.started_at else None
    result.sections["state_check"] = {**seen.to_json(), "case_s": round(case_s, 1) if case_s else None,
                                      "share": round(spent / (case_s + spent), 3) if case_s else None}
    problem = seen.problem()
    return checked.with_problems([problem]) if problem else checked


def _timers(case: Case, result: CaseResult, truth, out: Output, checked: CheckResult) -> CheckResult:
    """transformWithState's timers, from the firings its processor recorded (harness/check/timers.py):
    a timer fired twice or never is a problem of the case; a check that crashed decides nothing."""
    from harness.check import timers

    try:
        seen = timers.check(case.dir, case.pipeline, truth, out.batches)
    except Exception as exc:  # noqa: BLE001 - evidence beside the verdict: its crash is no verdict
        case.files.path.joinpath("timers-check-error.txt").write_text(traceback.format_exc())
        result.sections["timers"] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        return checked
    if seen is None:
        return checked
    result.sections["timers"] = seen.to_json()
    problem = seen.problem()
    return checked.with_problems([problem]) if problem else checked


# what a state read costs, at the least (a Spark process's start and a session: 22-26 s measured at
# a load average of 5-6, docs/state.md), and the share of a case it may take (issue 49's goal)
STATE_READ_S, STATE_CHECK_SHARE = 20.0, 0.15


def _state_skipped(case: Case, now: float) -> str | None:
    """Why the state check does not run on this case, or None: [measure] state_check = false, or
    "auto" (the default) on a case too short for a reader of its own (`_too_short`) whose driver
    read nothing at its end. A driver that read some of the batches wanted leaves the rest to
    the check, which starts no reader on such a case either (state_check.check `no_reader`)."""
    if case.scenario.measure.state_check is False:
        return "not checked: [measure] state_check = false"
    if (case.dir / state_check.STATE_DIR / ANSWER).exists():
        return None   # the driver read it at its end: the cost is paid, and small
    return _too_short(case, now)


def _too_short(case: Case, now: float) -> str | None:
    """Why no reader of its own may read this case's state: "auto" (the default) on a case too
    short for a read to stay within STATE_CHECK_SHARE of it (CI's cases of a minute: a read
    there is a third of the case); None when one may."""
    case_s = now - case.started_at if case.started_at else None
    auto = case.scenario.measure.state_check is None
    if auto and case_s is not None and case_s * STATE_CHECK_SHARE < STATE_READ_S:
        return (f"not checked: the case lasted {case_s:.0f} s, and a read of its state costs "
                f"{STATE_READ_S:g} s at least, over {STATE_CHECK_SHARE:.0%} of it "
                '([measure] state_check = "auto"); state_check = true checks it anyway')
    return None


def _explain(case: Case, result: CaseResult, truth, out: Output, checked: CheckResult) -> list:
    """Each anomaly's class, witness and story; a crash here is written down and costs the case
    its findings, never its verdict (the counts and discrepancies are already in place)."""
    inputs = findings.Inputs(truth=truth, sink=out.sink, batches=out.batches, checked=checked,
                             pipeline=case.pipeline, faults=result.faults, incidents=result.incidents,
                             checkpoints=list(case.checkpoints), progress=out.progress,
                             t0_s=_first_send_ms(truth) / 1000,
                             spark_dropped_by_watermark=result.sections["spark_dropped_by_watermark"])
    try:
        return findings.build(inputs)
    except Exception:  # noqa: BLE001 - the findings explain a verdict; they never decide it
        case.files.findings_error.write_text(traceback.format_exc())
        return []


def _judge(case: Case, result: CaseResult, schedule: FaultRunner, checked: CheckResult) -> None:
    """The counts and the verdict: the output's guarantee, and every problem of the run (a dead
    driver, a fault not observed or not landed). A missed fault is no problem of the pipeline's,
    but the case did not run what it was asked to: UNKNOWN, naming it, unless the case failed."""
    c = checked.counts
    problems = ([case.failure] if case.failure else []) + schedule.problems() + checked.problems
    if case.drain_short and c["lost"]:   # liveness: the outputs it waited for are missing
        problems.append(f"{case.drain_short}; {c['lost']:,} expected outputs are missing from the sink")
    unknowns = [f"fault {f.kind} at {f.asked} never came: {f.missed}" for f in result.missed]
    unknowns += list(getattr(checked, "unknowns", ()))   # an oracle that could not decide
    result.events, result.sections["unit"] = c, checked.unit
    result.verdict = verdicts.verdict(case.spec.guarantee, c["lost"], c["duplicated"], c["unexpected"],
                                      expected_count=c["expected"], problems=problems, unknowns=unknowns)
    for note in getattr(checked, "notes", ()):   # what the oracle left out, and why (a job's batch oracle)
        result.verdict.detail += f"; {note}"
    if case.drain_short and not c["lost"]:   # ran out, but nothing it waited for was missing
        result.verdict.detail += (f"; {case.drain_short}, but the sink held every expected output: "
                                  "not a failure")
    result.sections["discrepancies"] = checked.discrepancies["kind"].value_counts().to_dict()


def _latency(case: Case, result: CaseResult, checked: CheckResult, window) -> dict:
    """The latency percentiles, of all output and of what became visible in the measured window
    (none, said so, when fewer than MIN_BATCHES commits wrote it); their per-second timelines."""
    start_ms = window.t0_ms
    result.latency_ms, measured, latencies = latency.record(case.files.path, checked, start_ms,
                                                            window.from_ms)
    commits = _commits_after(checked, window.from_ms)
    if commits < measured_window.MIN_BATCHES:
        window.skip("p99_ms", f"the output that became visible in the measured window came from {commits} "
                              f"commit{'s' if commits != 1 else ''} of the sink: fewer than "
                              f"{measured_window.MIN_BATCHES}")
        measured = {kind: latency.percentiles(latency.histogram(np.array([]))) for kind in measured}
    result.latency_measured_ms = measured
    result.sections["measured_window"] = window.to_json()
    return latencies


def _commits_after(checked: CheckResult, from_ms: float) -> int:
    """How many distinct commit times of the sink the measured output came from."""
    at = getattr(checked, "event_time_at_ms", None)
    if at is None or not len(at):
        return 0
    at = np.asarray(at)
    return int(len(np.unique(at[at >= from_ms])))


def _timeline(case: Case, out: Output, rates, lag, latencies: dict) -> None:
    """timeline.parquet: per second, the four throughputs, the lag, latency and resources."""
    import pandas as pd

    used = case.files.resources
    sampled = pd.read_parquet(used) if used.exists() else None
    frame = flow.per_second(rates, lag, latencies, _first_send_ms(out.truth), sampled)
    frame.to_parquet(case.files.timeline, index=False)


def interrupted(case: Case, why: str) -> CaseResult:
    """The result of the case a run was interrupted in (Ctrl-C, SIGTERM): UNKNOWN, nothing of it
    checked, named in summary.json with its directory, which keeps what the case wrote until
    then (ground truth, the sink, the checkpoint), so that no case of the run goes unsaid."""
    from dataclasses import replace

    result = _empty(case, [], {"interrupted": why})
    verdict = verdicts.undecided(case.spec.guarantee, f"the run was interrupted during this case ({why}); "
                                 f"nothing of it was checked (its files: {case.dir})")
    return replace(result, verdict=verdict, error=None)


# -- helpers ------------------------------------------------------------------------------------
def _empty(case: Case, faults: list[FaultRecord], sections: dict) -> CaseResult:
    """The result of a case whose output was not checked (yet): nothing was sent, or its
    sink keeps nothing to read back; the steps fill in what they measured."""
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


def _speed(case: Case, out: Output, window) -> tuple[dict, tuple]:
    """Throughput and backpressure: the run's overall rates; the four throughputs measured over
    the measured window (the processed and committed ones only with MIN_BATCHES batches in it);
    the lag's trend; whether Spark's count of records read agrees with the harness's. And per
    second, the throughputs and each partition's lag (the latter saved as lag.parquet) for the
    case's timeline."""
    truth, progress_records, sink = out.truth, out.progress, out.sink
    start_ms, measure = window.t0_ms, case.scenario.measure
    delivered_ms = sink["committed_ms"].to_numpy() if sink is not None and len(sink) else np.array([])
    # a windowed count's row stands for its count of events (the pipeline's delivered_weight)
    weight = pipeline_registry.of(case.pipeline).delivered_weight
    weights = sink[weight].to_numpy() if len(delivered_ms) and weight else None
    rates, lag = flow.timeline(truth, progress_records, case.topic, delivered_ms, start_ms, weights)
    lag.to_parquet(case.files.lag, index=False)
    at_batch_ends = metrics.lag_series(truth, progress_records, case.topic)   # once: three readers
    measured = flow.measured(rates, lag, truth, start_ms, (window.from_ms - start_ms) / 1000,
                             measure.lag_trend_max, at_batch_ends)
    backpressure = metrics.backpressure(truth, progress_records, case.topic, at_batch_ends)
    # real-time mode commits a batch's offsets only at its end: the lag rebuilt from them is
    # the batch duration's worth of records, not what is waiting, so no verdict on it
    keeping_up = None if case.pipeline.trigger == "real-time" else measured["keeping_up"]
    trend = None if keeping_up is None else ("keeping-up" if keeping_up else "falling-behind")
    backpressure.update(lag_trend=trend, lag_trend_records_per_s=measured["lag_trend_records_per_s"],
                        lag_trend_sampled_at=measured["lag_trend_sampled_at"], keeping_up=keeping_up)
    burst = _burst_drain(case.scenario.workload.rate, start_ms, at_batch_ends)
    if burst is not None:
        backpressure["burst"] = burst
    eps = measured["eps"]
    committed = flow.committed_eps(out.batches, start_ms, measured["window_s"])
    too_few = window.too_few_batches
    if too_few:   # a figure from too little of the query's work is no figure
        eps["processed"], committed = None, None
        window.skip("throughput_eps", too_few)
    throughput = {"offered": metrics.offered_eps(truth),
                  "processed": metrics.processed_eps(progress_records, start_ms),
                  "ingested": eps["ingested"], "delivered": eps["delivered"],
                  "measured": {"window_s": measured["window_s"], **eps, "committed": committed}}
    return ({"throughput_eps": throughput, "backpressure": backpressure,
             "records_read": flow.counts_agree(truth, progress_records)}, (rates, lag))


def _burst_drain(rate, start_ms: float, series: list[tuple[float, int, float]]) -> dict | None:
    """For a `burst` rate shape: when the burst came and how long after its end the lag was
    back at its level before it (`drained_s`; None when it never was, or the run had not yet
    run 10 s of batches when it came). None for any other shape."""
    from workloads.generator import shapes

    shape = rate.shape if isinstance(rate, shapes.WarmUp) else rate
    if not isinstance(shape, shapes.Burst):
        return None
    began_ms, ended_ms = start_ms + shape.at_s * 1000, start_ms + (shape.at_s + shape.length_s) * 1000
    back_s = metrics.lag_recovered_s(series, began_ms, ended_ms)
    return {"at_s": shape.at_s, "length_s": shape.length_s,
            "drained_s": None if back_s is None else round(max(back_s - shape.length_s, 0.0), 3)}


def _read_sink(case: Case) -> tuple[Any, dict | None, str | None]:
    """What a consumer of the case's sink sees: the output columns plus committed_ms; the sink's
    report; and, when its read() raised, None and why (the traceback in sink-error.txt: the case's
    verdict is UNKNOWN, not the run's crash). A scenario's own sink whose read() returns
    something else is named with the fix."""
    import pandas as pd

    from workloads.sinks import sink_target

    spec, columns = case.spec, list(case.pipeline.columns)
    target = sink_target(spec.sink, spec.sink_class)
    sink = case.sink()
    try:
        out = sink.read()
    except Problem:
        raise   # the harness's own word on the environment (exit 2)
    except Exception as exc:  # noqa: BLE001 - a user's sink may raise anything: its case is UNKNOWN
        case.files.sink_error.write_text(traceback.format_exc())
        why = (f"the sink {target}'s read() raised {type(exc).__name__}: {exc}; traceback in "
               f"{case.files.sink_error}")
        case.progress.step(f"UNKNOWN: {why}")
        return None, _sink_report(sink), why
    wanted = [*columns, "committed_ms"]
    if not isinstance(out, pd.DataFrame) or any(c not in out.columns for c in wanted):
        got = list(out.columns) if isinstance(out, pd.DataFrame) else type(out).__name__
        raise HarnessError(f"the sink {target} of case {spec.name}: read() returned {got}, "
                           f"not a pandas DataFrame with the columns {wanted}",
                           "return the pipeline's output columns plus committed_ms (epoch ms at which "
                           "a reader could first see each row) from read()")
    return out, _sink_report(sink), None


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


def _lag_recovery(faults: list[FaultRecord], t0: float | None, series, warm_ms: float) -> None:
    """Each fault's recovery.lag_recovered_s, from the lag at every batch's end, against its level
    between the warm-up's end and the fault; where there is none, recovery.note says why."""
    for fault in faults:
        if t0 is None or fault.started_s is None:
            fault.recovery.update(lag_recovered_s=None, note="the fault was not injected"
                                  + (f" ({fault.missed})" if fault.missed else ""))
            continue
        start = fault.landed_s if fault.landed_s is not None else fault.started_s
        ended = fault.ended_s if fault.ended_s is not None else start
        seconds, note = metrics.lag_recovery(series, (t0 + start) * 1000, (t0 + ended) * 1000,
                                             since_ms=warm_ms)
        fault.recovery["lag_recovered_s"] = seconds
        if note:
            fault.recovery["note"] = note


def deleted_ranges(faults: list[FaultRecord]) -> list[dict]:
    """Records Kafka deleted before the query read them, as the faults' records say."""
    return [d for f in faults for d in f.details.deleted_ranges()]


def without_deleted(truth, ranges: list[dict]):
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
