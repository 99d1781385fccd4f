"""The window oracle (harness/check/windows.py) of a large run, from its files, chunk by chunk.

The sink of a windowed count holds a row per (key, window): thousands of times fewer rows
than events, so it is read whole. Truth is read a chunk at a time (sweep.chunks); each
chunk's (event, window) pairs are counted into its windows, and the chunks' counts are
summed. A window's id is its key's code times the span of window slots plus its slot, the
slots counted from the earliest event time in the truth files' statistics, so that every
chunk gives a window the same id. Only the per-event latencies are kept whole, as the
in-memory check keeps them. The result is windows.check's, window for window and in the
same order (tests/test_checker_scaled.py).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness.check import large, sweep, windows
from harness.check.batch_reads import assign_batches, last_watermark
from harness.check.checkpoint import Batch
from harness.check.result import CheckResult

_COLUMNS = ["event_id", "key", "event_time_ms", "amount", "partition", "offset", "append_ms", "control"]
_MIN = np.iinfo(np.int64).min


class _Keys:
    """A code per key, given in the order keys are first met."""

    def __init__(self):
        self.names: list = []
        self.code: dict = {}

    def of(self, values) -> np.ndarray:
        """The codes of `values` (any array-like of keys), new keys getting new codes."""
        uniques_at, uniques = pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=False)
        return self._codes(uniques)[uniques_at]

    def of_dictionary(self, column: pa.ChunkedArray) -> np.ndarray:
        """The codes of a dictionary-encoded column, from its dictionaries alone."""
        parts = []
        for chunk in column.chunks:
            codes = self._codes([*chunk.dictionary.to_pylist(), None])   # the last one: missing
            parts.append(codes[chunk.indices.fill_null(len(codes) - 1).to_numpy(zero_copy_only=False)])
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def _codes(self, uniques) -> np.ndarray:
        out = np.empty(len(uniques), np.int64)
        for i, name in enumerate(uniques):
            name = None if name is None or (isinstance(name, float) and np.isnan(name)) else name
            if name not in self.code:
                self.code[name] = len(self.names)
                self.names.append(name)
            out[i] = self.code[name]
        return out


class _Slots:
    """Window slots counted from the earliest event time (truth files' statistics), and the
    int64 id of (key code, slot)."""

    def __init__(self, paths: list, window_ms: int, slide_ms: int):
        lo, hi = _time_range(paths)
        self.slide_ms, self.window_ms, self.k = slide_ms, window_ms, window_ms // slide_ms
        self.base = lo // slide_ms - self.k
        self.span = hi // slide_ms - self.base + 1

    def id(self, code: np.ndarray, start: np.ndarray) -> np.ndarray:
        return code * self.span + (start // self.slide_ms - self.base)

    def of_rows(self, rows: pd.DataFrame, keys: _Keys) -> np.ndarray:
        """The id of each sink row's window, -1 where no event's window could be it."""
        start = rows["window_start_ms"].to_numpy(np.int64)
        slot = start // self.slide_ms - self.base
        ok = ((start % self.slide_ms == 0) & (slot >= 0) & (slot < self.span)
              & (rows["window_end_ms"].to_numpy(np.int64) - start == self.window_ms))
        return np.where(ok, keys.of(rows["key"].to_numpy()) * self.span + slot, -1)


def _time_range(paths: list) -> tuple[int, int]:
    """The smallest and largest event time in the truth files, from their statistics (or read)."""
    lo, hi = None, None
    for path in paths:
        meta = pq.ParquetFile(path).metadata
        for i in range(meta.num_row_groups):
            rg = meta.row_group(i)
            stats = next(rg.column(j).statistics for j in range(rg.num_columns)
                         if rg.column(j).path_in_schema == "event_time_ms")
            if stats is None or not stats.has_min_max:
                times = pq.read_table(path, columns=["event_time_ms"])["event_time_ms"]
                stats_lo, stats_hi = pa.compute.min(times).as_py(), pa.compute.max(times).as_py()
            else:
                stats_lo, stats_hi = stats.min, stats.max
            if stats_lo is not None:
                lo = stats_lo if lo is None else min(lo, stats_lo)
                hi = stats_hi if hi is None else max(hi, stats_hi)
    return (int(lo), int(hi)) if lo is not None and hi is not None else (0, 0)


class _SinkWindows:
    """The sink's windows by id: rows, total and largest count, the first row's sum, the
    first commit (as windows._sink_per_window counts them)."""

    def __init__(self, rows: pd.DataFrame, wid: np.ndarray):
        known = np.flatnonzero(wid >= 0)
        self.ids, inverse = np.unique(wid[known], return_inverse=True)
        n = len(self.ids)
        count = rows["count"].to_numpy(np.int64)[known]
        self.n_rows = np.bincount(inverse, minlength=n)
        self.d_total = np.bincount(inverse, weights=count, minlength=n).astype(np.int64)
        self.d_max = np.zeros(n, np.int64)
        np.maximum.at(self.d_max, inverse, count)
        first_row = np.full(n, len(rows), np.int64)
        np.minimum.at(first_row, inverse, known)
        self.d_sum = rows["sum_amount"].to_numpy(np.int64)[first_row] if n else np.zeros(0, np.int64)
        self.first_ms = np.full(n, np.iinfo(np.int64).max, np.int64)
        np.minimum.at(self.first_ms, inverse, rows["committed_ms"].to_numpy(np.int64)[known])

    def at(self, wid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where each id is among the sink's windows, and whether it is there at all."""
        at = np.clip(np.searchsorted(self.ids, wid), 0, max(len(self.ids) - 1, 0))
        return at, (self.ids[at] == wid) if len(self.ids) else np.zeros(len(wid), bool)


class _Counts:
    """The chunks' windows and counts, summed; the latencies per delivered pair."""

    def __init__(self, capacity: int):
        self.parts: list[pd.DataFrame] = []
        self.late: list[pd.DataFrame] = []
        self.first_id: dict[int, int] = {}
        self.produced = self.dropped_late = self.open = self.n = 0
        self.processing = np.empty(capacity)
        self.processing_at = np.empty(capacity, np.int64)

    def add_latencies(self, processing: np.ndarray, at_ms: np.ndarray) -> None:
        end = self.n + len(at_ms)
        self.processing[self.n:end], self.processing_at[self.n:end] = processing, at_ms
        self.n = end


def check(files: large.RunFiles, batches: list[Batch], params: dict) -> CheckResult:
    """windows.check from the run's files."""
    window_ms, slide_ms = params["window_ms"], params["slide_ms"]
    paths = sweep.files(files.truth_dir)
    slots, keys = _Slots(paths, window_ms, slide_ms), _Keys()
    control = pq.read_table(paths, columns=["key", "event_time_ms", "control"],
                            filters=[("control", "==", True)]).to_pandas() if paths else None
    sink = pd.read_parquet(files.sink)
    rows = sink[~windows._control_rows(control, sink, window_ms, slide_ms)]
    del sink
    rows_wid = slots.of_rows(rows, keys)
    ours = _SinkWindows(rows, rows_wid)
    counts = _Counts(sweep.rows(paths) * slots.k)
    end_of_run = last_watermark(batches)
    for chunk in sweep.chunks(paths, _COLUMNS):
        _add_chunk(counts, chunk, files.deleted, batches, slots, keys, ours, end_of_run)
    return _result(counts, slots, keys, rows, rows_wid, ours)


def _add_chunk(counts: _Counts, chunk: pa.Table, deleted: list[dict], batches: list[Batch], slots: _Slots,
               keys: _Keys, ours: _SinkWindows, end_of_run: int) -> None:
    """One chunk of truth: its real events' pairs counted into their windows (windows.check)."""
    real = chunk.filter(pa.array(large.real(chunk, deleted)))
    counts.produced += real.num_rows
    if not real.num_rows:
        return
    code = keys.of_dictionary(real["key"]) if pa.types.is_dictionary(real["key"].type) \
        else keys.of(real["key"].to_numpy(zero_copy_only=False))
    ids = real["event_id"].to_numpy()
    firsts = pd.Series(ids).groupby(code).min()
    for c, i in zip(firsts.index.tolist(), firsts.tolist(), strict=True):
        counts.first_id[c] = min(i, counts.first_id.get(c, i))
    frame = real.select(["partition", "offset"]).to_pandas()
    batch = np.tile(assign_batches(frame, batches).to_numpy(), slots.k)
    t = real["event_time_ms"].to_numpy()
    start = ((t - t % slots.slide_ms)[None, :]
             - slots.slide_ms * np.arange(slots.k, dtype=np.int64)[:, None]).ravel()
    end = start + slots.window_ms
    wid = slots.id(np.tile(code, slots.k), start)
    late = (batch >= 0) & (end <= windows.late_marks(batch, batches))
    at, emitted = ours.at(wid)
    still_open = (end > end_of_run) & ~emitted
    keep = ~late & ~still_open
    counts.dropped_late += int(late.reshape(slots.k, -1).all(axis=0).sum())
    counts.open += int((still_open & ~late).sum())
    if late.any():   # Spark counts late rows one per (batch, key, window)
        counts.late.append(pd.DataFrame({"batch": batch[late], "wid": wid[late]}).drop_duplicates())
    amount, event_ms = np.tile(real["amount"].to_numpy(), slots.k), np.tile(t, slots.k)
    counts.parts.append(_per_window(wid, keep, amount, event_ms))
    delivered = keep & emitted
    first_ms = ours.first_ms[at[delivered]]
    append_ms = np.tile(real["append_ms"].to_numpy(), slots.k)[delivered]
    counts.add_latencies((first_ms - append_ms).astype(float), first_ms)


def _per_window(wid: np.ndarray, keep: np.ndarray, amount: np.ndarray, event_ms: np.ndarray) -> pd.DataFrame:
    """Every window of the chunk's pairs: the kept pairs' count, sum and newest event time."""
    ids, inverse = np.unique(wid, return_inverse=True)
    n = len(ids)
    newest = np.full(n, _MIN, np.int64)
    np.maximum.at(newest, inverse[keep], event_ms[keep])
    return pd.DataFrame({"wid": ids, "e_count": np.bincount(inverse[keep], minlength=n),
                         "e_sum": np.bincount(inverse[keep], weights=amount[keep],
                                              minlength=n).astype(np.int64),
                         "newest": newest})


def _result(counts: _Counts, slots: _Slots, keys: _Keys, rows: pd.DataFrame, rows_wid: np.ndarray,
            ours: _SinkWindows) -> CheckResult:
    """The chunks' windows in windows.check's order (keys by their first event id, then
    slots), joined with the sink's, then windows.result."""
    parts = pd.concat(counts.parts, ignore_index=True) if counts.parts else \
        pd.DataFrame({"wid": [], "e_count": [], "e_sum": [], "newest": []}, dtype=np.int64)
    per = parts.groupby("wid", sort=False).agg(e_count=("e_count", "sum"), e_sum=("e_sum", "sum"),
                                               newest=("newest", "max"))
    wid = per.index.to_numpy(np.int64)
    code, slot = wid // slots.span, wid % slots.span
    rank = np.zeros(len(keys.names), np.int64)
    firsts = sorted(counts.first_id, key=counts.first_id.__getitem__)
    rank[firsts] = np.arange(len(firsts))
    order = np.lexsort((slot, rank[code]))
    wid, code, slot = wid[order], code[order], slot[order]
    start = (slot + slots.base) * slots.slide_ms
    names = np.array(keys.names, dtype=object)
    index = pd.MultiIndex.from_arrays([names[code], start, start + slots.window_ms], names=windows.WINDOW)
    at, there = ours.at(wid)
    pick = np.where(there, at, 0)

    def sink_value(values: np.ndarray) -> np.ndarray:
        return np.where(there, values[pick], 0) if len(values) else np.zeros(len(wid), np.int64)

    ours_frame = pd.DataFrame({"n_rows": sink_value(ours.n_rows), "d_total": sink_value(ours.d_total),
                               "d_max": sink_value(ours.d_max), "d_sum": sink_value(ours.d_sum),
                               "first_ms": sink_value(ours.first_ms)})
    extra_rows = rows[~np.isin(rows_wid, wid)]
    extra = extra_rows.groupby(windows.WINDOW).agg(n_rows=("count", "size"), d_total=("count", "sum"),
                                                  d_max=("count", "max"), d_sum=("sum_amount", "first"),
                                                  first_ms=("committed_ms", "min"))
    e = per.to_numpy()[order] if len(per) else np.zeros((0, 3), np.int64)
    late = pd.concat(counts.late).drop_duplicates() if counts.late else ()
    other = {"dropped_late": counts.dropped_late, "open": counts.open, "dropped_late_spark": len(late)}
    per_window = windows.Windows(index, e[:, 0].astype(np.int64), e[:, 1].astype(np.int64),
                                 e[:, 2].astype(np.int64), ours_frame, extra)
    return windows.result(per_window, counts.produced, other, counts.processing[:counts.n],
                          counts.processing_at[:counts.n])
