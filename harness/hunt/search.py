"""The hunt's runs: each a fault plan (harness/hunt/feedback.py: the covering plans of
harness/hunt/plan.py, and mutations of the plans whose runs showed a behaviour not seen before),
run as a checked case on services started once; the first whose verdict breaks the declared
guarantee is shrunk to the smallest plan that still breaks it (harness/hunt/shrink.py), and
written out as minimal.toml.

A run "breaks the guarantee" when its output does (harness/hunt/outcome.py). A run counts only
for what landed: a fault that failed, was missed or was not seen makes the run one that tested
nothing, never a hold; it covers only the pairs whose faults both landed (an undecided run,
whose verdict could not say, none), and the hunt ends
UNKNOWN (exit 4) when no run broke the guarantee and some tested nothing. Each run's behaviours
(harness/hunt/behaviour.py) and its wall time (start-up, workload, drain, check) go in hunt.json.
"""

from __future__ import annotations

import json
import logging
import statistics
import time
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from harness.errors import ScenarioError
from harness.hunt import behaviour, tomlw
from harness.hunt.feedback import BOTH, STRATEGIES, Planner, Proposal
from harness.hunt.outcome import (
    BREAKS,
    STATUS,
    TESTED_NOTHING,
    UNDECIDED,
    breaks,
    fault_landed,
    outcome,
    refused,
    refused_after_crash,
    why_not_landed,
)
from harness.hunt.plan import Space, choice_of, coverage, describe, seconds
from harness.hunt.shrink import BUDGET, Candidate, shrink
from harness.results.model import CaseResult
from harness.results.rundir import RunDir
from harness.results.verdict import UNKNOWN, worst
from harness.run.case import Case
from harness.run.searches import Search
from harness.scenario import fault_specs

log = logging.getLogger(__name__)

__all__ = ["HuntSearch", "Options", "breaks", "ended", "minimal_toml", "plan_table", "refused",
           "refused_after_crash", "write"]


