"""Compare what the sink holds with ground truth: lost, duplicated, unexpected, late.

Ground truth is what the generator actually sent (partition and offset of every
event). The checker applies Spark's own rules to it: which micro-batch read each
event (from the checkpoint's offset log) and which watermark that batch filtered
late rows with, so an event that Spark rightly dropped as late is counted as
`dropped_late`, not as lost. The unit of accounting is an (event, window) pair: for
tumbling windows that is one per event.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.check.batch_reads import last_watermark, late_watermarks, real_events
from harness.check.checkpoint import Batch
from harness.check.result import CheckResult, concat, discrepancies, plural
from workloads.wire import CONTROL_KEY

WINDOW = ["key", "window_start_ms", "window_end_ms"]
# the truth columns the window oracles read (nothing else is copied)
NEEDED = ["event_id", "key", "event_time_ms", "amount", "partition", "offset", "append_ms"]


def assign_windows(events: pd.DataFrame, window_ms: int, slide_ms: int) -> pd.DataFrame:
    """One row per (event, window containing it): Spark's window(ts, size, slide)."""
    t = events["event_time_ms"].to_numpy()
    last_start = t - (t % slide_ms)
    parts = []
    for k in range(window_ms // slide_ms):
        start = last_start - k * slide_ms
        parts.append(events.assign(window_start_ms=start, window_end_ms=start + window_ms))
    return parts[0].reset_index(drop=True) if len(parts) == 1 else pd.concat(parts, ignore_index=True)


def expected_pairs(truth: pd.DataFrame, batches: list[Batch], window_ms: int, slide_ms: int):
    """(event, window) pairs of real events, with `late` set where Spark drops them."""
    real = real_events(truth, batches, NEEDED)
    pairs = assign_windows(real, window_ms, slide_ms)
    marks = late_watermarks(batches)
    wm = pairs["batch"].map(marks).fillna(-1).astype(np.int64)
    pairs["late"] = (pairs["batch"] >= 0) & (pairs["window_end_ms"] <= wm)
    return real, pairs


def check(truth: pd.DataFrame, sink: pd.DataFrame, batches: list[Batch], params: dict) -> CheckResult:
    """Event-level accounting of a windowed count sink against ground truth.

    `sink` has columns key, window_start_ms, window_end_ms, count, sum_amount, committed_ms.
    A window the last query's watermark had not passed when the run ended, and that is not
    in the sink, is open: its events are reported as `open`, not expected and not lost.

    Every (event, window) pair gets the int64 id of its window (key code x window slot),
    and every count is a bincount over those ids: no join, no frame of pairs, so 10
    million events check in seconds (benchmarks/test_checker_speed.py).
    """
    window_ms, slide_ms = params["window_ms"], params["slide_ms"]
    real = real_events(truth, batches, NEEDED)
    pairs = _Pairs(real, batches, window_ms, slide_ms)
    rows = sink[~_control_rows(truth, sink, window_ms, slide_ms)]
    wid = pairs.ids_of(rows)
    n_win = len(pairs.windows)
    ours, extra = _sink_per_window(rows, wid, n_win)
    emitted = ours["n_rows"].to_numpy() > 0
    still_open = (pairs.end > last_watermark(batches)) & ~emitted[pairs.wid]
    keep = ~pairs.late & ~still_open
    e_count = np.bincount(pairs.wid[keep], minlength=n_win)
    e_sum = np.bincount(pairs.wid[keep], weights=pairs.amount[keep], minlength=n_win).astype(np.int64)
    # Spark counts late rows after partial aggregation: one per (batch, key, window)
    late_batches = pairs.batch[pairs.late].astype(np.int64)
    other = {"dropped_late": int(pairs.late.reshape(pairs.k, -1).all(axis=0).sum()),
             "open": int((still_open & ~pairs.late).sum()),
             "dropped_late_spark": int(len(np.unique(late_batches * n_win + pairs.wid[pairs.late])))}
    delivered = keep & emitted[pairs.wid]
    first_ms = ours["first_ms"].to_numpy()[pairs.wid[delivered]]
    # Karimov et al.'s event time: from the newest event the window counted, not its end
    newest = np.full(n_win, np.iinfo(np.int64).min)
    np.maximum.at(newest, pairs.wid[keep], pairs.event_ms[keep])
    per_window = Windows(pairs.windows, e_count, e_sum, newest, ours, extra)
    return result(per_window, len(real), other, (first_ms - pairs.append_ms[delivered]).astype(float),
                  first_ms.astype(np.int64))


@dataclass
class Windows:
    """Per window some event falls in (in `index` order): the expected count and sum, the
    newest event time counted, and what the sink holds (`ours`); then the sink's windows no
    event falls in (`extra`, by key and window)."""

    index: pd.MultiIndex
    e_count: np.ndarray
    e_sum: np.ndarray
    newest: np.ndarray
    ours: pd.DataFrame       # n_rows, d_total, d_max, d_sum, first_ms
    extra: pd.DataFrame


def result(w: Windows, produced: int, other: dict, processing: np.ndarray,
           processing_at_ms: np.ndarray) -> CheckResult:
    """The CheckResult of the windows' counts; `other`: dropped_late, open, dropped_late_spark."""
    expected = pd.DataFrame({"e_count": w.e_count, "e_sum": w.e_sum}, index=w.index)
    both = expected.join(w.ours.set_axis(w.index))
    if len(w.extra):
        both = pd.concat([both, w.extra.assign(e_count=0, e_sum=0)])
    both = both[(both["e_count"] > 0) | (both["n_rows"] > 0)]
    counts = _counts(produced, other["dropped_late"], both)
    counts.update(open=other["open"], dropped_late_spark=other["dropped_late_spark"])
    wrong_sum = (both["d_max"] == both["e_count"]) & (both["d_sum"] != both["e_sum"]) & (both["e_count"] > 0)
    problems = []
    if wrong_sum.any():
        n = int(wrong_sum.sum())
        verb = "has" if n == 1 else "have"
        problems.append(f"{plural(n, 'window')} {verb} the right count but a wrong sum")
    seen = both[both["n_rows"] > 0]
    event_time = (seen["first_ms"] - seen.index.get_level_values("window_end_ms")).to_numpy(dtype=float)
    counted = (w.ours["n_rows"].to_numpy() > 0) & (w.e_count > 0)
    newest_ms = w.ours["first_ms"].to_numpy()[counted]
    return CheckResult(counts, event_time, processing, problems, _discrepancies(both, wrong_sum),
                       event_time_at_ms=seen["first_ms"].to_numpy(np.int64),
                       processing_time_at_ms=processing_at_ms,
                       event_time_newest_latency_ms=(newest_ms - w.newest[counted]).astype(float),
                       event_time_newest_at_ms=newest_ms.astype(np.int64))


def late_marks(batch: np.ndarray, batches: list[Batch]) -> np.ndarray:
    """The watermark each batch id in `batch` dropped late rows with (-1: no batch)."""
    marks = late_watermarks(batches)
    ids = np.array(sorted(marks), dtype=np.int64)
    mark_of = np.array([marks[b] for b in ids], dtype=np.int64)
    at = np.clip(np.searchsorted(ids, batch), 0, max(len(ids) - 1, 0))
    return np.where((batch >= 0) & (len(ids) > 0), mark_of[at] if len(ids) else -1, -1)


class _Pairs:
    """Every (event, window) pair as flat numpy arrays, k windows per event (k = window /
    slide), pair i of window k belonging to event i mod n; `wid` indexes `windows`."""

    def __init__(self, real: pd.DataFrame, batches: list[Batch], window_ms: int, slide_ms: int):
        self.window_ms, self.slide_ms = window_ms, slide_ms
        self.k = window_ms // slide_ms
        t = real["event_time_ms"].to_numpy(np.int64)
        last_start = t - t % slide_ms
        start = (last_start[None, :] - slide_ms * np.arange(self.k, dtype=np.int64)[:, None]).ravel()
        self.end = start + window_ms
        self.key_code, self.key_names = pd.factorize(real["key"].to_numpy())
        self.base = int(start.min()) if len(start) else 0
        slot = (start - self.base) // slide_ms
        self.slots = int(slot.max()) + 1 if len(slot) else 1
        combined = np.tile(self.key_code.astype(np.int64), self.k) * self.slots + slot
        del slot
        dense = len(self.key_names) * self.slots
        if dense <= max(4 * len(combined), 1 << 20):
            # few enough (key, slot) cells to count them all: no sort of the pairs
            present = np.flatnonzero(np.bincount(combined, minlength=dense))
            index = np.full(dense, -1, np.int64)
            index[present] = np.arange(len(present))
            self.ids, self.wid = present.astype(np.int64), index[combined]
        else:
            self.ids, self.wid = np.unique(combined, return_inverse=True)
        del combined
        self.batch = np.tile(real["batch"].to_numpy(np.int64), self.k)
        self.late = (self.batch >= 0) & (self.end <= late_marks(self.batch, batches))
        self.amount = np.tile(real["amount"].to_numpy(np.int64), self.k)
        self.append_ms = np.tile(real["append_ms"].to_numpy(np.int64), self.k)
        self.event_ms = np.tile(t, self.k)
        w_start = self.base + (self.ids % self.slots) * slide_ms
        self.windows = pd.MultiIndex.from_arrays(
            [self.key_names[self.ids // self.slots], w_start, w_start + window_ms], names=WINDOW)

    def ids_of(self, rows: pd.DataFrame) -> np.ndarray:
        """The window id of each sink row, -1 for a window no event falls in."""
        code = pd.Index(self.key_names).get_indexer(rows["key"].to_numpy()) if len(self.key_names) else \
            np.full(len(rows), -1)
        start = rows["window_start_ms"].to_numpy(np.int64)
        ok = ((code >= 0) & (start >= self.base) & ((start - self.base) % self.slide_ms == 0)
              & (rows["window_end_ms"].to_numpy(np.int64) - start == self.window_ms))
        combined = np.where(ok, code * self.slots + (start - self.base) // self.slide_ms, -1)
        at = np.clip(np.searchsorted(self.ids, combined), 0, max(len(self.ids) - 1, 0))
        hit = ok & (self.ids[at] == combined) if len(self.ids) else np.zeros(len(rows), bool)
        return np.where(hit, at, -1)


def _sink_per_window(rows: pd.DataFrame, wid: np.ndarray, n_win: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per window: rows, total and largest count, the first row's sum, the first commit;
    for the windows some event falls in (by id), then for the sink's other windows."""
    count = rows["count"].to_numpy(np.int64)
    total_sum = rows["sum_amount"].to_numpy(np.int64)
    committed = rows["committed_ms"].to_numpy(np.int64)
    known = wid >= 0
    w = wid[known]
    n_rows = np.bincount(w, minlength=n_win)
    d_total = np.bincount(w, weights=count[known], minlength=n_win).astype(np.int64)
    d_max = np.zeros(n_win, np.int64)
    np.maximum.at(d_max, w, count[known])
    first_row = np.full(n_win, len(rows), np.int64)
    np.minimum.at(first_row, w, np.flatnonzero(known))
    first_ms = np.full(n_win, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(first_ms, w, committed[known])
    d_sum = np.where(n_rows > 0, np.append(total_sum, 0)[np.minimum(first_row, len(rows))], 0)
    ours = pd.DataFrame({"n_rows": n_rows, "d_total": d_total, "d_max": d_max, "d_sum": d_sum,
                         "first_ms": np.where(n_rows > 0, first_ms, 0)})
    other = rows[~known].groupby(WINDOW).agg(n_rows=("count", "size"), d_total=("count", "sum"),
                                            d_max=("count", "max"), d_sum=("sum_amount", "first"),
                                            first_ms=("committed_ms", "min"))
    return ours, other


def _discrepancies(both: pd.DataFrame, wrong_sum: pd.Series) -> pd.DataFrame:
    """Window by window: expected count and sum against what the sink holds."""
    e, total, n = both["e_count"], both["d_total"], both["n_rows"]
    kinds = {"lost": (e > 0) & (n == 0), "unexpected": (e == 0) & (n > 0),
             "duplicated": (e > 0) & (n > 1) & (total > e),
             "wrong": ((e > 0) & (n >= 1) & (total < e)) | wrong_sum}
    frames = []
    for kind, mask in kinds.items():
        d = both[mask]
        item = d.index.to_frame(index=False)
        text = ("key=" + item["key"].astype(str) + " window=[" + item["window_start_ms"].astype(str) + ","
                + item["window_end_ms"].astype(str) + ")")
        expected = "count=" + _ints(d["e_count"]) + " sum=" + _ints(d["e_sum"])
        actual = _ints(d["n_rows"]) + " rows, count=" + _ints(d["d_total"]) + " sum=" + _ints(d["d_sum"])
        frames.append(discrepancies(kind, text, expected.reset_index(drop=True),
                                    actual.reset_index(drop=True)))
    return concat(frames)


def _ints(values: pd.Series) -> pd.Series:
    return values.astype(np.int64).astype(str)


def _control_rows(truth: pd.DataFrame, sink: pd.DataFrame, window_ms: int, slide_ms: int) -> pd.Series:
    """Sink rows that are the output of the harness's own control events: their key is
    CONTROL_KEY and their window is one a control event falls in. Nothing else is set aside."""
    control = truth[truth["control"]]
    windows = assign_windows(control, window_ms, slide_ms)
    own = set(windows[WINDOW].itertuples(index=False, name=None))
    is_own = pd.MultiIndex.from_frame(sink[WINDOW]).isin(own) if own else np.zeros(len(sink), bool)
    return pd.Series(is_own & (sink["key"] == CONTROL_KEY).to_numpy(), index=sink.index)


def final_watermark_ms(max_event_time_ms: int, params: dict) -> int:
    """The watermark at which every window holding an event up to `max_event_time_ms` is
    final: the end of the last such window."""
    window_ms, slide_ms = params["window_ms"], params["slide_ms"]
    return max_event_time_ms - max_event_time_ms % slide_ms + window_ms


def _counts(produced: int, dropped_late: int, both: pd.DataFrame) -> dict:
    """Per window: e expected events, copies of counts c1..ck in the sink (total T, largest M).

    A batch run again after a restart on the same checkpoint (at-least-once) writes full copies:
    e, e gives T = 2e. A restart without state (at-most-once) writes disjoint partial
    copies: a, b with a + b <= e. Counts alone cannot tell how far copies overlap, so the
    checker reports the smallest loss and duplication consistent with them:
      lost       = max(0, e - T)           nothing counted twice unless T exceeds e
      duplicated = max(0, T - max(e, M))   effects beyond one full set
      unexpected = max(0, M - e)           one copy holds more than was ever sent
    lost - duplicated is then exact (e - T); each is a lower bound when copies overlap
    partly (a window run again whose state was partly lost).
    """
    e, total, largest = both["e_count"], both["d_total"], both["d_max"]
    return {
        "produced": produced,
        "expected": int(e.sum()),
        "delivered": int(total.sum()),
        "lost": int((e - total).clip(lower=0).sum()),
        "duplicated": int((total - np.maximum(e, largest)).clip(lower=0).sum()),
        "unexpected": int((largest - e).clip(lower=0).sum()),
        "dropped_late": dropped_late,
    }
