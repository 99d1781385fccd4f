"""summary.json: the contract every run writes (harness/results/schema/summary.schema.json).

Versions add fields and never rename them; a version is bumped when a field's meaning
changes (harness/results/CHANGELOG.md). This harness writes SCHEMA_VERSION and reads
every version in READS; it refuses any other.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

from harness.results.model import RunResult

SCHEMA_VERSION = 4
READS = (1, 2, 3, 4)
SCHEMA_DIR = Path(__file__).parent / "schema"
SCHEMA_PATH = SCHEMA_DIR / "summary.schema.json"


@cache
def schema(version: int = SCHEMA_VERSION) -> dict:
    path = SCHEMA_PATH if version == SCHEMA_VERSION else SCHEMA_DIR / f"summary.schema.v{version}.json"
    return json.loads(path.read_text())


def validate(summary: dict) -> None:
    """Raise ValueError listing every way `summary` breaks the schema of its version."""
    from jsonschema import Draft202012Validator

    version = summary.get("schema_version")
    if version not in READS:
        raise ValueError(f"schema_version {version!r} is not one this harness knows ({READS})")
    errors = sorted(Draft202012Validator(schema(version)).iter_errors(summary), key=lambda e: list(e.path))
    if errors:
        lines = [f"  {'/'.join(map(str, e.path)) or '(top)'}: {e.message}" for e in errors]
        raise ValueError("summary.json does not follow its schema:\n" + "\n".join(lines))


def write(run_dir: Path, result: RunResult) -> Path:
    """Validate, then write run_dir/summary.json atomically. A summary of another run is
    never overwritten."""
    summary = result.to_json(SCHEMA_VERSION)
    validate(summary)
    path = Path(run_dir) / "summary.json"
    if path.exists() and json.loads(path.read_text()).get("run_id") != summary["run_id"]:
        raise FileExistsError(f"{path} belongs to another run; results are never overwritten")
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(summary, indent=2) + "\n")
    os.replace(tmp, path)
    return path


def load(path: Path) -> RunResult:
    """Read a summary of any version in READS, refusing another."""
    summary = json.loads(Path(path).read_text())
    version = summary.get("schema_version")
    if version not in READS:
        raise ValueError(f"{path}: schema_version {version!r} is not supported (this harness reads "
                         f"{', '.join(map(str, READS))})")
    return RunResult.from_json(summary)
