"""Event-by-event outputs (passthrough, dedup, a custom pipeline without an oracle): each
row carries its event's `event_id`. Which events the oracle counted as lost, duplicated,
unexpected or wrong comes from its discrepancy rows ("event_id 123", or "record N" when
re-sent copies make each Kafka record an event); everything said about them comes from
ground truth, the sink and the checkpoint."""

from __future__ import annotations

import re

import pandas as pd

from harness.findings.by_discrepancy import ByDiscrepancy
from harness.findings.witness import written_by

_ITEM = re.compile(r"^(event_id|record) (-?\d+)$")
_RECORD_BITS = 40


class Events(ByDiscrepancy):
    unit = "events"

    def _truth_of(self, ident: str, n: int) -> pd.DataFrame:
        real = self.inputs.real
        if ident == "record":
            p, o = n >> _RECORD_BITS, n & ((1 << _RECORD_BITS) - 1)
            return real[(real["partition"] == p) & (real["offset"] == o)]
        return real[real["event_id"] == n].sort_values(["partition", "offset"], kind="stable")

    def _sink_of(self, ident: str, n: int, truth: pd.DataFrame) -> pd.DataFrame:
        sink = self.inputs.sink
        if ident == "record" and {"partition", "offset"} <= set(sink.columns) and len(truth):
            first = truth.iloc[0]
            return sink[(sink["partition"] == first["partition"]) & (sink["offset"] == first["offset"])]
        event_id = int(truth["event_id"].iloc[0]) if len(truth) else n
        return sink[sink["event_id"] == event_id] if "event_id" in sink.columns else sink.iloc[:0]

    def _record(self, item: str, expected: str = "", actual: str = "") -> dict | None:
        m = _ITEM.match(str(item).strip())
        if not m:
            return None
        ident, n = m[1], int(m[2])
        truth = self._truth_of(ident, n)
        rows = self._sink_of(ident, n, truth)
        rec: dict = {"event_id": int(truth["event_id"].iloc[0]) if len(truth) else n}
        if len(truth):
            first = truth.iloc[0]
            planned = int(self.history.read_by.loc[first.name, "planned"])
            committed = int(self.history.read_by.loc[first.name, "batch"])
            rec.update(key=str(first["key"]), partition=int(first["partition"]), offset=int(first["offset"]),
                       read_by_batch=planned)
            if planned >= 0 and committed < 0:
                rec["batch_committed"] = False
            rec["_cause"] = "unread" if planned < 0 else "uncommitted" if committed < 0 else "unwritten"
            rec["_copies_sent"] = len(truth)
        else:
            rec["_cause"] = "never-sent"
        rec["written_by"] = written_by(rows, self.inputs.rel_s)
        rec["_rows"], rec["_expected"], rec["_actual"] = rows, expected, actual
        return rec

    def unexpected(self) -> list[dict]:
        out = self._records("unexpected")
        for rec in out:
            if rec["_cause"] != "never-sent":
                rec["_cause"] = "not-expected"
            rec["row"] = f"event_id {rec['event_id']}"
        return out

    def _named(self, rec: dict) -> dict:
        return {"row": f"event_id {rec['event_id']}"}

    def on_time_lost(self, batch_ids: set[int]) -> list[dict]:
        return [c for c in self.lost() if c.get("read_by_batch") in batch_ids and c["_cause"] != "unread"]