@dataclass(frozen=True)
class Options:
    runs: int = 10
    seed: int = 1
    kinds: tuple[str, ...] = ()
    budget_s: float = 1800.0
    all: bool = False
    strategy: str = BOTH   # covering, feedback or both (harness/hunt/feedback.py)
    shrink: bool = True    # False: stop at the violation unshrunk (benchmarks/hunt_real.py measures finding)


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
        self.planner = Planner(self.space, options.seed, options.strategy)
        self.deadline = time.monotonic() + options.budget_s
        self.trials = 0
        self.times: dict[str, dict] = {}   # a trial's case name -> where its wall time went
        self.checkpoints: dict[str, list[Path]] = {}   # ... -> its checkpoints, query by query

    def trial(self, plan: list[dict] | tuple[dict, ...], label: str) -> CaseResult:
        """Run the case once under `plan`. Its workload lasts until the plan is done: its duration
        ends just after the last fault's `at`, and the schedule's wait carries it on until every
        fault has landed and the query has read `read_past_batches` batches past it, up to the
        scenario's max_duration. Where its wall time went is kept in `times` under its name."""
        from harness.run.runner import run_case

        self.trials += 1
        wl = self.scenario.workload
        duration_s = min(wl.cap_s, plan_s(plan))
        workload = replace(wl, duration_s=duration_s, max_duration_s=max(wl.cap_s, duration_s))
        # the loader's room: the workload goes on while a fault is pending, up to its cap
        room = replace(self.ctx, workload_s=workload.cap_s)
        faults = fault_specs.parse_faults(list(plan), room, "hunt.plan")
        name = f"{self.spec.name}-{label}"
        trial = replace(self.scenario, workload=workload, faults=faults,
                        cases=(replace(self.spec, name=name),))
        case = Case.create(trial, trial.cases[0], self.stack, self.run_dir, self.run_id, self.progress,
                           self.registry)
        started = time.time()
        result = run_case(case)
        self.times[name] = wall_times(case, started, time.time())
        self.checkpoints[name] = list(case.checkpoints)
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
        say(f"hunt: case {self.spec.name}, seed {opts.seed}, up to {opts.runs} runs ({opts.strategy}), kinds "
            f"{', '.join(self.space.kinds)}")
        for i in range(opts.runs):
            if time.monotonic() > self.deadline:
                stopped = "budget"
                say(f"hunt: the budget of {opts.budget_s:g}s is spent after {i} runs")
                break
            proposal = self.planner.next()
            whence = f"{proposal.source}: {proposal.change}" if proposal.change else proposal.source
            say(f"hunt: run {i + 1}/{opts.runs} ({whence}): {describe(proposal.plan)}")
            case = self.trial(proposal.plan, f"h{i + 1}")
            entry = self._told(i + 1, proposal, case)
            tried.append(entry)
            say(f"hunt: run {i + 1}: {said(entry, case)}; {sum(t['breaks'] for t in tried)} violation(s), "
                f"{sum(t['outcome'] in TESTED_NOTHING for t in tried)} run(s) that tested nothing so far")
            for b in entry["new_behaviours"]:
                say(f"hunt: run {i + 1}: new behaviour: {behaviour.Behaviour.from_json(b).text()}")
            if entry["breaks"] and found is None:
                found = {"run": i + 1, "plan": proposal.plan, "case": case.name}
                stopped = "violation"
                if not opts.all:
                    break
        landed = [t["landed"] for t in tried]
        out = {"case": self.spec.name, "seed": opts.seed, "runs": opts.runs, "kinds": list(self.space.kinds),
               "budget_s": opts.budget_s, "all": opts.all, "strategy": opts.strategy, "stopped": stopped,
               "tried": tried, "coverage": coverage(self.space, [t["plan"] for t in tried], landed,
                                                    [t["outcome"] != UNDECIDED for t in tried]),
               "behaviours_seen": len(self.planner.seen),
               "behaviours": [b.to_json() for b in sorted(self.planner.seen)],
               "found": found, "shrink": None, "minimal": None}
        out.update(tally(tried))
        if found is not None and opts.shrink:
            out.update(self._shrunk(list(found["plan"])))
        # what a nightly's history reads: runs that tested nothing, and the shrink's flake rate
        out["untested_rate"] = round(out["tested_nothing"] / len(tried), 3) if tried else None
        out["flake_rate"] = (out.get("shrink") or {}).get("flake_rate")
        out["ended"] = ended(out)
        return out

    def _told(self, run: int, proposal: Proposal, case: CaseResult) -> dict:
        """One run as hunt.json keeps it, its behaviours told to the planner."""
        ordered = sorted(proposal.plan, key=lambda t: seconds(t["at"]))
        landed = [fault_landed(f) for f in case.faults]
        if len(landed) != len(ordered):   # a case that ended before its schedule was built
            landed = [False] * len(ordered)
        labels = [choice_of(t).label for t in ordered]
        try:
            seen = behaviour.of_case(self.run_dir.case(case.name).path, case, labels,
                                     self.checkpoints.get(case.name, []))
            unread = None
        except Exception as exc:  # noqa: BLE001 - the search goes on without this run's feedback
            log.warning("the behaviours of %s could not be read", case.name, exc_info=True)
            seen, unread = set(), f"{type(exc).__name__}: {exc}"
        new = self.planner.tell(proposal, landed, seen, decided=outcome(case) != UNDECIDED)
        if case.batch_p50_ms:   # a shift moves a fault by one of the query's batches
            self.planner.batch_s = round(case.batch_p50_ms / 1000, 1) or self.planner.batch_s
        return {**_tried(run, proposal.plan, case), "source": proposal.source, "change": proposal.change,
                "landed": landed, "behaviours": [b.to_json() for b in sorted(seen)],
                "new_behaviours": [b.to_json() for b in sorted(new)],
                "behaviours_seen": len(self.planner.seen), "times_s": self.times.get(case.name, {}),
                "workload": _sent(case), **({"behaviours_unread": unread} if unread else {})}

    def _shrunk(self, plan: list[dict]) -> dict:
        start = Candidate(tuple(plan), self.scenario.workload.duration_s, "the failing run's plan")
        labels = iter(range(1, 10_000))

        def fails(cand: Candidate) -> bool | None:
            if time.monotonic() > self.deadline:
                return None   # out of budget: not run; what is found so far is the answer
            return breaks(self.trial(cand.plan, f"s{next(labels)}"))

        # a run's workload is already as long as its plan: no shorter workload to try
        done = shrink(start, fails, say=self.progress.step, valid=self.valid, shorter_workload=False)
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
    """How the hunt ended, in a sentence; it says how many runs tested nothing."""
    stopped = hunt.get("stopped")
    shrunk = hunt.get("shrink") or {}
    nothing = int(hunt.get("tested_nothing") or 0)
    runs = len(hunt.get("tried", []))
    untested = f"; {nothing} of the {runs} runs tested nothing" if nothing else ""
    if hunt.get("found") is None:
        if stopped == "budget":
            return f"budget spent before any run broke the guarantee{untested}"
        if stopped == "runs":
            return (f"no run broke the guarantee{untested} (a fault that did not land, or a verdict "
                    "that could not be decided)" if nothing else "every run held the guarantee")
        return str(stopped)
    if shrunk.get("ended") == BUDGET:
        return "budget spent while shrinking; smallest plan so far"
    how = "stopped at the first violation" if stopped == "violation" else "every run done"
    return f"{how}; shrunk to the smallest plan that still breaks it" if shrunk else f"{how} (not shrunk)"


