"""A case's references: what the same machine gives as a floor or a ceiling, measured in the
same run, so that a figure can be read as a ratio that travels across machines (issue 40).

- `restart_floor_s`: the driver's measured start-up in this case, from its process's start to
  its first committed batch (the warm-up's, before any fault): what any recovery that starts
  a driver costs at least on this machine. recovery_of_floor is recovery s over it.
- `spark_ceiling_eps`: Spark's own ceiling for the case's query (harness/run/ceiling.py: the
  same pipeline on the rate source into noop, as fast as it goes), measured after the case
  only where the scenario asks (`[measure] ceiling = true`): it costs a driver's start and a
  dozen batches. throughput_of_ceiling is processed/s over it.

Each figure that is None has its reason in `why`. summary.json's cases[].references holds
{"restart_floor_s", "spark_ceiling_eps", "why"}, and with a ceiling its run
("spark_ceiling": batches, rows per batch, cores).
"""

from __future__ import annotations

import logging

from harness.results.model import CaseResult
from harness.run.case import Case

log = logging.getLogger(__name__)

NOT_ASKED = ("not measured: the scenario does not ask for it ([measure] ceiling = true measures Spark's "
             "own ceiling after each case, a driver's start and a dozen batches more)")


def references(case: Case, spark_ceiling: dict | None = None, why_not: str = NOT_ASKED) -> dict:
    """The case's references: its restart floor and, when measured, Spark's ceiling."""
    why: dict[str, str] = {}
    floor = case.pace.start_ups[0] if case.pace.start_ups else None
    if floor is None:
        why["restart_floor_s"] = "no driver of the case started: there is no start-up to measure"
    eps = (spark_ceiling or {}).get("eps")
    if eps is None:
        why["spark_ceiling_eps"] = why_not if spark_ceiling is None else (
            "Spark's ceiling ran, but no batch after its warm-up counted")
    out = {"restart_floor_s": None if floor is None else round(floor, 3), "spark_ceiling_eps": eps,
           "why": why}
    if spark_ceiling is not None:
        out["spark_ceiling"] = spark_ceiling
    return out


def with_ceiling(case: Case, result: CaseResult) -> None:
    """Measure Spark's ceiling for the case's query after it ran ([measure] ceiling = true), on
    batches at least as big as the case's own, into its references."""
    from harness.run import ceiling

    if case.driver is None:
        result.sections["references"] = references(case, why_not="not measured: the case's driver never "
                                                                  "started")
        return
    processed = (result.throughput_eps or {}).get("processed")
    try:
        found = ceiling.measure(case, ceiling.batch_for(processed, case.pipeline))
    except Exception as exc:  # noqa: BLE001 - a reference that failed leaves the case's verdict as it is
        log.error("Spark's ceiling for case %s: %s", case.name, exc)
        result.sections["references"] = references(
            case, why_not=f"Spark's ceiling failed: {type(exc).__name__}: {exc}")
        return
    result.sections["references"] = references(case, found)
