"""The hunt's runs: each a fault plan of the seed's covering set (harness/hunt/plan.py), run as
a checked case on services started once; the first whose verdict breaks the declared
guarantee is shrunk to the smallest plan that still breaks it (harness/hunt/shrink.py), and
written out as minimal.toml.

A run "breaks the guarantee" when its output does: the observed guarantee is weaker than
the declared one, or the sink holds rows nothing sent explains. A fault that did not land
fails its case's verdict too, but is no finding about the job: the search goes on.
"""

from __future__ import annotations

import json
import time
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from harness.errors import ScenarioError
from harness.hunt import tomlw
from harness.hunt.plan import Space, coverage, describe, plans
from harness.hunt.shrink import BUDGET, Candidate, shrink
from harness.results.model import CaseResult
from harness.results.rundir import RunDir
from harness.results.verdict import guarantee_holds
from harness.run.case import Case
from harness.run.searches import Search
from harness.scenario import fault_specs


@dataclass(frozen=True)
class Options:
    runs: int = 10
    seed: int = 1
    kinds: tuple[str, ...] = ()
    budget_s: float = 1800.0
    all: bool = False


def breaks(case: CaseResult) -> bool:
    """Whether the case's output breaks its declared guarantee (not: a fault that missed). When
    Spark refused to go on after a fault (kafka-retention under failOnDataLoss, a damaged
    checkpoint), the query stopped loudly: what it never read is not lost by the sink, so only
    copies and rows nothing sent explain break it. After a fault a job must survive (a machine's
    crash: the kind's `refusal_breaks`), the refusal itself breaks it: the job is down until
    someone repairs its checkpoint by hand."""
    copies = int(case.events.get("duplicated") or 0) + int(case.events.get("unexpected") or 0)
    if refused(case):
        return copies > 0 or refused_after_crash(case)
    unexpected = int(case.events.get("unexpected") or 0)
    return not guarantee_holds(case.guarantee, case.verdict.observed) or unexpected > 0


def refused(case: CaseResult) -> bool:
    """Whether Spark refused to go on after one of the case's faults."""
    return any(f.outcome == "refused" for f in case.faults)


def refused_after_crash(case: CaseResult) -> bool:
    """Whether Spark refused to go on after a fault a job must survive (`refusal_breaks`)."""
    from faults.registry import KINDS

    return any(f.outcome == "refused" and f.kind in KINDS and KINDS[f.kind].refusal_breaks
               for f in case.faults)


