"""The self-describing results directory of one run.

results/<run-id>/
  scenario.toml         the scenario as given
  summary.json          the contract (harness/schema/summary.schema.json)
  harness.log           the harness's own log
  services/<name>/      each shared service's config, data and log
  cases/<case>/         driver.json, driver log, status.json, progress.jsonl,
                        checkpoint/, truth/ (one Parquet part per generator process,
                        control.parquet), generator.json, sink.parquet, latency.parquet
"""

from __future__ import annotations

import secrets
import shutil
import time
from pathlib import Path

from harness.errors import HarnessError


def new_run_id(scenario_name: str) -> str:
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{scenario_name}-{secrets.token_hex(2)}"


def create(run_dir: Path, scenario_path: Path) -> Path:
    """Make the run directory with a copy of the scenario; refuses one that has content."""
    run_dir = Path(run_dir)
    if run_dir.exists() and any(run_dir.iterdir()):
        raise HarnessError(f"run directory {run_dir} already exists and is not empty",
                           "give --out a new directory: results are never overwritten")
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(scenario_path, run_dir / "scenario.toml")
    (run_dir / "services").mkdir()
    (run_dir / "cases").mkdir()
    return run_dir
