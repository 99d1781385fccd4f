"""Inputs from a case's directory: what `build` needs, read back from the files a finished
run leaves (docs/results.md, "The run directory"), so that findings can be made again from
a run directory alone."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path
from types import MappingProxyType

import pandas as pd

from harness.check.result import CheckResult
from harness.findings.inputs import Inputs
from harness.results.model import FaultRecord, Incident
from harness.results.rundir import CaseDir
from harness.scenario.model import Pipeline, SparkSettings


def load(case_dir: Path, checked: CheckResult | None = None) -> Inputs:
    """The Inputs of the case in `case_dir` (results/<run>/cases/<case>). Its faults,
    incidents and Spark's dropped count come from the run's summary.json when there is one;
    its pipeline from scenario.effective.json; `checked` is the oracle run again unless given."""
    from harness import check as checker
    from harness import metrics
    from harness.check import checkpoint
    from harness.check.large import RunFiles
    from workloads.generator import truth as truth_mod

    case = CaseDir(Path(case_dir))
    run_dir = case.path.parent.parent
    entry = _summary_case(run_dir, case.path.name)
    pipeline = _pipeline(run_dir, case.path.name)
    topic = entry.get("topic") or json.loads(case.driver_config.read_text())["topic"]
    faults = [FaultRecord.from_json(f) for f in entry.get("faults", [])]
    files = RunFiles(case.truth, case.sink, [d for f in faults for d in f.details.deleted_ranges()])
    # a large run is checked from its files, and its truth read lean, as collect does
    lean = checker.checks_from_files(pipeline, files)
    truth = truth_mod.read(case.truth, checker.truth_columns(pipeline) if lean else None, categorical=lean)
    sink = pd.read_parquet(case.sink)
    checkpoints = checkpoint_dirs(case)
    batches = checkpoint.read_queries(checkpoints, topic)
    progress = metrics.read_progress(case.progress)
    if checked is None:
        checked = checker.check(pipeline, truth, sink, batches, files)
    dropped = entry.get("spark_dropped_by_watermark")
    return Inputs(truth=truth, sink=sink, batches=batches, checked=checked, pipeline=pipeline,
                  faults=faults,
                  incidents=[Incident.from_json(i) for i in entry.get("incidents", [])],
                  checkpoints=checkpoints, progress=progress,
                  t0_s=float(truth.loc[~truth["control"], "sent_ms"].min()) / 1000.0,
                  spark_dropped_by_watermark=(metrics.dropped_by_watermark(progress) if dropped is None
                                              else dropped))


def checkpoint_dirs(case: CaseDir) -> list[Path]:
    """checkpoint/, then checkpoint-1/, checkpoint-2/... as they exist."""
    more = [p for p in case.path.glob("checkpoint-*") if re.fullmatch(r"checkpoint-\d+", p.name)]
    return [case.checkpoint, *sorted(more, key=lambda p: int(p.name.split("-")[1]))]


def _summary_case(run_dir: Path, name: str) -> dict:
    path = run_dir / "summary.json"
    if not path.exists():
        return {}
    cases = json.loads(path.read_text()).get("cases", [])
    return next((c for c in cases if c.get("name") == name), {})


def _pipeline(run_dir: Path, name: str) -> Pipeline:
    """The case's pipeline as scenario.effective.json records it (its own, else the scenario's)."""
    effective = json.loads((run_dir / "scenario.effective.json").read_text())
    own = next((c.get("pipeline") for c in effective.get("cases", []) if c.get("name") == name), None)
    return pipeline_from_json(own or effective["pipeline"])


def pipeline_from_json(d: dict) -> Pipeline:
    """A Pipeline from its JSON form (scenario.effective.json's "pipeline")."""
    known = {f.name for f in fields(SparkSettings)}
    spark = SparkSettings(**{k: v for k, v in (d.get("spark") or {}).items() if k in known and k != "conf"})
    return Pipeline(kind=d["kind"], values=MappingProxyType(dict(d.get("values") or {})),
                    trigger_ms=int(d.get("trigger_ms", 1000)), trigger=d.get("trigger", "processing-time"),
                    build=d.get("build"), oracle=d.get("oracle"), key=tuple(d.get("key") or ()),
                    columns=MappingProxyType(dict(d.get("columns") or {})), spark=spark)