def tally(tried: list[dict]) -> dict:
    """The runs by how they ended, how many tested nothing, the hunt's status (FAIL on a
    violation, else UNKNOWN when a run tested nothing, else PASS) and the median wall time of a
    run with what it went to."""
    outcomes: dict[str, int] = {}
    for t in tried:
        outcomes[t["outcome"]] = outcomes.get(t["outcome"], 0) + 1
    nothing = sum(outcomes.get(o, 0) for o in TESTED_NOTHING)
    status = worst(STATUS[t["outcome"]] for t in tried) if tried else UNKNOWN
    times = [t["times_s"] for t in tried if t.get("times_s")]
    median = {k: round(statistics.median(x[k] for x in times if x.get(k) is not None), 1)
              for k in ("total", "startup", "workload", "drain", "check")
              if any(x.get(k) is not None for x in times)}
    return {"outcomes": outcomes, "tested_nothing": nothing, "status": status, "run_time_median_s": median}


def said(entry: dict, case: CaseResult) -> str:
    """How a run ended, in the terminal's words."""
    observed = f"observed {case.verdict.observed} of {case.guarantee}"
    if entry["outcome"] == BREAKS:
        if refused(case):
            return f"BREAKS: Spark refused to restart after a fault a job must survive ({observed})"
        return f"BREAKS {case.guarantee} ({observed})"
    if entry["outcome"] == "refused":
        return f"refused: Spark stopped the query after a fault ({observed}, not counted as a hold)"
    if entry["outcome"] == "not-landed":
        return f"tested nothing: a fault did not land ({entry['not_landed']})"
    if entry["outcome"] == "undecided":
        return f"tested nothing: the verdict could not say ({case.verdict.detail})"
    return f"holds {case.guarantee} ({observed})"


MIN_DURATION_S = 5.0   # a run's workload, however early its plan's faults come


def plan_s(plan: list[dict] | tuple[dict, ...]) -> float:
    """A run's duration under `plan`: just past its last fault's `at` (the schedule's wait carries
    the workload on while a fault is pending), at least MIN_DURATION_S."""
    return max([MIN_DURATION_S] + [round(seconds(t["at"]) + 1.0, 1) for t in plan])


def wall_times(case: Case, started: float, ended_at: float) -> dict:
    """Where a run's wall time went, in seconds: start-up (the topic, the driver, its first batch),
    workload (sending, and the faults healed and observed), drain (until every result was
    committed), check (the driver stopped, the sink read and checked, the findings)."""
    warm = case.running_from_ms / 1000 if case.running_from_ms else None
    try:
        sent = case.files.generator.stat().st_mtime if case.files.generator.exists() else None
    except OSError:
        sent = None
    stopping = case.stopping_ms / 1000 if case.stopping_ms is not None else None
    marks = [started, warm, sent, stopping, ended_at]
    out: dict = {"total": round(ended_at - started, 1)}
    for name, k in (("startup", 1), ("workload", 2), ("drain", 3), ("check", 4)):
        a, b = marks[k - 1], marks[k]
        out[name] = round(b - a, 1) if a is not None and b is not None else None
    if stopping is None:   # the case failed before its drain: the rest went to its check
        last = sent or warm or started
        out["check"] = round(ended_at - last, 1)
    return out


