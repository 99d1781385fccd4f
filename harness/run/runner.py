"""Run a scenario: services, then each case (generator -> pipeline -> sink -> checker).

Data flows one way and every stage leaves its output in the run directory, so a
report can be rebuilt from the directory alone. The stages are run/stages.py; the
case's result is built from what they left by run/collect.py; the run's result is
built here, and written as summary.json whatever happens.
"""

from __future__ import annotations

import logging
import time

from harness import environment, jvm, toxiproxy_build
from harness.check.batch_oracle import server as batch_oracle_server
from harness.errors import RunAborted
from harness.metrics import resources
from harness.results import summary as summary_mod
from harness.results.model import CaseResult, RunResult
from harness.results.rundir import RunDir
from harness.results.verdict import FAIL
from harness.run import incidents, job_check, journal, reference_run, references, stages
from harness.run.case import Case
from harness.run.collect import case_result, interrupted
from harness.run.schedule import FaultRunner
from harness.run.stack import needs_postgres, start_stack
from harness.scenario.fault_specs import needs_proxy
from harness.services.base import Registry
from harness.services.spark import DriverDied
from workloads.progress import Progress
from workloads.sinks import sink_needs

# how long a driver asked to stop may take before it is killed: its query's stop, and with the
# state check's reads asked of it (stages.ask_state_read) those too: a few seconds a read, more on
# a loaded machine; a driver killed before it read leaves the check to its own reader
STOP_S, STOP_WITH_STATE_READ_S = 60.0, 180.0

log = logging.getLogger(__name__)

__all__ = ["preflight", "run", "run_case", "start_stack"]


def run(scenario, run_dir: RunDir, run_id: str, progress: Progress, registry: Registry,
        cases=None, stack=None) -> RunResult:
    """Run every case of `scenario`; returns the result (already written to run_dir).
    `cases(stack, result)`, when given, runs the cases instead (the sustain search, the hunt);
    `stack`, when given, is services started before (a pytest session's)."""
    result = _started(scenario, run_id)
    try:
        own = stack is None   # services of this run's own, stopped after its last case
        if stack is None:
            stack = start_stack(scenario, run_dir.services, registry, progress)
        with batch_oracle_server.serving(registry, run_dir.services):   # one batch oracle session
            if cases is not None:
                cases(stack, result)
            for i, spec in enumerate(scenario.cases if cases is None else ()):
                # oracle = "reference": the case without its faults first (harness/run/reference_run.py)
                reference = reference_run.first(scenario, spec, lambda s, c: run_case(
                    Case.create(s, c, stack, run_dir, run_id, progress, registry)))
                case = Case.create(scenario, spec, stack, run_dir, run_id, progress, registry)
                # a node a fault left changed is put back for the next case (restart-broker's lease:
                # a broker restart, about 6 s), not after the last one on services about to stop
                try:
                    done = run_case(case, restore=not (own and i == len(scenario.cases) - 1))
                except RunAborted as exc:   # the case it was in is said, undecided, with its files
                    result.cases.append(interrupted(case, str(exc)))
                    raise
                reference_run.attach(done, reference)
                if scenario.measure.ceiling:   # a reference of the run's own, after the case
                    references.with_ceiling(case, done)
                result.cases.append(done)
        sweep = watermark_sweep(scenario, result.cases)
        if sweep:
            result.sections["watermark_sweep"] = sweep
        # a fault that never came because its case had failed (a dead driver ends the workload) is
        # the failure's consequence, not a schedule that did not fit the run
        result.status = ("schedule-missed" if any(c.missed and c.verdict.status != FAIL for c in result.cases)
                         else "completed")
    except RunAborted as exc:
        result.status, result.error = "aborted", str(exc)
        raise
    except Exception as exc:
        result.status, result.error = "error", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        result.ended_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        summary_mod.write(run_dir.path, result)
    return result


def no_leftovers(result: RunResult, run_dir: RunDir, run_id: str, progress: Progress) -> list[str]:
    """After the run's services stopped: any process still carrying the run's id is named in
    the summary (`leftovers`) and killed. An empty list is the proof nothing was left."""
    from harness import procs

    left = procs.of_run(run_id)
    named = [procs.describe(p) for p in left]
    procs.kill_stragglers(left, timeout_s=5)
    if named:
        progress.step(f"{len(named)} process(es) of the run outlived its services, killed now: "
                      + "; ".join(named))
    result.sections["leftovers"] = named
    summary_mod.write(run_dir.path, result)
    return named


