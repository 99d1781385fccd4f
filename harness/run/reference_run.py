"""`oracle = "reference"`: before a case whose job asks for it, the same case without faults.

The reference run is the case with the scenario's faults left out, the same seed and the
same records, named `<case>-reference` (its own topic, sink and directory); its sink becomes
what the case's must hold (harness/check/batch_oracle/reference.py). It is not a case of the
run's results: the case it served carries it as its `reference_run` section.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from harness.check.batch_oracle.reference import SUFFIX
from harness.results.verdict import PASS, undecided


def first(scenario, spec, run: Callable) -> object | None:
    """The reference run of `spec` (run(scenario, spec) -> CaseResult), or None when its job
    does not ask for one."""
    pipeline = spec.pipeline or scenario.pipeline
    if getattr(pipeline, "oracle", None) != "reference":
        return None
    quiet = replace(spec, name=spec.name + SUFFIX, pipeline=replace(pipeline, oracle="none"))
    return run(replace(scenario, faults=()), quiet)


def attach(result, reference) -> None:
    """The reference run's summary in the case's result (its `reference_run` section). A
    reference run that did not pass (its driver died, its drain timed out, its sink could not be
    read) left a sink that is no reference: the case was compared with a partial output, so its
    verdict is UNKNOWN (FAIL when the case failed on its own), and the findings drawn from that
    comparison go."""
    if reference is None:
        return
    result.sections["reference_run"] = {"case": reference.name, "status": reference.verdict.status,
                                    "rows": int(reference.events.get("delivered") or 0),
                                    "error": reference.error}
    if reference.verdict.status != PASS:
        why = (f"the reference run ({reference.name}, the case without its faults) ended "
               f"{reference.verdict.status}, so its sink is no reference: {reference.verdict.detail}")
        result.verdict = undecided(result.guarantee, why, failure=result.error)
        result.findings = []
