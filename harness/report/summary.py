"""summary.json: the contract every run writes (harness/schema/summary.schema.json).

Later schema versions add fields and never rename these; the loader refuses a
version it does not know.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).parent / "schema" / "summary.schema.json"

_HOLDS_IF_OBSERVED = {
    "exactly-once": {"exactly-once"},
    "at-least-once": {"exactly-once", "at-least-once"},
    "at-most-once": {"exactly-once", "at-most-once"},
}


@cache
def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


def validate(summary: dict) -> None:
    """Raise ValueError listing every way `summary` breaks the schema."""
    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(schema()).iter_errors(summary), key=lambda e: list(e.path))
    if errors:
        lines = [f"  {'/'.join(map(str, e.path)) or '(top)'}: {e.message}" for e in errors]
        raise ValueError("summary.json does not follow its schema:\n" + "\n".join(lines))


def observed_guarantee(lost: int, duplicated: int) -> str:
    """The strongest guarantee the counts are consistent with."""
    if lost == 0 and duplicated == 0:
        return "exactly-once"
    if lost == 0:
        return "at-least-once"
    return "at-most-once" if duplicated == 0 else "none"


def guarantee_holds(expected: str, observed: str) -> bool:
    return observed in _HOLDS_IF_OBSERVED[expected]


def verdict(expected: str, lost: int, duplicated: int, unexpected: int, expected_count: int = 0,
            problems: list[str] | tuple[str, ...] = ()) -> dict:
    """The verdict object. Output that ground truth cannot explain never holds, nor does a
    case with `problems` (a wrong sum, a dead driver); when it fails, `detail` says first
    what failed, then the counts."""
    observed = observed_guarantee(lost, duplicated)
    failures = list(problems)   # the cause (a dead driver, a wrong sum) before its effect
    if not guarantee_holds(expected, observed):
        failures.append(f"{expected} did not hold (observed {observed})")
    if unexpected:
        failures.append(f"{unexpected:,} unexpected in the sink")
    counts = (f"{lost:,} lost, {duplicated:,} duplicated, {unexpected:,} unexpected "
              f"of {expected_count:,} expected")
    if failures:
        detail = f"FAILED: {'; '.join(failures)}. Counts: {counts}"
    else:
        detail = f"{expected} held (observed {observed}): {counts}"
    return {"expected": expected, "observed": observed, "holds": not failures, "detail": detail}


def unchecked(expected: str, failure: str | None) -> dict:
    """The verdict of a speed run into a sink with nothing to read back: delivery is not
    judged; it fails only when the run itself failed."""
    if failure:
        return {"expected": expected, "observed": "unchecked", "holds": False, "detail": f"FAILED: {failure}"}
    return {"expected": expected, "observed": "unchecked", "holds": True,
            "detail": "not checked: the sink keeps nothing to read back (a speed run)"}


def lag_recovered_s(case: dict) -> float | None:
    """A case's recovery time: the longest any fault's backlog took to drain (None: no
    fault, or it never drained), else backpressure.recovery_s."""
    times = [f.get("recovery", {}).get("lag_recovered_s") for f in case.get("faults", [])]
    times = [t for t in times if t is not None]
    return max(times) if times else (case.get("backpressure") or {}).get("recovery_s")


def write(run_dir: Path, summary: dict) -> Path:
    """Validate, then write run_dir/summary.json atomically. A summary of another run is
    never overwritten."""
    validate(summary)
    path = Path(run_dir) / "summary.json"
    if path.exists() and json.loads(path.read_text()).get("run_id") != summary["run_id"]:
        raise FileExistsError(f"{path} belongs to another run; results are never overwritten")
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(summary, indent=2) + "\n")
    os.replace(tmp, path)
    return path


def load(path: Path) -> dict:
    """Read a summary, refusing a schema version this harness does not know."""
    summary = json.loads(Path(path).read_text())
    version = summary.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ValueError(f"{path}: schema_version {version!r} is not supported (this harness reads "
                         f"{SCHEMA_VERSION})")
    return summary
