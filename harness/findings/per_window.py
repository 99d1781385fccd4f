"""Windowed counts (tumbling_count, windowed_count): anomalies per (key, window), from the
data. The unit is the (event, window) pair, as the oracle counts it (docs/measurement.md):
per window, e expected pairs, copies in the sink with total T and largest M:
lost e - T, duplicated T - max(e, M), unexpected M - e, and a right count with a wrong sum
is a wrong value."""

from __future__ import annotations

from functools import cached_property

import numpy as np
import pandas as pd

from harness.check.batch_reads import assign_batches, last_watermark, late_watermarks
from harness.check.windows import WINDOW, assign_windows
from harness.findings.inputs import Inputs
from harness.findings.timeline import History
from harness.findings.witness import written_by
from workloads.wire import CONTROL_KEY

_EVENT = ["event_id", "key", "event_time_ms", "amount", "partition", "offset"]
_PER_CAUSE = 3     # candidates kept per cause of loss: the witness takes the first of each
_SAMPLE = 50       # windows looked at per class: enough to find each pattern of batches


class Windows:
    """Every (event, window) pair of the real events, and per window what the sink holds."""

    unit = "(event, window) pairs"

    def __init__(self, inputs: Inputs, history: History):
        self.inputs, self.history = inputs, history
        params = inputs.pipeline.params()
        self.window_ms = int(params["window_ms"])
        self.slide_ms = int(params.get("slide_ms") or self.window_ms)
        real = inputs.real[[c for c in _EVENT if c in inputs.real.columns]]
        read_by = history.read_by
        real = real.assign(batch=read_by["batch"].to_numpy(), planned=read_by["planned"].to_numpy())
        pairs = assign_windows(real, self.window_ms, self.slide_ms)
        marks = late_watermarks(inputs.batches)
        mark = pairs["batch"].map(marks).fillna(-1).astype(np.int64)
        pairs["late"] = (pairs["batch"] >= 0) & (pairs["window_end_ms"] <= mark)
        self.rows = inputs.sink[~self._control_rows()]
        emitted = pd.MultiIndex.from_frame(pairs[WINDOW]).isin(pd.MultiIndex.from_frame(self.rows[WINDOW])) \
            if len(self.rows) else np.zeros(len(pairs), bool)
        pairs["open"] = (pairs["window_end_ms"] > last_watermark(inputs.batches)) & ~emitted
        self.pairs = pairs
        self._lost: list[dict] | None = None
        self.wrong_count = 0

    def _control_rows(self) -> np.ndarray:
        sink, truth = self.inputs.sink, self.inputs.truth
        if not len(sink) or "control" not in truth.columns:
            return np.zeros(len(sink), bool)
        own = assign_windows(truth[truth["control"].to_numpy(bool)], self.window_ms, self.slide_ms)
        keys = set(own[WINDOW].itertuples(index=False, name=None))
        in_own = pd.MultiIndex.from_frame(sink[WINDOW]).isin(keys) if keys else np.zeros(len(sink), bool)
        return np.asarray(in_own & (sink["key"] == CONTROL_KEY).to_numpy(), bool)

    @cached_property
    def table(self) -> pd.DataFrame:
        """Per window: e, e_sum (expected pairs and their amount), n_rows, total, largest,
        first_sum (what the sink holds; the first row's sum, as the oracle reads it)."""
        kept = self.pairs[~self.pairs["late"] & ~self.pairs["open"]]
        exp = kept.groupby(WINDOW, sort=False).agg(e=("event_id", "size"), e_sum=("amount", "sum"))
        got = self.rows.groupby(WINDOW, sort=False).agg(
            n_rows=("count", "size"), total=("count", "sum"), largest=("count", "max"),
            first_sum=("sum_amount", "first"))
        both = exp.join(got, how="outer").fillna(0).astype(np.int64)
        return both[(both["e"] > 0) | (both["n_rows"] > 0)]

    # -- candidates per class -------------------------------------------------------------
    def lost(self) -> list[dict]:
        """Events of the windows with no row at all (each such pair is lost for certain), by
        partition and offset; then the windows that came out short (which of their pairs are
        missing, counts cannot tell)."""
        if self._lost is None:
            self._lost = self._find_lost()
        return self._lost

    def _find_lost(self) -> list[dict]:
        t = self.table
        short = t[t["total"] < t["e"]]
        gone = short[short["n_rows"] == 0]
        kept = self.pairs[~self.pairs["late"] & ~self.pairs["open"]]
        idx = pd.MultiIndex.from_frame(kept[WINDOW])
        events = kept[idx.isin(gone.index)].sort_values(["partition", "offset"], kind="stable")
        events = events.assign(cause=self._causes(events))
        first = events.groupby("cause", sort=False).head(_PER_CAUSE)
        out = [self._event_record(r) for r in first.itertuples(index=False)]
        for key, row in short[short["n_rows"] > 0].head(_PER_CAUSE).iterrows():
            rec = self._window_record(key, row)
            rec["actual"] = {"count": int(row["total"]), "rows": int(row["n_rows"])}
            rec["_cause"] = "short"
            out.append(rec)
        return out

    def _causes(self, events: pd.DataFrame) -> np.ndarray:
        """Each lost event's cause (lost.py names them), for all of them at once."""
        queries = {f.id: f.batch.query for f in self.history.batches.values()}
        marks = {b: self.history.last_watermark(q) for b, q in queries.items()}
        mark = events["batch"].map(marks).fillna(-1).to_numpy(np.int64)
        planned, batch = events["planned"].to_numpy(), events["batch"].to_numpy()
        end = events["window_end_ms"].to_numpy(np.int64)
        return np.select([planned < 0, batch < 0, end > mark], ["unread", "uncommitted", "state"],
                         "unwritten")

    def duplicated(self) -> list[dict]:
        t = self.table
        dup = t[t["total"] > np.maximum(t["e"], t["largest"])]
        out = []
        for key, row in dup.head(_SAMPLE).iterrows():
            rec = self._window_record(key, row)
            rec["_cause"] = tuple(w.get("batch_id", -1) for w in rec["written_by"])
            out.append(rec)
        return out

    def duplicated_rows(self) -> int:
        """How many windows the sink holds more copies of than one: the rows behind the pairs
        `duplicated` counts (each extra copy counts its window's events again)."""
        t = self.table
        return int((t["total"] > np.maximum(t["e"], t["largest"])).sum())

    def unexpected(self) -> list[dict]:
        t = self.table
        extra = t[t["largest"] > t["e"]]
        out = []
        for key, row in extra.head(_SAMPLE).iterrows():
            rec = self._window_record(key, row)
            rec["_cause"] = self._why_unexpected(key, int(row["e"]))
            if rec["_cause"] == "too-many":
                rec["actual"] = {"count": int(row["largest"]), "sum_amount": int(row["first_sum"])}
            out.append(rec)
        return out

    def wrong(self) -> list[dict]:
        t = self.table
        bad = t[(t["e"] > 0) & (t["largest"] == t["e"]) & (t["first_sum"] != t["e_sum"])]
        out = []
        for key, row in bad.head(_SAMPLE).iterrows():
            rec = self._window_record(key, row)
            rec["actual"] = {"count": int(row["largest"]), "sum_amount": int(row["first_sum"])}
            rec["_cause"] = "sum"
            out.append(rec)
        self.wrong_count = len(bad)
        return out

    # -- records ---------------------------------------------------------------------------
    def _rows_of(self, key: tuple) -> pd.DataFrame:
        r = self.rows
        return r[(r["key"] == key[0]) & (r["window_start_ms"] == key[1]) & (r["window_end_ms"] == key[2])]

    def _window_record(self, key: tuple, row: pd.Series) -> dict:
        k, start, end = key
        rows = self._rows_of(key)
        inside = self.pairs[(self.pairs["key"] == k) & (self.pairs["window_start_ms"] == start)]
        read = sorted({int(b) for b in inside["planned"] if b >= 0})
        rec = {"key": str(k), "window": [int(start), int(end)], "window_s": self._seconds(start, end),
               "row": f"key={k} window=[{int(start)},{int(end)})",
               "expected": {"count": int(row["e"]), "sum_amount": int(row["e_sum"])},
               "written_by": written_by(rows, self.inputs.rel_s)}
        if read:
            rec["read_by_batches"] = read
        rec["_rows"] = rows
        return rec

    def _event_record(self, r) -> dict:
        planned, batch = int(r.planned), int(r.batch)
        rec = {"event_id": int(r.event_id), "key": str(r.key),
               "window": [int(r.window_start_ms), int(r.window_end_ms)],
               "window_s": self._seconds(r.window_start_ms, r.window_end_ms),
               "partition": int(r.partition), "offset": int(r.offset), "read_by_batch": planned}
        if planned >= 0 and batch < 0:
            rec["batch_committed"] = False
        rec["written_by"] = []
        rec["_cause"] = getattr(r, "cause", None)
        return rec

    def _seconds(self, start_ms, end_ms) -> list[float]:
        """A window in the story's unit: seconds from the first event sent."""
        return [round(int(t) / 1000.0 - self.inputs.t0_s, 3) for t in (start_ms, end_ms)]

    def _why_unexpected(self, key: tuple, e: int) -> str:
        k, start, end = key
        same = self.pairs[(self.pairs["key"] == k) & (self.pairs["window_start_ms"] == start)]
        if e > 0:
            return "too-many"
        if len(same) and same["late"].all():
            return "late"
        return "never-sent" if not (self.inputs.real["key"] == k).any() else "no-event-in-window"

    # -- late rows, Spark's way ------------------------------------------------------------
    def late_groups(self) -> dict[int, int]:
        """Batch id -> the oracle's late rows counted Spark's way: one per (key, window)."""
        late = self.pairs[self.pairs["late"]]
        return late.drop_duplicates(["batch", *WINDOW]).groupby("batch").size().astype(int).to_dict()

    def updated_groups(self) -> dict[int, int]:
        """Batch id -> the state rows Spark's aggregation writes for it (its numRowsUpdated, once
        per run of the batch's plan): one per (key, window) of its on-time events, the harness's
        control events' own window included."""
        on_time = self.pairs.loc[~self.pairs["late"] & (self.pairs["batch"] >= 0), ["batch", *WINDOW]]
        truth = self.inputs.truth
        if "control" in truth.columns and truth["control"].any():
            own = truth[truth["control"].to_numpy(bool)]
            own = own.assign(batch=assign_batches(own, self.inputs.batches).to_numpy())
            own = assign_windows(own[own["batch"] >= 0], self.window_ms, self.slide_ms)
            on_time = pd.concat([on_time, own[["batch", *WINDOW]]], ignore_index=True)
        return on_time.drop_duplicates().groupby("batch").size().astype(int).to_dict()

    def on_time_lost(self, batch_ids: set[int]) -> list[dict]:
        """Events these batches read that the oracle says were on time, in windows that came
        out short or not at all: where Spark's extra drops went (for a short window, counts
        cannot say which of its events)."""
        t = self.table
        short = t[t["total"] < t["e"]].index
        pairs = self.pairs
        kept = pairs[~pairs["late"] & ~pairs["open"] & pairs["batch"].isin(list(batch_ids))]
        kept = kept[pd.MultiIndex.from_frame(kept[WINDOW]).isin(short)] if len(kept) else kept
        out = []
        kept = kept.sort_values(["batch", "partition", "offset"], kind="stable").head(_SAMPLE)
        for r in kept.itertuples(index=False):
            rec = self._event_record(r)
            rec["written_by"] = written_by(self._rows_of((r.key, r.window_start_ms, r.window_end_ms)),
                                           self.inputs.rel_s)
            rec["_cause"] = int(r.batch)
            out.append(rec)
        return out
