"""The harness as a library: run a scenario from Python and get its typed result, as the
pytest plugin (harness/pytest_plugin.py) does.

    from harness import api
    result = api.run("my_scenario.toml", out="runs/first", quick=True, case="eo")
    assert result.case("eo").verdict.holds, result.case("eo")   # PASS: FAIL and UNKNOWN do not hold

The run is the same as `python -m harness run`'s (a run directory that describes itself,
summary.json, report.html); it can reuse services started before (`stack`).
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.results.model import RunResult


def scenario_with(path: Path, overrides: dict[str, Any], into: Path) -> Path:
    """A copy of the scenario at `path` with `overrides` laid over its tables (workload =
    {"duration": "10s"} changes that key only), written into `into`; the original's directory
    stays on its import path, so its modules are found."""
    from harness.hunt import tomlw

    path = Path(path).resolve()
    raw = tomllib.loads(path.read_text())
    for key, value in overrides.items():
        raw[key] = _overlay(raw.get(key), value) if isinstance(value, dict) else value
    raw["imports"] = [str(path.parent), *(str((path.parent / p).resolve()) for p in raw.get("imports", []))]
    into.mkdir(parents=True, exist_ok=True)
    out = into / path.name
    out.write_text(tomlw.dumps(raw, f"{path} with {sorted(overrides)} overridden"))
    return out


def _overlay(base: Any, top: dict) -> dict:
    out = dict(base) if isinstance(base, dict) else {}
    for key, value in top.items():
        out[key] = _overlay(out.get(key), value) if isinstance(value, dict) else value
    return out


def only_cases(scenario, names: Sequence[str], flag: str = "case"):
    """`scenario` with only the cases `names` names, in the scenario's order (`run --case`, which
    may be given again). An unknown name raises ScenarioError (exit 2) naming the cases there
    are, with the closest one when a name looks misspelt."""
    from harness.errors import ScenarioError

    known = [c.name for c in scenario.cases]
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ScenarioError(f"{flag} {name!r}: {scenario.path} has no such case "
                                f"(cases: {', '.join(known)})", f"{hint}choose among {', '.join(known)}")
    return replace(scenario, cases=tuple(c for c in scenario.cases if c.name in set(names)))


def run(scenario: str | Path, out: str | Path, *, quick: bool = False,
        case: str | Sequence[str] | None = None, overrides: dict[str, Any] | None = None, registry=None,
        stack=None, progress=None, search=None) -> RunResult:
    """Run `scenario` (only `case`, a name or several, when given) into the new run directory
    `out`; the result.

    `registry` and `stack`: services of a session to reuse (none: the run starts its own and
    stops them). `search`: an object with narrow/cases, as the CLI's sustain and hunt."""
    from harness import scenario as scenario_mod
    from harness.report import html
    from harness.results import rundir
    from harness.run import runner
    from harness.services.base import Registry
    from workloads.progress import Progress

    out = Path(out)
    rundir.check_out(out)
    path = Path(scenario)
    if overrides:
        path = scenario_with(path, overrides, out.parent / f".{out.name}-scenario")
    loaded = scenario_mod.load(path, quick=quick)
    if case is not None:
        loaded = only_cases(loaded, [case] if isinstance(case, str) else list(case))
    if search is not None:
        loaded = search.narrow(loaded)
    runner.preflight(loaded)
    run_id = rundir.new_run_id(loaded.name)
    run_dir = rundir.RunDir(out).create(loaded.path, loaded.to_dict())
    progress = progress or Progress()
    own = registry is None
    registry = registry or Registry(pids_path=run_dir.pids)
    cases = None if search is None else search.cases(run_dir, run_id, progress, registry)
    try:
        if own:
            with registry:
                return runner.run(loaded, run_dir, run_id, progress, registry, cases)
        return runner.run(loaded, run_dir, run_id, progress, registry, cases, stack=stack)
    finally:
        if run_dir.summary.exists():
            html.write(run_dir.path)
