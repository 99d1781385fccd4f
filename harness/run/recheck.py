"""`python -m harness check RUN_DIR`: every oracle of a run, run again from its directory alone,
as Jepsen's `analyze` checks a stored history again.

Each case is checked as run/collect.py checked it, from what the case left: ground truth
(truth/), the sink's rows as a reader saw them (sink.parquet), Spark's checkpoints and their
journal, the job's plan and the records its stream read (records/, workloads/recorder.py);
with what summary.json says the case went through (its faults, what they deleted, a driver that
died, a reference run that did not pass), the verdict is judged by the same rules. Nothing
here needs Kafka, PostgreSQL or Spark's cluster; a job's batch oracle starts Spark on local[2].

Every file is found from the run directory, wherever it now lies: the scenario's values are
scenario.effective.json's, not the scenario file's (whose replayed records and modules may
not be beside its copy). The user's code (a job, a custom oracle) is where the run had it, or
under `imports`.

The state check and the timers' check run again from what the run left (`evidence_again`): the
state the run read after each batch it chose (its driver's reads, or its own reader's, in
<case>/state-check/), judged against the oracle again at those batches, and the firings the
workers wrote (<case>/timers/). What cannot be run again is carried from summary.json into the
verdict with why (`carried_problems`), never dropped.

The re-check writes RUN_DIR/check/<stamp>/: check.json (each case's verdict in the run and in
the re-check, and whether they agree) and cases/<case>/: oracle/ (a job oracle's files),
state-check/ and timers-check/. It never writes over the run's own files: summary.json stays as
the run wrote it.
"""

from __future__ import annotations

import json
import secrets
import time
import traceback
from dataclasses import dataclass, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import cast

from harness import check as checker
from harness.check import checkpoint
from harness.check.batch_oracle import spark_run
from harness.check.large import RunFiles
from harness.check.result import CheckResult
from harness.errors import HarnessError
from harness.results import summary as summary_mod
from harness.results import verdict as verdicts
from harness.results.model import CaseResult, FaultRecord, RunResult
from harness.results.rundir import CaseDir, RunDir
from harness.run.collect import deleted_ranges, without_deleted
from harness.run.schedule import FaultRunner
from workloads.errors import Problem

CHECK_DIR = "check"


@dataclass
class Rechecked:
    """One case: its verdict in the run and now, and why it was not checked again (if not)."""

    case: CaseResult                   # the run's case with the re-check's events and verdict
    before: str                        # the run's verdict status
    why_not: str | None = None         # not checked again: the run's verdict stands, and why

    def to_json(self) -> dict:
        return {"case": self.case.name, "run": self.before, "recheck": self.case.verdict.status,
                "agree": self.before == self.case.verdict.status, "rechecked": self.why_not is None,
                "why_not": self.why_not, "detail": self.case.verdict.detail, "events": self.case.events}


def recheck(run_dir: Path, imports: tuple[str, ...] = ()) -> tuple[RunResult, list[Rechecked], Path]:
    """Every case of the run at `run_dir` checked again; the run's result with the re-checked
    verdicts, each case's account, and the directory the re-check wrote."""
    run_dir = Path(run_dir)
    run = _load(run_dir)
    effective = _effective(run_dir)
    from workloads import plugins

    plugins.add_import_paths([*imports, *map(str, effective.get("imports") or [])])
    out = run_dir / CHECK_DIR / f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(2)}"
    out.mkdir(parents=True)
    done = []
    with spark_run.rechecking(out / "cases", imports):
        for case in run.cases:
            done.append(_case(RunDir(run_dir).case(case.name), case, pipeline_of(effective, case)))
    again = replace(run, cases=[d.case for d in done])
    (out / "check.json").write_text(json.dumps({
        "run_id": run.run_id, "checked_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "run": run.verdict_status, "recheck": again.verdict_status,
        "cases": [d.to_json() for d in done]}, indent=2) + "\n")
    return again, done, out


def _load(run_dir: Path) -> RunResult:
    path = run_dir / "summary.json"
    if not path.is_file():
        raise HarnessError(f"{run_dir}: no summary.json there",
                           "give the run directory a `python -m harness run` wrote")
    try:
        return summary_mod.load(path)
    except ValueError as exc:   # a schema version this harness does not know
        raise HarnessError(str(exc), "check it with a harness that knows that schema version") from None