def watermark_sweep(scenario, cases: list[CaseResult]) -> list[dict] | None:
    """Latency against completeness, when the cases differ in watermark delay only by a
    [matrix] watermark axis (or by hand): per delay, the event-time p99 and the share of
    the events sent that were dropped as late. None when there is one delay or none."""
    delays = {c.name: (c.pipeline or scenario.pipeline).values.get("watermark_ms") for c in scenario.cases}
    if len({d for d in delays.values() if d is not None}) < 2:
        return None
    rows = []
    for case in cases:
        delay, events = delays.get(case.name), case.events
        if delay is None:
            continue
        sent = events.get("produced") or 0
        rows.append({"case": case.name, "watermark_ms": delay,
                     "event_time_p99_ms": case.latency.p99,
                     "dropped_late": events["dropped_late"],
                     "late_share": round(events["dropped_late"] / sent, 5) if sent else None})
    return sorted(rows, key=lambda r: r["watermark_ms"])


def preflight(scenario) -> None:
    """Check the environment before anything starts or is written: java, the jars,
    pyspark's version, PostgreSQL's binaries. Raises EnvironmentProblem with the fix. Then
    a job's plan, on an empty stream in a Spark process of its own (job_check.py): what the
    batch oracle cannot mirror and a watermark off the event-time column are refused
    (ScenarioError) before any service starts."""
    from harness.services.postgres import find_bindir

    jvm.java()
    environment.check_spark_version()
    jvm.spark_connector_jars()
    artifacts = {a for case in scenario.cases for a in sink_needs(case.sink)[0]}
    if scenario.source.delta:
        artifacts.add("delta")
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
        toxiproxy_build.toxiproxy()
    job_check.check(scenario)


def _started(scenario, run_id: str) -> RunResult:
    return RunResult(
        run_id=run_id, status="error",
        scenario={"name": scenario.name, "path": str(scenario.path), "quick": scenario.quick,
                  "repeat": max((c.repeat for c in scenario.cases), default=1),
                  "hash": scenario.fingerprint()},
        environment=environment.describe(scenario.services.spark.master,
                                         scenario.services.kafka.bootstrap_servers is None),
        started_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"))


def run_case(case: Case, restore: bool = True) -> CaseResult:
    """Generator -> Kafka -> Spark driver -> sink, then the checker: one case's result.

    A driver that dies fails this case, with how it died and how far the case had got;
    the checker still reads what the sink holds, and the next case runs."""
    case.dir.mkdir(parents=True, exist_ok=True)
    broken = case.sink_broken()
    if broken is not None:   # before any driver starts: the driver would build it the same way
        case.failure = broken
        case.progress.step(f"FAILED: case {case.name}: {broken}")
        return _described(case, case_result(case, FaultRunner(case.scenario.faults, case.targets(),
                                                              say=case.progress.step, clock=case.pace), None))
    case.mount_storage()   # the storage faults' file system, before the faults' targets name it
    schedule = FaultRunner(case.scenario.faults, case.targets(), say=case.progress.step, clock=case.pace,
                           fresh_restarts=case.spec.guarantee == "at-most-once", mark=case.sent_offsets,
                           snapshot=stages.state_snapshot(case))
    sampler = resources.Sampler(case.registry, case.files.resources)
    if case.scenario.measure.enabled:
        sampler.start()
    watch = incidents.Watch(case.registry, case.files).start()
    kept = journal.Journal(lambda: case.checkpoints).start()
    try:
        stages.start_driver(case)
        stages.offer_load(case, schedule)
        if case.failure is None:
            stages.drain(case)
            case.stopping_ms = time.time() * 1000
            asked = stages.ask_state_read(case, schedule)
            case.spark.request_stop(timeout_s=STOP_WITH_STATE_READ_S if asked else STOP_S)
    except DriverDied as exc:
        stages.driver_died(case, exc)
    except BaseException:
        schedule.stop(aborted=True)   # SIGCONT, unlock, no restart: the registry stops the rest
        sampler.stop()
        watch.stop()
        kept.stop()
        stages.stop_recording(case)
        raise
    schedule.stop(restore=restore)
    used = sampler.stop()
    watch.stop()
    kept.stop()
    stages.stop_recording(case)   # after the watch: its exit is no incident of the case
    if case.failure is not None:
        case.spark.stop()
    case.stop_appender()
    case.unmount_storage()
    return _described(case, case_result(case, schedule, used))


def _described(case: Case, result: CaseResult) -> CaseResult:
    """The case's sections of this module's: how long its workload was sent and why
    (`workload`), and its references (`references`: the restart floor; a ceiling only with
    [measure] ceiling, added by run())."""
    if case.workload is not None:
        result.sections["workload"] = case.workload
    result.sections["references"] = references.references(case)
    return result
