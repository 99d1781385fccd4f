"""What a job's oracle returns (the batch one, harness/check/batch_oracle/oracle.py, and the
reference one, harness/check/batch_oracle/reference.py): a CheckResult with the notes its verdict
must carry."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.check import multiset
from harness.check.batch_oracle.job_input import EXACT, Input
from harness.check.result import CheckResult, concat, discrepancies, row_text

ROWS = "rows"


@dataclass(frozen=True)
class JobCheckResult(CheckResult):
    """A batch oracle's result: the counts, and what the verdict must also say (`notes`: the
    outputs left out of the comparison, and why)."""

    notes: tuple[str, ...] = ()
    unknowns: tuple[str, ...] = ()   # why the comparison cannot decide (the verdict is UNKNOWN)


def of(found: multiset.Comparison, given: Input, columns: dict[str, str], key: list[str],
       left_out: int) -> JobCheckResult:
    """The counts, the first discrepancies of each kind, and the note of what was left out."""
    real = int((~given.read["control"]).sum()) if "control" in given.read else len(given.read)
    counts = {"produced": real, "expected": found.expected, "delivered": found.delivered, "lost": found.lost,
              "duplicated": found.duplicated, "unexpected": found.unexpected,
              "dropped_late": int(given.late.sum()) if given.mode == EXACT else 0,
              "late_records": int(given.late.sum()), "left_out": left_out}
    shown = key or list(columns)
    values = [c for c in columns if c not in shown]
    lost, extra = found.lost_rows, found.extra_rows
    dup, unexpected = extra[extra["extra"] == "duplicated"], extra[extra["extra"] == "unexpected"]
    rows = concat([
        discrepancies("lost", row_text(lost, shown), row_text(lost, values), pd.Series(["none"] * len(lost))),
        discrepancies("duplicated", row_text(dup, shown), pd.Series(["1 row"] * len(dup)),
                      row_text(dup, values), dup.get("batch_id")),
        discrepancies("unexpected", row_text(unexpected, shown), pd.Series(["no row"] * len(unexpected)),
                      row_text(unexpected, values), unexpected.get("batch_id")),
    ])
    notes = ((f"compared only the outputs no late record could touch ({given.why}): "
              f"{left_out:,} expected rows left out"),) if left_out else ()
    # every expected row left out: an empty comparison holds trivially, and says nothing
    unknowns = ((f"the batch oracle compared nothing: every one of the {left_out:,} expected rows "
                 f"could be touched by a late record ({given.why}); oracle = \"reference\" compares "
                 "them with a run without faults"),) if left_out and not found.expected else ()
    return JobCheckResult(counts, np.array([]), np.array([]), [], rows, unit=ROWS, notes=notes,
                          unknowns=unknowns)
