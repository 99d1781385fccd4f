"""Compare what the sink holds with ground truth: lost, duplicated, unexpected, late.

Ground truth is what the generator actually sent (partition and offset of every
event). The checker replays Spark's own rules on it: which micro-batch read each
event (from the checkpoint's offset log) and which watermark that batch filtered
late rows with, so an event that Spark rightly dropped as late is counted as
`dropped_late`, not as lost. The unit of accounting is an (event, window) pair: for
tumbling windows that is one per event.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.check.checkpoint import Batch
from harness.check.replay import assign_batches, last_watermark, late_watermarks
from harness.check.result import CheckResult, concat, discrepancies, plural
from workloads.wire import CONTROL_KEY

WINDOW = ["key", "window_start_ms", "window_end_ms"]


def assign_windows(events: pd.DataFrame, window_ms: int, slide_ms: int) -> pd.DataFrame:
    """One row per (event, window containing it): Spark's window(ts, size, slide)."""
    t = events["event_time_ms"].to_numpy()
    last_start = t - (t % slide_ms)
    parts = []
    for k in range(window_ms // slide_ms):
        start = last_start - k * slide_ms
        parts.append(events.assign(window_start_ms=start, window_end_ms=start + window_ms))
    return pd.concat(parts, ignore_index=True)


def expected_pairs(truth: pd.DataFrame, batches: list[Batch], window_ms: int, slide_ms: int):
    """(event, window) pairs of real events, with `late` set where Spark drops them."""
    real = truth[~truth["control"]].copy()
    real["batch"] = assign_batches(real, batches)
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
    """
    window_ms, slide_ms = params["window_ms"], params["slide_ms"]
    real, pairs = expected_pairs(truth, batches, window_ms, slide_ms)
    rows = sink[~_control_rows(truth, sink, window_ms, slide_ms)]
    got = rows.groupby(WINDOW).agg(n_rows=("count", "size"), d_total=("count", "sum"),
                                   d_max=("count", "max"), d_sum=("sum_amount", "first"),
                                   first_ms=("committed_ms", "min"))
    emitted = (pd.MultiIndex.from_frame(pairs[WINDOW]).isin(got.index) if len(got)
               else np.zeros(len(pairs), bool))
    still_open = (pairs["window_end_ms"] > last_watermark(batches)).to_numpy() & ~emitted
    kept = pairs[~pairs["late"].to_numpy() & ~still_open]
    expected = kept.groupby(WINDOW).agg(e_count=("event_id", "size"), e_sum=("amount", "sum"))
    both = expected.join(got, how="outer").fillna(0)
    counts = _counts(real, pairs, both)
    counts["open"] = int((still_open & ~pairs["late"].to_numpy()).sum())
    # Spark counts late rows after partial aggregation: one per (batch, key, window)
    counts["dropped_late_spark"] = int(len(pairs[pairs["late"]].drop_duplicates(["batch", *WINDOW])))
    wrong_sum = (both["d_max"] == both["e_count"]) & (both["d_sum"] != both["e_sum"]) & (both["e_count"] > 0)
    problems = []
    if wrong_sum.any():
        n = int(wrong_sum.sum())
        verb = "has" if n == 1 else "have"
        problems.append(f"{plural(n, 'window')} {verb} the right count but a wrong sum")
    return CheckResult(counts, *_latencies(kept, got), problems, _discrepancies(both, wrong_sum))


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


def _counts(real: pd.DataFrame, pairs: pd.DataFrame, both: pd.DataFrame) -> dict:
    """Per window: e expected events, copies of counts c1..ck in the sink (total T, largest M).

    A replay after a restart on the same checkpoint (at-least-once) writes full copies:
    e, e gives T = 2e. A restart without state (at-most-once) writes disjoint partial
    copies: a, b with a + b <= e. Counts alone cannot tell how far copies overlap, so the
    checker reports the smallest loss and duplication consistent with them:
      lost       = max(0, e - T)           nothing counted twice unless T exceeds e
      duplicated = max(0, T - max(e, M))   effects beyond one full set
      unexpected = max(0, M - e)           one copy holds more than was ever sent
    lost - duplicated is then exact (e - T); each is a lower bound when copies overlap
    partly (a replay of a window whose state was partly lost).
    """
    late_events = pairs.groupby("event_id")["late"].all()
    e, total, largest = both["e_count"], both["d_total"], both["d_max"]
    return {
        "produced": int(len(real)),
        "expected": int(e.sum()),
        "delivered": int(total.sum()),
        "lost": int((e - total).clip(lower=0).sum()),
        "duplicated": int((total - np.maximum(e, largest)).clip(lower=0).sum()),
        "unexpected": int((largest - e).clip(lower=0).sum()),
        "dropped_late": int(late_events.sum()),
    }


def _latencies(kept: pd.DataFrame, got: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Event time: first visible - window end, per window. Processing time: first visible
    - Kafka append time, per (event, window) delivered."""
    event_time = (got["first_ms"] - got.index.get_level_values("window_end_ms")).to_numpy(dtype=float)
    joined = kept.join(got["first_ms"], on=WINDOW, how="inner")
    processing = (joined["first_ms"] - joined["append_ms"]).to_numpy(dtype=float)
    return event_time, processing