class Hunt:
    """One search over one case of a scenario, on the run's services."""

    def __init__(self, scenario, spec, stack, run_dir: RunDir, run_id: str, progress, registry,
                 options: Options, cases: list[CaseResult]):
        self.scenario, self.spec, self.stack = scenario, spec, stack
        self.run_dir, self.run_id, self.progress, self.registry = run_dir, run_id, progress, registry
        self.options, self.cases = options, cases
        self.ctx = fault_specs.Context(scenario.workload.duration_s, scenario.services, (spec,),
                                       warmup_s=scenario.measure.warmup_s, pipeline=scenario.pipeline)
        self.space = Space.of(self.ctx, options.kinds)
        self.plans = plans(self.space, options.seed, options.runs)
        self.deadline = time.monotonic() + options.budget_s
        self.trials = 0

    def trial(self, plan: list[dict] | tuple[dict, ...], workload_s: float, label: str) -> CaseResult:
        """Run the case once under `plan`, with a workload of `workload_s`."""
        from harness.run.runner import run_case

        self.trials += 1
        ctx = replace(self.ctx, workload_s=workload_s)
        faults = fault_specs.parse_faults(list(plan), ctx, "hunt.plan")
        workload = replace(self.scenario.workload, duration_s=workload_s)
        name = f"{self.spec.name}-{label}"
        trial = replace(self.scenario, workload=workload, faults=faults,
                        cases=(replace(self.spec, name=name),))
        result = run_case(Case.create(trial, trial.cases[0], self.stack, self.run_dir, self.run_id,
                                      self.progress, self.registry))
        self.cases.append(result)
        return result

    def valid(self, cand: Candidate) -> bool:
        if cand.workload_s <= self.scenario.measure.warmup_s + 5:
            return False   # a workload must outlast its warm-up
        try:
            ctx = replace(self.ctx, workload_s=cand.workload_s)
            fault_specs.parse_faults(list(cand.plan), ctx, "hunt")
        except Exception:  # noqa: BLE001 - a candidate the loader refuses is not tried
            return False
        return True

    def run(self) -> dict:
        opts, say = self.options, self.progress.step
        tried: list[dict] = []
        found: dict | None = None
        stopped = "runs"
        say(f"hunt: case {self.spec.name}, seed {opts.seed}, up to {opts.runs} runs, kinds "
            f"{', '.join(self.space.kinds)}")
        for i in range(opts.runs):
            if time.monotonic() > self.deadline:
                stopped = "budget"
                say(f"hunt: the budget of {opts.budget_s:g}s is spent after {i} runs")
                break
            plan = self.plans[i]
            say(f"hunt: run {i + 1}/{opts.runs}: {describe(plan)}")
            case = self.trial(plan, self.scenario.workload.duration_s, f"h{i + 1}")
            broke = breaks(case)
            tried.append(_tried(i + 1, plan, case, broke))
            if broke and refused(case):
                said = (f"BREAKS: Spark refused to restart after a fault a job must survive "
                        f"(observed {case.verdict.observed} of {case.guarantee})")
            elif not broke and refused(case):
                said = (f"refused: Spark stopped the query after a fault (observed {case.verdict.observed} "
                        f"of {case.guarantee}, not counted)")
            else:
                said = f"{'BREAKS' if broke else 'holds'} {case.guarantee} (observed {case.verdict.observed})"
            say(f"hunt: run {i + 1}: {said}; {sum(t['breaks'] for t in tried)} violation(s) so far")
            if broke and found is None:
                found = {"run": i + 1, "plan": plan, "case": case.name}
                stopped = "violation"
                if not opts.all:
                    break
        out = {"case": self.spec.name, "seed": opts.seed, "runs": opts.runs, "kinds": list(self.space.kinds),
               "budget_s": opts.budget_s, "all": opts.all, "stopped": stopped, "tried": tried,
               "coverage": coverage(self.space, [t["plan"] for t in tried]),
               "found": found, "shrink": None, "minimal": None}
        if found is not None:
            out.update(self._shrunk(list(found["plan"])))
        out["ended"] = ended(out)
        return out

    def _shrunk(self, plan: list[dict]) -> dict:
        start = Candidate(tuple(plan), self.scenario.workload.duration_s, "the failing run's plan")
        labels = iter(range(1, 10_000))

        def fails(cand: Candidate) -> bool | None:
            if time.monotonic() > self.deadline:
                return None   # out of budget: not run; what is found so far is the answer
            return breaks(self.trial(cand.plan, cand.workload_s, f"s{next(labels)}"))

        done = shrink(start, fails, say=self.progress.step, valid=self.valid)
        small = done.smallest
        path = self.run_dir.path / "minimal.toml"
        path.write_text(minimal_toml(self.scenario, self.spec, list(small.plan), small.workload_s))
        twice = done.run_twice
        self.progress.step(f"hunt: the smallest plan that still breaks {self.spec.guarantee}"
                           f"{' (so far: the budget was spent)' if done.ended == BUDGET else ''}: "
                           f"{describe(list(small.plan))} ({small.workload_s:g}s workload)")
        return {"shrink": {"steps": done.steps, "runs": done.runs, "flaky": done.flaky,
                           "candidates_run_twice": twice, "ended": done.ended,
                           "not_run": sum(1 for s in done.steps if s["not_run"]),
                           "flake_rate": round(done.flaky / twice, 3) if twice else None},
                "minimal": {"plan": list(small.plan), "workload_s": small.workload_s, "path": str(path),
                            "faults": len(small.plan)},
                "reproduce": f"python -m harness run {path}"}


def plan_table(space: Space, plans_: list[list[dict]]) -> str:
    """`hunt --plan-only`: each plan, the ordered pairs it covers first, and the coverage reached."""
    from harness.hunt.plan import Pair, choice_of, pairs_of

    lines: list[str] = []
    seen: set[Pair] = set()
    for i, plan in enumerate(plans_):
        new = sorted((a.label, b.label) for a, b in pairs_of([choice_of(t) for t in plan]) - seen
                     if (a, b) in space.possible)
        seen |= pairs_of([choice_of(t) for t in plan])
        lines.append(f"plan {i + 1:>3}: {describe(plan)}")
        lines += [f"            covers {a} -> {b}" for a, b in new]
    cov = coverage(space, plans_)
    tiers = cov["tier_covered_by_run"]
    lines.append(f"coverage: {cov['pairs_covered']} of the {cov['pairs_possible']} ordered pairs of "
                 f"{len(cov['choices'])} choices ({', '.join(cov['choices'])}); pairs whose second fault "
                 f"restarts the driver all covered by plan {tiers['second-restarts'] or '-'}, those whose "
                 f"first does by plan {tiers['first-restarts'] or '-'}, the rest by plan "
                 f"{tiers['rest'] or '-'}")
    return "\n".join(lines)


def ended(hunt: dict) -> str:
    """How the hunt ended, in a sentence."""
    stopped = hunt.get("stopped")
    shrunk = hunt.get("shrink") or {}
    if hunt.get("found") is None:
        return {"budget": "budget spent before any run broke the guarantee",
                "runs": "every run held the guarantee"}.get(str(stopped), str(stopped))
    if shrunk.get("ended") == BUDGET:
        return "budget spent while shrinking; smallest plan so far"
    how = "stopped at the first violation" if stopped == "violation" else "every run done"
    return f"{how}; shrunk to the smallest plan that still breaks it"


