"""The self-describing results directory of one run: every file it holds, named once.

results/<run-id>/                  (or --out DIR; never written over)
  scenario.toml                    the scenario as given
  scenario.effective.json          every value the run used, after --quick, --repeat, defaults
  summary.json                     the contract (harness/results/schema/summary.schema.json)
  report.html                      the report (python -m harness report rebuilds it)
  harness.log                      the harness's own log
  pids.json                        every pid of every service, kept up to date during the run
  sustain.json                     python -m harness sustain: the search
  services/<name>/                 each shared service's config, data and log
  cases/<case>/                    one case: CaseDir below

docs/results.md describes each file.
"""

from __future__ import annotations

import json
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError


@dataclass(frozen=True)
class CaseDir:
    """One case's directory."""

    path: Path

    # the driver's files (it writes them; the harness reads them)
    driver_config = property(lambda self: self.path / "driver.json")
    driver_log = property(lambda self: self.path / "spark-driver.log")
    status = property(lambda self: self.path / "status.json")
    spark_conf = property(lambda self: self.path / "spark-conf.json")
    progress = property(lambda self: self.path / "progress.jsonl")
    executors = property(lambda self: self.path / "executors.jsonl")
    # each driver's executors' stdout and stderr (local-cluster), by Spark's app id
    executor_logs = property(lambda self: self.path / "executor-logs")
    stop = property(lambda self: self.path / "STOP")
    control = property(lambda self: self.path / "control")
    # each transformWithState timer's firing, by the worker that ran it (workloads/pipelines/timer_log.py)
    timers = property(lambda self: self.path / "timers")
    # the driver JVM's clock, when a clock fault moves it (workloads/clock.py)
    driver_clock = property(lambda self: self.path / "clock" / "driver.rc")
    # the query's checkpoint; at-most-once's restarts start fresh ones beside it
    checkpoint = property(lambda self: self.path / "checkpoint")
    # ground truth and what the generator said
    truth = property(lambda self: self.path / "truth")
    generator = property(lambda self: self.path / "generator.json")
    # what the checker and the measurement wrote
    sink = property(lambda self: self.path / "sink.parquet")
    discrepancies = property(lambda self: self.path / "discrepancies.parquet")
    checker_error = property(lambda self: self.path / "checker-error.txt")
    sink_error = property(lambda self: self.path / "sink-error.txt")        # the sink's read() raised
    findings_error = property(lambda self: self.path / "findings-error.txt")
    timeline = property(lambda self: self.path / "timeline.parquet")
    batches = property(lambda self: self.path / "batches.parquet")
    resources = property(lambda self: self.path / "resources.parquet")
    lag = property(lambda self: self.path / "lag.parquet")
    processes = property(lambda self: self.path / "processes.jsonl")   # service processes that exited

    def fresh_checkpoint(self, index: int) -> Path:
        """The checkpoint of the case's index-th query (at-most-once restarts fresh)."""
        return self.checkpoint if index == 0 else self.path / f"checkpoint-{index}"

    def latency(self, kind: str) -> Path:
        """The HdrHistogram of latency `kind` (event_time, processing_time, event_time_newest)."""
        return self.path / f"latency-{kind}.hdr"


@dataclass(frozen=True)
class RunDir:
    """One run's directory."""

    path: Path

    scenario = property(lambda self: self.path / "scenario.toml")
    effective = property(lambda self: self.path / "scenario.effective.json")
    summary = property(lambda self: self.path / "summary.json")
    report = property(lambda self: self.path / "report.html")
    log = property(lambda self: self.path / "harness.log")
    pids = property(lambda self: self.path / "pids.json")
    sustain = property(lambda self: self.path / "sustain.json")
    services = property(lambda self: self.path / "services")
    cases = property(lambda self: self.path / "cases")

    def case(self, name: str) -> CaseDir:
        return CaseDir(self.cases / name)

    def create(self, scenario_path: Path, effective: dict | None = None) -> RunDir:
        """Make the directory with a copy of the scenario and, given them, the values it runs
        with (`effective`); refuses one that has content."""
        check_out(self.path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(scenario_path, self.scenario)
            if effective is not None:
                self.effective.write_text(json.dumps(effective, indent=2) + "\n")
            self.services.mkdir()
            self.cases.mkdir()
        except OSError as exc:
            raise HarnessError(f"cannot create the run directory {self.path}: {exc.strerror or exc}",
                               "give --out a directory you can write to") from None
        return self


def new_run_id(scenario_name: str) -> str:
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{scenario_name}-{secrets.token_hex(2)}"


def check_out(run_dir: Path) -> Path:
    """Refuse a run directory that is a file, lies below a file, or already holds results:
    before anything starts."""
    run_dir = Path(run_dir)
    blocker = next((p for p in [run_dir, *run_dir.parents] if p.exists()), None)
    if blocker is not None and blocker != run_dir and not blocker.is_dir():
        raise HarnessError(f"cannot create the run directory {run_dir}: {blocker} is a file",
                           "give --out a directory you can write to")
    if run_dir.exists() and not run_dir.is_dir():
        raise HarnessError(f"--out {run_dir} is a file, not a directory",
                           "give --out a new directory (results are never written over a file)")
    if run_dir.is_dir() and any(run_dir.iterdir()):
        raise HarnessError(f"run directory {run_dir} already exists and is not empty",
                           "give --out a new directory: results are never overwritten")
    return run_dir
