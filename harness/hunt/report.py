"""The hunt in the terminal, after the run's table: each run (how it ended, its wall time and
what it went to, where its plan came from), the behaviours each run showed first and the total
seen, how many runs tested nothing, the coverage, the shrinking, the smallest plan, and last the
line that reproduces it. Read from hunt.json's object alone (summary.json's `hunt`)."""

from __future__ import annotations

from faults.kinds import describe

ENDED = {"breaks": "BREAKS", "holds": "holds", "refused": "refused", "not-landed": "NOT LANDED",
         "undecided": "UNDECIDED"}


def render(hunt: dict) -> str:
    kinds = ", ".join(hunt.get("kinds", []))
    lines = [f"hunt: case {hunt['case']}, seed {hunt.get('seed')}, {hunt.get('strategy', 'covering')}, "
             f"kinds {kinds}"]
    for t in hunt.get("tried", []):
        lines += _run(t)
    lines += _totals(hunt)
    minimal = hunt.get("minimal")
    if not minimal:
        lines.append("no violation found" if not hunt.get("found") else
                     f"violation at run {hunt['found']['run']}: {describe(hunt['found']['plan'])}")
        return "\n".join(lines)
    shrunk = hunt.get("shrink") or {}
    rate = shrunk.get("flake_rate")
    not_run = shrunk.get("not_run") or 0
    tried = len(shrunk.get("steps", [])) - not_run
    lines.append(f"shrinking: {tried} candidates in {shrunk.get('runs')} runs"
                 + (f" ({not_run} not run: the budget was spent)" if not_run else "")
                 + f"; {shrunk.get('flaky')} failed only on their second run"
                 + (f" (flake rate {rate:.0%} of those run twice)" if rate is not None else ""))
    lines.append(f"smallest plan ({minimal['faults']} fault{'s' if minimal['faults'] != 1 else ''}, "
                 f"{minimal['workload_s']:g}s workload): {describe(minimal['plan'])}")
    lines.append(hunt["reproduce"])
    return "\n".join(lines)


def _run(t: dict) -> list[str]:
    """A run's line (how it ended, its time, its plan), then what it showed first."""
    ended = ENDED.get(t.get("outcome", ""), "BREAKS" if t["breaks"] else "holds")
    times = t.get("times_s") or {}
    spent = f"{times['total']:>5.0f}s" if times.get("total") is not None else "     -"
    whence = t.get("source", "covering")
    lines = [f"  run {t['run']:>3}  {ended:<10}  observed {t['observed']:<13} {spent}  {whence:<8}  "
             f"{describe(t['plan'])}"]
    if t.get("change"):
        lines.append(f"            mutated from {t['change']}")
    if t.get("not_landed"):
        lines.append(f"            not landed: {t['not_landed']}")
    for b in t.get("new_behaviours", []):
        fault, spark, sink = b
        lines.append(f"            new: {fault}: Spark {spark}; the sink saw {sink}")
    return lines


def _totals(hunt: dict) -> list[str]:
    """Coverage, behaviours, runs that tested nothing, the median run's time, how it ended."""
    lines = []
    cov = hunt.get("coverage")
    if cov:
        lines.append(f"coverage: {cov['pairs_covered']} of the {cov['pairs_possible']} ordered pairs of "
                     f"{len(cov['choices'])} choices covered by faults that landed")
    runs = len(hunt.get("tried", []))
    if "behaviours_seen" in hunt:
        lines.append(f"behaviours: {hunt['behaviours_seen']} seen in {runs} run{'s' if runs != 1 else ''}")
    nothing = hunt.get("tested_nothing")
    if nothing:
        lines.append(f"tested nothing: {nothing} of the {runs} runs (a fault that did not land, or a verdict "
                     "that could not be decided): not holds")
    median = hunt.get("run_time_median_s") or {}
    if median.get("total") is not None:
        parts = ", ".join(f"{k} {median[k]:g}s" for k in ("startup", "workload", "drain", "check")
                          if k in median)
        lines.append(f"time per run: median {median['total']:g}s ({parts})")
    ends = {"violation": "stopped at the first violation", "runs": "every run done",
            "budget": "stopped: the budget was spent"}
    lines.append(f"hunt: {hunt.get('ended') or ends.get(str(hunt.get('stopped')), str(hunt.get('stopped')))}")
    return lines