def _effective(run_dir: Path) -> dict:
    path = RunDir(run_dir).effective
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise HarnessError(f"{path}: cannot read the values the run used ({exc})",
                           "give a run directory written by a harness that keeps "
                           "scenario.effective.json") from None


def pipeline_of(effective: dict, case: CaseResult):
    """The case's pipeline as the run had it, rebuilt from scenario.effective.json: the case's own
    [cases.pipeline], else the scenario's (a hunt's or a repeat's case by its series' name)."""
    own = {c["name"]: c.get("pipeline") for c in effective.get("cases") or []}
    raw = own.get(case.name) or own.get(case.series) or effective["pipeline"]
    return _pipeline(raw)


def _pipeline(raw: dict):
    from harness.scenario.job import JOB, JobSparkSettings, JobSpec
    from harness.scenario.model import Pipeline, SparkSettings

    cls, spark_cls = (JobSpec, JobSparkSettings) if raw.get("kind") == JOB else (Pipeline, SparkSettings)
    given = raw.get("spark") or {}
    spark = spark_cls(**{f.name: given[f.name] for f in fields(spark_cls) if f.name in given})
    kw = {f.name: raw[f.name] for f in fields(cls) if f.name in raw and f.name != "spark"}
    kw.update(values=MappingProxyType(dict(raw.get("values") or {})),
              columns=MappingProxyType(dict(raw.get("columns") or {})), key=tuple(raw.get("key") or ()))
    return cls(**kw, spark=spark)


def _case(files: CaseDir, case: CaseResult, pipeline) -> Rechecked:
    """One case checked again (or, when the run had nothing to check, its verdict as it was)."""
    from workloads.generator import truth as truth_mod
    from workloads.sinks import CUSTOM_SINK, SINKS

    before = case.verdict.status
    if not truth_mod.has_parts(files.truth):
        return Rechecked(case, before, "nothing was sent: no ground truth to check against")
    if case.sink != CUSTOM_SINK and not SINKS[case.sink].checked:
        return Rechecked(case, before, "a speed run: its sink keeps nothing to read back")
    if not files.sink.exists():
        return Rechecked(case, before, f"its sink's rows were never read ({files.sink.name} is missing: "
                                       "the sink's read() raised)")
    deleted = deleted_ranges(case.faults)
    run_files = RunFiles(files.truth, files.sink, deleted)
    lean = checker.checks_from_files(pipeline, run_files)
    truth = truth_mod.read(files.truth, checker.truth_columns(pipeline), categorical=lean)
    truth, gone = without_deleted(truth, deleted)
    import pandas as pd

    sink = pd.read_parquet(files.sink)
    batches = checkpoint.read_queries(_checkpoints(files), str(case.sections.get("topic", "")))
    try:
        checked = checker.check(pipeline, truth, sink, batches, run_files)
    except Problem:
        raise   # the user's oracle returned the wrong shape: named with the fix, exit 2
    except Exception as exc:  # noqa: BLE001 - as the run: an oracle that raises leaves the case undecided
        error = spark_run.written_dir(files.path) / "checker-error.txt"
        error.parent.mkdir(parents=True, exist_ok=True)
        error.write_text(traceback.format_exc())
        why = f"the checker raised {type(exc).__name__}: {exc}; traceback in {error}"
        return Rechecked(replace(case, verdict=verdicts.undecided(case.guarantee, why, case.error)), before)
    if gone:
        checked.counts.update(produced=checked.counts["produced"] + gone, deleted_before_read=gone)
    problems, notes = evidence_again(files, case, pipeline, truth, batches)
    verdict = _judge(case, checked, problems)
    for note in notes:
        verdict.detail += f"; {note}"
    return Rechecked(replace(case, events=checked.counts, verdict=verdict), before)


def _checkpoints(files: CaseDir) -> list[Path]:
    """The case's queries' checkpoints in order (at-most-once's restarts start fresh ones)."""
    found, index = [], 0
    while files.fresh_checkpoint(index).is_dir():
        found.append(files.fresh_checkpoint(index))
        index += 1
    return found


class _Recorded:
    """The faults as the run recorded them, read by FaultRunner.problems as its own records: one
    statement of which fault records fail a case, shared with the run."""

    def __init__(self, faults: list[FaultRecord]):
        self.faults = faults

    def records(self) -> list[FaultRecord]:
        return self.faults