def _sent(case: CaseResult) -> dict:
    """How long the run's workload was sent, and how far past its duration (cases[].workload)."""
    sent = case.sections.get("workload") or {}
    return {k: sent.get(k) for k in ("duration_s", "sent_for_s", "extended_by_s", "cut_at_max_duration")
            if k in sent}


def _tried(run: int, plan: list[dict], case: CaseResult) -> dict:
    result = outcome(case)
    return {"run": run, "plan": plan, "case": case.name, "outcome": result, "status": STATUS[result],
            "breaks": result == BREAKS, "holds": result == "holds", "refused": refused(case),
            "not_landed": why_not_landed(case) or None, "observed": case.verdict.observed,
            "detail": case.verdict.detail,
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
    swept = _state_axes(spec, raw.get("matrix"))
    for key in ("matrix", "nemesis", "faults"):
        raw.pop(key, None)
    case = {"name": spec.name, "guarantee": spec.guarantee, "sink": spec.sink}
    if spec.sink_class:
        case["sink_class"] = spec.sink_class
    listed = next((c for c in raw.get("cases", []) if c.get("name") == spec.name), None)
    if listed is not None and "pipeline" in listed:
        case["pipeline"] = listed["pipeline"]
    raw["cases"] = [case]
    if swept:   # a case of a [matrix] over Spark's state settings: that one combination of it
        raw.pop("cases")
        raw["matrix"] = {"guarantee": [spec.guarantee], "sink": [spec.sink], **swept}
    # the scenario's directory and its imports, once each (its own "." is that directory again)
    raw["imports"] = list(dict.fromkeys(str(p) for p in scenario.imports or (Path(scenario.path).parent,)))
    if scenario.fault_kinds:   # the user's own kinds, which the plan may hold
        raw["fault_kinds"] = list(scenario.fault_kinds)
    raw["faults"] = plan
    head = (f"minimal.toml: the smallest fault plan `python -m harness hunt` found that breaks "
            f"{spec.guarantee}\n"
            f"for case {spec.name} of {scenario.path}.\nReproduce: python -m harness run <this file>")
    keys = ("name", "description", "imports", "fault_kinds", "drain_timeout", "services", "workload",
            "pipeline", "measure", "cases", "matrix", "faults")
    ordered = {k: raw[k] for k in keys if k in raw}
    return tomlw.dumps(ordered, head)


def _state_axes(spec, matrix) -> dict:
    """The state axes a [matrix] swept, each at `spec`'s own value (harness/scenario/state_matrix.py):
    a [[cases]] table cannot say them, so the case is written as that matrix's one combination."""
    from harness.scenario.state_matrix import KEYS

    if not isinstance(matrix, dict) or spec.pipeline is None or not any(k in matrix for k in KEYS):
        return {}
    own = spec.pipeline.spark.state_settings()
    return {k: [own[k]] for k in KEYS if k in matrix}


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
           all_runs: bool, strategy: str = BOTH) -> HuntSearch:
        """From the command's options, checked: --runs, --budget, --kinds, --strategy."""
        from harness.scenario import parse_duration_ms

        if runs < 1:
            raise ScenarioError(f"--runs {runs}: the search needs at least one run", "give --runs 1 or more")
        if strategy not in STRATEGIES:
            raise ScenarioError(f"--strategy {strategy}: no such strategy",
                                f"give one of {', '.join(STRATEGIES)}")
        if isinstance(kinds, str) or kinds is None:
            kinds = tuple(k.strip() for k in (kinds or "").split(",") if k.strip())
        return cls(case, Options(runs=runs, seed=seed, kinds=tuple(kinds),
                                 budget_s=parse_duration_ms(budget, "--budget") / 1000, all=all_runs,
                                 strategy=strategy))

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
        from harness.hunt import report

        return report.render(result.sections["hunt"])

    def exit_code(self, result) -> int:
        """1: a run broke the guarantee; 4: none did, but some run tested nothing (a fault that did
        not land, a verdict that could not be decided); 0: every run tested something and held."""
        hunt = result.sections["hunt"]
        if hunt.get("found"):
            return 1
        return 4 if hunt.get("tested_nothing") or not hunt.get("tried") else 0
