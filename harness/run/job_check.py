"""Refusals decided by what runs, before any service starts: each distinct job of a scenario
built on an empty stream of its input in a Spark process of its own
(`python -m workloads.pipelines.job_check`; the harness never runs Spark itself), and
refused by its analysed plan.

    check(scenario) -> [(job, its scenario key, what its plan showed), ...], or raises ScenarioError

Refused, with exit 2, the reason and the fix:
  - oracle = "batch": what a batch run cannot mirror (workloads/pipelines/determinism.py:
    Spark's own non-deterministic flag, its clock, the Python functions' bodies; processing-
    time timeouts and timers), the driver's own check, so that it no longer refuses after
    the services started;
  - any oracle: a watermark not on the replay's event-time column (event_time.py), from which
    the harness decides which records came late.
A job that does not build on an empty stream is not refused here (it may need what the run
starts): the driver meets its error, or checks its plan, when it starts.

One Spark process per run checks every job of the scenario; a job checked once in this
process (a pytest session, a hunt's runs) is not checked again while its module is unchanged.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.errors import EnvironmentProblem, ScenarioError
from harness.jvm import quick_submit_args
from harness.paths import REPO_ROOT
from harness.scenario.job import FIX, JobSpec

log = logging.getLogger(__name__)
TIMEOUT_S = 300.0
_CHECKED: dict[str, dict] = {}   # request's key -> its answer, for this process's later runs


def check(scenario) -> list[tuple[JobSpec, str, dict]]:
    """Check every job of `scenario` (see the module's docstring): raises ScenarioError on the
    first refused; returns `findings`."""
    found = findings(scenario)
    for spec, field, answer in found:
        _refuse(spec, field, answer)
    _refuse_async_state(scenario, found)
    return found


def _refuse_async_state(scenario, found: list[tuple[JobSpec, str, dict]]) -> None:
    """A job that keeps state, in a case with async progress tracking ([matrix] async_progress,
    harness/scenario/state_matrix.py): Spark would refuse it at its first batch (sql/core/.../
    AsyncProgressTrackingMicroBatchExecution.scala, checkNotStatefulStreamingQuery: a
    StateStoreWriter in the plan); its plan says so before anything starts."""
    facts = {json.dumps(_job(spec), sort_keys=True): answer.get("facts") or {} for spec, _, answer in found}
    for case in scenario.cases:
        pipeline = case.pipeline or scenario.pipeline
        if not (isinstance(pipeline, JobSpec) and pipeline.spark.async_progress):
            continue
        operators = facts.get(json.dumps(_job(pipeline), sort_keys=True), {}).get("operators")
        if operators:
            from harness.scenario.state_matrix import ASYNC_FIX

            raise ScenarioError(
                f"matrix case {case.name}: async_progress = true with the job {pipeline.build!r}, whose plan "
                f"keeps state ({', '.join(operators)}): Spark says \"Stateful streaming queries does not "
                "support async progress tracking at this moment\" (AsyncProgressTrackingMicroBatchExecution; "
                "checked in the job's plan before anything started)", ASYNC_FIX)


def findings(scenario) -> list[tuple[JobSpec, str, dict]]:
    """Each distinct job of `scenario`, the scenario key that names it, and what its plan
    showed (job_check.py's answer for it: refusals, watermark, facts, or error)."""
    specs = list(_jobs(scenario).values())
    if not specs:
        return []
    request = {"import_paths": [str(p) for p in scenario.imports or (scenario.path.parent,)],
               **_session(scenario), "jobs": [_job(spec, field) for spec, field in specs]}
    key = _key(request)
    answer = _CHECKED.get(key)
    if answer is None:
        answer = _run(request)
        _CHECKED[key] = answer
        log.info("checked %d job(s) before start in %.1f s (Spark session %.1f s)", len(specs),
                 answer.get("process_s", 0.0), answer.get("session_s", 0.0))
    return [(spec, field, found) for (spec, field), found in zip(specs, answer["jobs"], strict=True)]


def _jobs(scenario) -> dict[str, tuple[JobSpec, str]]:
    """The distinct jobs the scenario's cases run (a case's own, else the scenario's), each
    with the scenario key that names it."""
    out: dict[str, tuple[JobSpec, str]] = {}
    for i, case in enumerate(scenario.cases):
        pipeline, where = (case.pipeline, f"cases[{i}].pipeline") if case.pipeline else (scenario.pipeline,
                                                                                          "pipeline")
        if isinstance(pipeline, JobSpec):
            field = f"{where}.{'from_kafka' if pipeline.reads == 'kafka' else 'build'}"
            out.setdefault(json.dumps(_job(pipeline), sort_keys=True), (pipeline, field))
    return out


def _job(spec: JobSpec, field: str = "") -> dict:
    return {"job": spec.build, "field": field, "reads": spec.reads, "schema": spec.schema,
            "columns": dict(spec.columns), "oracle": spec.oracle, "event_time": spec.event_time}


def _session(scenario) -> dict:
    """The jars and settings of the scenario's sinks and source that a job may read at build
    time (a static Delta table): as its driver has them."""
    from harness import jvm
    from workloads.sinks import sink_needs

    artifacts = {a for case in scenario.cases for a in sink_needs(case.sink)[0]}
    conf: dict[str, str] = {}
    for case in scenario.cases:
        conf.update(sink_needs(case.sink)[1])
    if scenario.source.delta:
        artifacts.add("delta")
        conf.update(sink_needs("delta")[1])
    jars = [str(j) for a in sorted(artifacts) for j in jvm.spark_extra_jars(a)]
    return {"jars": list(dict.fromkeys(jars)), "conf": conf}


def _key(request: dict) -> str:
    """The request and the job modules' bytes: a job edited since is checked again."""
    digest = hashlib.sha256(json.dumps(request, sort_keys=True).encode())
    for spec in request["jobs"]:
        module = spec["job"].partition(":")[0].replace(".", "/")
        for base in request["import_paths"]:
            path = Path(base) / f"{module}.py"
            if path.is_file():
                digest.update(path.read_bytes())
                break
    return digest.hexdigest()


def _run(request: dict) -> dict:
    from harness.services.spark import make_local_dirs, scratch_env

    scratch = make_local_dirs()
    work = Path(tempfile.mkdtemp(prefix="harness-job-check-"))
    env = {**os.environ, **scratch_env(scratch)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [*request["import_paths"], str(REPO_ROOT),
                                                      env.get("PYTHONPATH")]))
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # a JVM that lives seconds and analyses a plan: the client compiler alone, the serial
    # collector. Measured on examples/my-job under a load average of 6: 25.6 s and 36.2 s
    # without, 11.5 s and 17.2 s with (issue 47: the check may add at most 10 s to a case)
    env.setdefault("PYSPARK_SUBMIT_ARGS", quick_submit_args())
    (work / "request.json").write_text(json.dumps({**request, "out": str(work / "check.json")}, indent=2))
    began = time.perf_counter()
    try:
        with (work / "check.log").open("w") as sink:
            command = [sys.executable, "-m", "workloads.pipelines.job_check", str(work / "request.json")]
            proc = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=work,
                                  timeout=TIMEOUT_S, start_new_session=True, check=False)
        if proc.returncode != 0:
            tail = (work / "check.log").read_text(errors="replace").splitlines()[-15:]
            raise EnvironmentProblem(
                f"checking the job's plan before start: its Spark process exited with {proc.returncode}:\n"
                + "\n".join(f"    {line}" for line in tail),
                "run `python -m workloads.pipelines.job_check` as the log says, or fix what it names")
        answer = json.loads((work / "check.json").read_text())
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"checking the job's plan before start took over {TIMEOUT_S:.0f} s",
                                 "free the machine (a local Spark session should start in seconds)") from None
    finally:
        for path in [*scratch, work]:
            shutil.rmtree(path, ignore_errors=True)
    answer["process_s"] = round(time.perf_counter() - began, 3)
    return answer


def _refuse(spec: JobSpec, field: str, found: dict) -> None:
    if found.get("invalid"):
        raise ScenarioError(found["invalid"], found.get("fix", ""))
    if found.get("error"):
        log.warning("%s = %r did not build on an empty stream before start (%s): the driver checks its "
                    "plan when it starts", field, spec.build, found["error"])
        return
    if found.get("refusals"):
        raise ScenarioError(f"{field} = {spec.build!r}: {'; '.join(found['refusals'])}: a batch run cannot "
                            "mirror it (checked in the job's plan before anything started)", FIX)
    if found.get("watermark"):
        column = spec.event_time
        raise ScenarioError(
            f"{field} = {spec.build!r}: {'; '.join(found['watermark'])}. The harness decides which records "
            f"came late from `{column}` (the replay's event_time), so the watermark must be on it",
            f'put the watermark on `{column}`, or on a column computed from it alone, as in '
            f'.withColumn("at", F.timestamp_millis("{column}")).withWatermark("at", "10 seconds") '
            "(docs/your-job.md, \"Refused before anything starts\")")
