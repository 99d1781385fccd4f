"""Commands that run their own cases on the run's services: the sustainable-rate search here,
the fault hunt in harness/hunt/search.py. Each narrows the scenario to one case, runs its
trials in the run, and says how the command ends; the CLI and the library (harness/api.py)
use them alike."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from harness.errors import ScenarioError


class Search:
    def __init__(self, case: str | None):
        self.case = case
        self.spec: Any = None        # the case, once narrowed
        self.scenario: Any = None

    def narrow(self, scenario):
        """The scenario with only the case `case` names (default: the first)."""
        names = [c.name for c in scenario.cases]
        if self.case is not None and self.case not in names:
            raise ScenarioError(f"--case {self.case}: the scenario has no such case",
                                f"choose one of {', '.join(names)}")
        self.spec = next(c for c in scenario.cases if c.name == (self.case or names[0]))
        self.scenario = replace(scenario, cases=(self.spec,))
        return self.scenario

    def cases(self, run_dir, run_id, progress, registry):
        def run_them(stack, result):
            self.search(stack, result, run_dir, run_id, progress, registry)
        return run_them

    def search(self, stack, result, run_dir, run_id, progress, registry) -> None:
        raise NotImplementedError

    def render(self, result) -> str:
        raise NotImplementedError

    def exit_code(self, result) -> int:
        raise NotImplementedError


class SustainSearch(Search):
    def __init__(self, case: str | None, p99_ms: float | None, min_eps: float, max_eps: float,
                 steps: int | None = None, executors: list[int] | None = None):
        """`steps`: at most this many bisections (None: until the bracket is within 10%)."""
        super().__init__(case)
        if not 0 < min_eps <= max_eps or (steps is not None and steps < 0):
            raise ScenarioError(f"--min-eps {min_eps:g}, --max-eps {max_eps:g}, --steps {steps}: the range "
                                "is empty", "give 0 < --min-eps <= --max-eps and --steps >= 0")
        if executors is not None and (not executors or min(executors) < 1
                                      or len(set(executors)) < len(executors)):
            raise ScenarioError(f"--executors {','.join(map(str, executors))}: sizes must be distinct "
                                "and >= 1", "give e.g. --executors 1,2,4")
        self.p99_ms, self.min_eps, self.max_eps, self.steps = p99_ms, min_eps, max_eps, steps
        self.executors = executors

    def narrow(self, scenario):
        narrowed = super().narrow(scenario)
        if self.executors:
            from harness.run import sustain

            for n in self.executors:   # a size the master cannot have is refused before anything starts
                sustain.sized(narrowed.services.spark, n)
        return narrowed

    def search(self, stack, result, run_dir, run_id, progress, registry) -> None:
        from harness.run import sustain

        pipeline = self.spec.pipeline or self.scenario.pipeline
        bound = (self.p99_ms if self.p99_ms is not None
                 else sustain.default_p99_ms(pipeline.watermark_ms, self.scenario.workload.delay))
        bounds = sustain.Bounds(p99_ms=bound, min_eps=self.min_eps, max_eps=self.max_eps, steps=self.steps)
        found = result.sections["sustain"] = {"case": self.spec.name, "rate_eps": None, "trials": []}
        # the trials land in the section as they end, and sustain.json is written however the
        # search ends, so an interrupted search keeps the trials it finished
        try:
            if self.executors:
                found.update(sustain.scale(self.scenario, self.spec, stack, run_dir, run_id, progress,
                                           registry, bounds, result.cases, self.executors,
                                           trials=found["trials"]))
            else:
                found.update(sustain.search(self.scenario, self.spec, stack, run_dir, run_id, progress,
                                            registry, bounds, result.cases, trials=found["trials"]))
        finally:
            sustain.write(run_dir, found)

    def render(self, result) -> str:
        from harness.report import table

        return table.render_sustain(result.sections["sustain"])

    def exit_code(self, result) -> int:
        return 0 if result.sections["sustain"]["rate_eps"] is not None else 1
