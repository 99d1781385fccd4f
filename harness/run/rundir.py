"""The self-describing results directory of one run.

results/<run-id>/
  scenario.toml         the scenario as given
  scenario.effective.json  every value the run used, after --quick and --repeat and defaults
  report.html           the report (python -m harness report rebuilds it from this directory)
  summary.json          the contract (harness/schema/summary.schema.json)
  harness.log           the harness's own log
  services/<name>/      each shared service's config, data and log
  cases/<case>/         driver.json, driver log, status.json, progress.jsonl,
                        checkpoint/, truth/ (one Parquet part per generator process,
                        control.parquet), generator.json, sink.parquet
  pids.json             every pid of every service, kept up to date during the run
"""

from __future__ import annotations

import json
import secrets
import shutil
import time
from pathlib import Path

from harness.errors import HarnessError


def new_run_id(scenario_name: str) -> str:
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{scenario_name}-{secrets.token_hex(2)}"


def create(run_dir: Path, scenario_path: Path, effective: dict | None = None) -> Path:
    """Make the run directory with a copy of the scenario and, given them, the values it runs
    with (`effective`); refuses one that has content."""
    run_dir = check_out(run_dir)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(scenario_path, run_dir / "scenario.toml")
        if effective is not None:
            (run_dir / "scenario.effective.json").write_text(json.dumps(effective, indent=2) + "\n")
        (run_dir / "services").mkdir()
        (run_dir / "cases").mkdir()
    except OSError as exc:
        raise HarnessError(f"cannot create the run directory {run_dir}: {exc.strerror or exc}",
                           "give --out a directory you can write to") from None
    return run_dir


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
