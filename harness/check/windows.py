"""Compare what the sink holds with ground truth: lost, duplicated, unexpected, late.

Ground truth is what the generator actually sent (partition and offset of every
event). The checker replays Spark's own rules on it: which micro-batch read each
event (from the checkpoint's offset log) and which watermark that batch filtered
late rows with, so an event that Spark rightly dropped as late is counted as
`dropped_late`, not as lost. The unit of accounting is an (event, window) pair: for
tumbling windows that is one per event.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.check.checkpoint import Batch
from workloads.wire import CONTROL_KEY

WINDOW = ["key", "window_start_ms", "window_end_ms"]


@dataclass(frozen=True)
class CheckResult:
    counts: dict                 # produced, expected, delivered, lost, duplicated, unexpected, dropped_late
    mismatched_windows: int      # windows whose count matches but whose sum does not
    event_time_latency_ms: np.ndarray
    processing_time_latency_ms: np.ndarray

    @property
    def problems(self) -> list[str]:
        """What failed beyond the counts, each as a phrase for the verdict."""
        n = self.mismatched_windows
        if not n:
            return []
        return [f"{n:,} window{'s have' if n != 1 else ' has'} the right count but a wrong sum"]


def assign_windows(events: pd.DataFrame, window_ms: int, slide_ms: int) -> pd.DataFrame:
    """One row per (event, window containing it): Spark's window(ts, size, slide)."""
    t = events["event_time_ms"].to_numpy()
    last_start = t - (t % slide_ms)
    parts = []
    for k in range(window_ms // slide_ms):
        start = last_start - k * slide_ms
        parts.append(events.assign(window_start_ms=start, window_end_ms=start + window_ms))
    return pd.concat(parts, ignore_index=True)


def assign_batches(events: pd.DataFrame, batches: list[Batch]) -> pd.Series:
    """The id of the committed batch that read each event, -1 when none did (an event
    between one query's last batch and a fresh query's latest offsets is read by none)."""
    batch_of = np.full(len(events), -1, dtype=np.int64)
    part, off = events["partition"].to_numpy(), events["offset"].to_numpy()
    chained: dict[int, int] = {}
    for batch in batches:
        start = batch.start_offsets if batch.start_offsets is not None else chained
        if batch.committed:
            for p, end in batch.end_offsets.items():
                hit = (part == p) & (off >= start.get(p, 0)) & (off < end)
                batch_of[hit] = batch.batch_id
        chained = {**start, **batch.end_offsets}
    return pd.Series(batch_of, index=events.index)


def late_watermarks(batches: list[Batch]) -> dict[int, int]:
    """Batch id -> watermark used to drop late rows in that batch.

    Since Spark 3.4 (multiple stateful operators allowed, the default) late rows are
    filtered with the previous batch's watermark, state is evicted with the current one.
    A query's first batch has no previous one: a fresh checkpoint starts with no watermark.
    """
    marks, previous = {}, None
    for batch in batches:
        source = previous if previous is not None and previous.query == batch.query else batch
        marks[batch.batch_id] = source.watermark_ms
        previous = batch
    return marks


def expected_pairs(truth: pd.DataFrame, batches: list[Batch], window_ms: int, slide_ms: int):
    """(event, window) pairs of real events, with `late` set where Spark drops them."""
    real = truth[~truth["control"]].copy()
    real["batch"] = assign_batches(real, batches)
    pairs = assign_windows(real, window_ms, slide_ms)
    marks = late_watermarks(batches)
    wm = pairs["batch"].map(marks).fillna(-1).astype(np.int64)
    pairs["late"] = (pairs["batch"] >= 0) & (pairs["window_end_ms"] <= wm)
    return real, pairs


def check(truth: pd.DataFrame, sink: pd.DataFrame, batches: list[Batch],
          window_ms: int, slide_ms: int) -> CheckResult:
    """Event-level accounting of a windowed count sink against ground truth.

    `sink` has columns key, window_start_ms, window_end_ms, count, sum_amount, committed_ms.
    """
    real, pairs = expected_pairs(truth, batches, window_ms, slide_ms)
    kept = pairs[~pairs["late"]]
    expected = kept.groupby(WINDOW).agg(e_count=("event_id", "size"), e_sum=("amount", "sum"))
    rows = sink[~_control_rows(truth, sink, window_ms, slide_ms)]
    got = rows.groupby(WINDOW).agg(n_rows=("count", "size"), d_total=("count", "sum"),
                                   d_max=("count", "max"), d_sum=("sum_amount", "first"),
                                   first_ms=("committed_ms", "min"))
    both = expected.join(got, how="outer").fillna(0)
    counts = _counts(real, pairs, both)
    mismatched = int(((both["d_max"] == both["e_count"]) & (both["d_sum"] != both["e_sum"])
                      & (both["e_count"] > 0)).sum())
    return CheckResult(counts, mismatched, *_latencies(kept, got))


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