def evidence_again(files: CaseDir, case: CaseResult, pipeline, truth, batches) -> tuple[list[str], list[str]]:
    """The run's state check and timers' check, run again from the run's directory: the
    problems they find now, and notes for the verdict. The state is judged at the batches the
    run checked (summary.json's `state_check.checked`), from the reads the run left, and the
    timers from the firings its workers wrote; a check that cannot run again carries the run's
    finding (`carried_problems`), with why."""
    from harness.check import state_check, timers

    problems: list[str] = []
    notes: list[str] = []
    state = case.sections.get("state_check") or {}
    # the reads made before each fault are judged again from their own directories (state_check._before)
    wanted = {int(c["batch"]): str(c.get("after") or "final") for c in state.get("checked") or []
              if not c.get("before")}
    if wanted:
        try:
            seen = state_check.check(files.path, pipeline, truth, batches, case.faults, 0.0,
                                     _checkpoints(files), wanted=wanted)
        except Exception as exc:  # noqa: BLE001 - as the run: a check that cannot run decides nothing
            seen = None
            notes.append(f"the state check did not run again ({type(exc).__name__}: {str(exc)[:200]})")
        judged = {int(c["batch"]) for c in seen.checked} if seen is not None else set()
        if seen is not None:
            problems += [p for p in [seen.problem()] if p]
            notes.append(f"the state judged again after batch(es) {', '.join(map(str, sorted(judged)))}: "
                         f"{seen.count:,} value(s) diverged")
        if seen is None or not set(wanted) <= judged:   # what was not judged again keeps the run's word
            if seen is not None:
                notes.append(f"batch(es) {', '.join(map(str, sorted(set(wanted) - judged)))} of the run's "
                             "state check were not judged again")
            problems += carried_problems(case, state=True, timers=False)
    else:
        problems += carried_problems(case, state=True, timers=False)
    try:
        fired = timers.check(files.path, pipeline, truth, batches)
    except Exception as exc:  # noqa: BLE001 - as above
        fired = None
        notes.append(f"the timers' check did not run again ({type(exc).__name__}: {str(exc)[:200]})")
    if fired is not None:
        problems += [p for p in [fired.problem()] if p]
    else:
        problems += carried_problems(case, state=False, timers=True)
    return problems, notes


def carried_problems(case: CaseResult, state: bool = True, timers: bool = True) -> list[str]:
    """What the run's state check and timers' check found (summary.json's `state_check` and
    `timers`), carried into the re-check's verdict when they cannot run again (the run read no
    state, its timer log is gone, a check failed now): a re-check that left them out said PASS
    of a run they had failed."""
    said = []
    found = case.sections.get("state_check") or {}
    if state and found.get("diverged"):
        said.append(f"the state diverged from the oracle's: {found['diverged']:,} values (the run's state "
                    "check; not judged again)")
    fired = case.sections.get("timers") or {}
    if timers and (fired.get("fired_twice") or fired.get("never_fired")):
        said.append(f"transformWithState's timers: {fired.get('fired_twice') or 0:,} fired in more than "
                    f"one committed batch, {fired.get('never_fired') or 0:,} the watermark passed never "
                    "fired (the run's timers check; not run again)")
    return said


def _judge(case: CaseResult, checked: CheckResult, evidence: list[str]):
    """The verdict by run/collect.py's rules (_judge): the counts, the oracle's problems and
    unknowns, and what the run recorded of the case: a driver that died, faults not observed,
    not landed or refused, faults missed, a reference run that did not pass."""
    from harness.results.verdict import PASS

    c = checked.counts
    problems = [case.error] if case.error else []
    problems += FaultRunner.problems(cast(FaultRunner, _Recorded(case.faults))) + checked.problems
    problems += evidence
    unknowns = [f"fault {f.kind} at {f.asked} never came: {f.missed}" for f in case.missed]
    unknowns += list(getattr(checked, "unknowns", ()))
    verdict = verdicts.verdict(case.guarantee, c["lost"], c["duplicated"], c["unexpected"],
                               expected_count=c["expected"], problems=problems, unknowns=unknowns)
    for note in getattr(checked, "notes", ()):
        verdict.detail += f"; {note}"
    reference = case.sections.get("reference_run")
    if reference and reference.get("status") != PASS:   # as run/reference_run.py's attach
        why = (f"the reference run ({reference.get('case')}, the case without its faults) ended "
               f"{reference.get('status')}, so its sink is no reference")
        verdict = verdicts.undecided(case.guarantee, why, failure=case.error)
    return verdict
