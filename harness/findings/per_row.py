"""Other keyed outputs (sessions, top-n, joins, failed logins, a custom oracle's rows):
matched by their key columns. Which rows the oracle found lost, duplicated, unexpected or
wrong comes from its discrepancy rows ("key=k7 session_start_ms=5000 ..."); the sink's
copies of each, and, where the key names an event key and a span of event time, the events
behind it and the batches that read them, come from the data."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from harness.findings.by_discrepancy import ByDiscrepancy
from harness.findings.witness import written_by

_PAIR = re.compile(r"(\w+)=(\S+)")


def parse(item: str) -> dict[str, str]:
    """"key=k7 window_start_ms=5000" -> {"key": "k7", "window_start_ms": "5000"}."""
    return dict(_PAIR.findall(str(item)))


class Rows(ByDiscrepancy):
    unit = "rows"

    def _matching(self, key: dict[str, str]) -> pd.DataFrame:
        sink = self.inputs.sink
        mask = np.ones(len(sink), bool)
        for col, value in key.items():
            if col in sink.columns:
                mask &= (sink[col].astype(str) == value).to_numpy()
        return sink[mask]

    def _span(self, key: dict[str, str]) -> tuple[int, int] | None:
        """A span of event time the key names (a window's or a session's start and end)."""
        start = next((v for c, v in key.items() if c.endswith("start_ms")), None)
        end = next((v for c, v in key.items() if c.endswith("end_ms")), None)
        try:
            return (int(start), int(end)) if start is not None and end is not None else None
        except ValueError:
            return None

    def _record(self, item: str, expected: str, actual: str) -> dict:
        key = parse(item)
        rows = self._matching(key)
        rec: dict = {"row": str(item)}
        if "key" in key:
            rec["key"] = key["key"]
        span = self._span(key)
        if span is not None:
            rec["window"] = [span[0], span[1]]
        rec["written_by"] = written_by(rows, self.inputs.rel_s)
        rec["_expected"], rec["_actual"], rec["_rows"] = expected, actual, rows
        rec["_cause"], read = self._cause(key, span)
        if read:
            rec["read_by_batches"] = read
        return rec

    def _cause(self, key: dict[str, str], span: tuple[int, int] | None) -> tuple[str, list[int]]:
        """For a key naming an event key and a span: how its events were read, and by which
        batches (-1: by none)."""
        if "key" not in key or span is None:
            return "unknown", []
        real = self.inputs.real
        inside = real[(real["key"].astype(str) == key["key"]) & (real["event_time_ms"] >= span[0])
                      & (real["event_time_ms"] <= span[1])]
        if not len(inside):
            return "no-event", []
        rb = self.history.read_by.loc[inside.index]
        read = sorted({int(b) for b in rb["planned"]})
        if (rb["planned"] < 0).all():
            return "unread", read
        return ("uncommitted" if (rb["batch"] < 0).all() else "read"), read

    def unexpected(self) -> list[dict]:
        out = self._records("unexpected")
        for rec in out:
            rec["actual"] = rec["_actual"]
        return out

    def on_time_lost(self, batch_ids: set[int]) -> list[dict]:
        return []