def _tried(run: int, plan: list[dict], case: CaseResult, broke: bool) -> dict:
    return {"run": run, "plan": plan, "case": case.name, "breaks": broke, "holds": case.verdict.holds,
            "refused": refused(case), "observed": case.verdict.observed, "detail": case.verdict.detail,
            "findings": [{"class": f.cls, "count": f.count, "story": f.story} for f in case.findings]}


def minimal_toml(scenario, spec, plan: list[dict], workload_s: float) -> str:
    """The scenario as a complete file that runs the one case under `plan`: its [quick]
    applied if the hunt ran --quick, its cases reduced to this one (a [matrix] case written
    out), its own faults and nemesis replaced by the plan, and its directory on the import
    path so that the user's modules are found from wherever the file is."""
    raw = tomllib.loads(Path(scenario.path).read_text())
    quick = raw.pop("quick", {})
    quick.pop("faults", None)
    if scenario.quick:
        raw["workload"] = _overlay(raw.get("workload", {}), quick)
    raw["workload"] = {**raw.get("workload", {}), "duration": f"{workload_s:g}s"}
    for key in ("matrix", "nemesis", "faults"):
        raw.pop(key, None)
    case = {"name": spec.name, "guarantee": spec.guarantee, "sink": spec.sink}
    if spec.sink_class:
        case["sink_class"] = spec.sink_class
    listed = next((c for c in raw.get("cases", []) if c.get("name") == spec.name), None)
    if listed is not None and "pipeline" in listed:
        case["pipeline"] = listed["pipeline"]
    raw["cases"] = [case]
    # the scenario's directory and its imports, once each (its own "." is that directory again)
    raw["imports"] = list(dict.fromkeys(str(p) for p in scenario.imports or (Path(scenario.path).parent,)))
    if scenario.fault_kinds:   # the user's own kinds, which the plan may hold
        raw["fault_kinds"] = list(scenario.fault_kinds)
    raw["faults"] = plan
    head = (f"minimal.toml: the smallest fault plan `python -m harness hunt` found that breaks "
            f"{spec.guarantee}\n"
            f"for case {spec.name} of {scenario.path}.\nReproduce: python -m harness run <this file>")
    keys = ("name", "description", "imports", "fault_kinds", "drain_timeout", "services", "workload",
            "pipeline", "measure", "cases", "faults")
    ordered = {k: raw[k] for k in keys if k in raw}
    return tomlw.dumps(ordered, head)


def _overlay(base: dict, top: dict) -> dict:
    out = dict(base)
    for key, value in top.items():
        out[key] = _overlay(out.get(key, {}), value) if isinstance(value, dict) else value
    return out


def write(run_dir: RunDir, hunt: dict) -> Path:
    path = run_dir.path / "hunt.json"
    path.write_text(json.dumps(hunt, indent=2) + "\n")
    return path


class HuntSearch(Search):
    def __init__(self, case: str | None, options):
        super().__init__(case)
        self.options = options

    @classmethod
    def of(cls, case: str | None, runs: int, seed: int, kinds: str | tuple[str, ...] | None, budget: str,
           all_runs: bool) -> HuntSearch:
        """From the command's options, checked: --runs, --budget, --kinds."""
        from harness.scenario import parse_duration_ms

        if runs < 1:
            raise ScenarioError(f"--runs {runs}: the search needs at least one run", "give --runs 1 or more")
        if isinstance(kinds, str) or kinds is None:
            kinds = tuple(k.strip() for k in (kinds or "").split(",") if k.strip())
        return cls(case, Options(runs=runs, seed=seed, kinds=tuple(kinds),
                                 budget_s=parse_duration_ms(budget, "--budget") / 1000, all=all_runs))

    def narrow(self, scenario):
        narrowed = super().narrow(scenario)
        self.space(narrowed)   # --kinds and the case are checked before anything starts
        return narrowed

    def space(self, scenario) -> Space:
        """What the hunt's plans may hold for the narrowed scenario's case."""
        from harness.scenario.fault_specs import Context

        return Space.of(Context(scenario.workload.duration_s, scenario.services, scenario.cases,
                                warmup_s=scenario.measure.warmup_s, pipeline=scenario.pipeline),
                        self.options.kinds)

    def search(self, stack, result, run_dir, run_id, progress, registry) -> None:
        hunt = Hunt(self.scenario, self.spec, stack, run_dir, run_id, progress, registry, self.options,
                           result.cases)
        found = result.sections["hunt"] = {"case": self.spec.name, "stopped": "error", "tried": []}
        found.update(hunt.run())
        write(run_dir, found)

    def render(self, result) -> str:
        from harness.report import table

        return table.render_hunt(result.sections["hunt"])

    def exit_code(self, result) -> int:
        return 1 if result.sections["hunt"].get("found") else 0
