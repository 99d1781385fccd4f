"""What the units whose anomalies the oracle's discrepancy rows name have in common (events
that carry event_id, per_event.py; keyed rows, per_row.py): each class's records from those
rows, duplicates grouped by the batches that wrote their copies, the count of wrong values
from the oracle's own sentence. A unit says how to make a record of one row (`_record`)."""

from __future__ import annotations

import re

import pandas as pd

from harness.findings.inputs import Inputs
from harness.findings.timeline import History


class ByDiscrepancy:
    unit = ""

    def __init__(self, inputs: Inputs, history: History):
        self.inputs, self.history = inputs, history
        self.d = inputs.checked.discrepancies
        self.wrong_count = 0

    def _items(self, kind: str) -> pd.DataFrame:
        return self.d[self.d["kind"] == kind] if len(self.d) else self.d

    def _record(self, item: str, expected: str, actual: str) -> dict | None:
        """The witness record of one discrepancy row (None: a row this unit cannot read)."""
        raise NotImplementedError

    def _records(self, kind: str) -> list[dict]:
        out = []
        for r in self._items(kind).itertuples(index=False):
            rec = self._record(r.item, str(r.expected), str(r.actual))
            if rec is not None:
                out.append(rec)
        return out

    def lost(self) -> list[dict]:
        return self._records("lost")

    def duplicated(self) -> list[dict]:
        out = self._records("duplicated")
        for rec in out:
            rec["_cause"] = tuple(w.get("batch_id", -1) for w in rec["written_by"])
        return out

    def wrong(self) -> list[dict]:
        out = self._records("wrong")
        for rec in out:
            rec.update(self._named(rec), expected=rec["_expected"], actual=rec["_actual"])
            rec["_cause"] = "values"
        self.wrong_count = wrong_count_from(self.inputs.checked.problems, len(out))
        return out

    def _named(self, rec: dict) -> dict:
        """How a wrong or unexpected record names its row, beyond what _record put in it."""
        return {}

    def late_groups(self) -> dict[int, int]:
        return {}

    def updated_groups(self) -> dict[int, int]:
        return {}


_WRONG = re.compile(r"^([\d,]+) (?:events?|rows?|windows?) "
                    r"(?:came out with wrong values|ha(?:s|ve) the right count but a wrong sum)")


def wrong_count_from(problems: list[str], fallback: int) -> int:
    """The oracle's own count of wrong values, from its sentence; else the rows it kept."""
    for p in problems:
        m = _WRONG.match(p)
        if m:
            return int(m[1].replace(",", ""))
    return fallback
