"""The runs compare can compare: loaded from a run directory, a summary.json or a directory of
baselines, and refused when unlike (exit 2, each difference named): another workload (quick
against full, another scenario hash, other event counts) or another machine (CPU model, usable
CPUs, memory: harness/history/machine.py), whose difference would read as a regression.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from harness.errors import HarnessError
from harness.results import figures
from harness.results import summary as summary_mod
from harness.results.machine import Machine, differences
from harness.results.model import CaseResult, RunResult


def load(path: Path) -> RunResult:
    """A run's summary from its directory or its summary.json (any version this harness reads)."""
    path = Path(path)
    file = path / "summary.json" if path.is_dir() else path
    if not file.exists():
        raise HarnessError(f"{path}: no summary.json there", "give a run directory or a summary.json file")
    try:
        return summary_mod.load(file)
    except ValueError as exc:
        raise HarnessError(str(exc),
                           "compare runs written by a harness that knows their schema version") from None


def load_base(path: Path, new: RunResult) -> RunResult:
    """BASE: a run, or a directory of baselines (`*.summary.json`, as results/baseline/ holds),
    of which the one of NEW's scenario (its name, quick or not, its hash) is picked."""
    path = Path(path)
    if not path.is_dir() or (path / "summary.json").exists():
        return load(path)
    files = sorted(path.glob("*.summary.json"))
    if not files:
        raise HarnessError(f"{path}: no summary.json there, nor any baseline (*.summary.json)",
                           "give a run directory, a summary.json file, or a directory of baselines")
    why = {f.name: workload_difference(load(f), new) for f in files}
    matching = [f for f in files if why[f.name] is None]
    if len(matching) != 1:
        listed = "; ".join(f"{name}: {reason or 'matches'}" for name, reason in why.items())
        problem = (f"{path}: {'no' if not matching else 'more than one'} baseline matches the new run's "
                   f"workload ({listed})")
        raise HarnessError(problem, "pass the baseline file itself, or regenerate the baselines from "
                                    "today's scenarios (results/baseline/README.md)")
    return load(matching[0])


def workload_difference(base: RunResult, new: RunResult) -> str | None:
    """How two runs' workloads differ, or None when they are the same: the scenario, quick
    against full, the scenario's hash (where both record one), a case's events."""
    b, n = base.scenario, new.scenario
    if b.get("name") != n.get("name"):
        return f"scenario {b.get('name')!r} against {n.get('name')!r}"
    if bool(b.get("quick")) != bool(n.get("quick")):
        kinds = ["quick" if s.get("quick") else "full" for s in (b, n)]
        return f"a {kinds[0]} run against a {kinds[1]} one"
    if b.get("hash") and n.get("hash") and b["hash"] != n["hash"]:
        return f"scenario hash {b['hash']} against {n['hash']} (the scenario changed)"
    base_cases = series(base)
    for name, runs in series(new).items():
        # a workload that went on past its duration while a fault was pending sent more, by design
        # (cases[].workload): its count says nothing of the scenario; the hash above does
        before = {int(c.events["produced"]) for c in base_cases.get(name, [])
                  if c.events.get("produced") and not _extended(c)}
        now = {int(c.events["produced"]) for c in runs if c.events.get("produced") and not _extended(c)}
        if before and now and before != now:
            return (f"case {name} produced {', '.join(f'{x:,}' for x in sorted(before))} events against "
                    f"{', '.join(f'{x:,}' for x in sorted(now))}")
    return None


def _extended(case: CaseResult) -> bool:
    """Whether the case's workload was sent past its duration (waiting for a fault)."""
    return bool((case.sections.get("workload") or {}).get("extended_by_s"))


def check_same_workload(base: RunResult, new: RunResult) -> None:
    """Refuse runs of different workloads: the difference would read as a regression."""
    why = workload_difference(base, new)
    if why is not None:
        raise HarnessError(f"the runs are of different workloads: {why}",
                           "compare runs of the same scenario, both quick or both full (a baseline of "
                           "the same scenario: results/baseline/)")


def machine(run: RunResult) -> Machine:
    return Machine.of(run.environment)


def check_same_machine(base: RunResult, new: RunResult) -> None:
    """Refuse runs of different machines: a slower CPU reads as a regression in every time and
    rate. Each difference is named."""
    found = differences(machine(base), machine(new))
    if found:
        travel = ", ".join(f.name for f in figures.compared() if f.travels)
        raise HarnessError(f"the runs are from different machines: {'; '.join(found)}",
                           "compare runs of one machine (a baseline measured on this one: "
                           "results/baseline/README.md), or pass --across-machines to compare their "
                           f"verdicts and the figures that travel ({travel})")


def with_repeats(first: RunResult, others: list[RunResult]) -> RunResult:
    """`first` with the cases of `others` as more runs of the same series (the confirmation
    job's interleaved runs: before, after, before, after). Each must be of the same workload
    and machine."""
    if not others:
        return first
    cases = list(first.cases)
    for other in others:
        why = workload_difference(first, other)
        if why is None and differences(machine(first), machine(other)):
            why = "; ".join(differences(machine(first), machine(other)))
        if why is not None:
            raise HarnessError(f"run {other.run_id} is unlike {first.run_id}: {why}",
                               "give runs of one scenario on one machine on each side")
        cases += other.cases
    counts: dict[str, int] = {}
    renumbered = []
    for c in cases:
        name = c.series or c.name
        counts[name] = counts.get(name, 0) + 1
        renumbered.append(replace(c, series=name, repeat=counts[name]))
    return replace(first, cases=renumbered, run_id=f"{first.run_id}+{len(others)}")


def series(result: RunResult) -> dict[str, list[CaseResult]]:
    """The cases of a run grouped by series (a repeated case's runs together), in run order."""
    out: dict[str, list[CaseResult]] = {}
    for c in result.cases:
        out.setdefault(c.series or c.name, []).append(c)
    return out
