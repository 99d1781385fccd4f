"""An independent watermark oracle: what every batch's watermark must be, from ground truth.

Spark computes the watermark a batch runs with (`batchWatermarkMs` in its offset log)
from the rows the batches before it read: the largest event time seen, minus the
declared delay, never moving back, starting from 0 on a fresh checkpoint. This module
computes the same from what the generator sent (control events included: they are rows
the query reads) and each batch's offsets, and compares. A pipeline whose real watermark
differs from the declared one (event time from Kafka's timestamp, a tighter delay) fails
with both values, instead of having its drops explained by the watermark it really used.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.check.checkpoint import Batch
from harness.check.replay import assign_batches


def expected_watermarks(truth: pd.DataFrame, batches: list[Batch], delay_ms: int) -> dict[int, int]:
    """Batch id -> the watermark it must run with, for every batch."""
    events = truth[["partition", "offset", "event_time_ms"]]
    read_by = assign_batches(events, batches, committed_only=False)
    newest = events["event_time_ms"].groupby(read_by.to_numpy()).max().to_dict()
    out: dict[int, int] = {}
    mark, query = 0, None
    for batch in batches:
        if batch.query != query:          # a fresh checkpoint starts with no watermark
            mark, query = 0, batch.query
        out[batch.batch_id] = mark
        if batch.batch_id in newest:
            mark = max(mark, int(newest[batch.batch_id]) - delay_ms)
    return out


def check(truth: pd.DataFrame, batches: list[Batch], delay_ms: int) -> list[str]:
    """Problems when a committed batch's watermark is not the declared one's."""
    expected = expected_watermarks(truth, batches, delay_ms)
    wrong = [(b, expected[b.batch_id]) for b in batches
             if b.committed and b.watermark_ms != expected[b.batch_id]]
    if not wrong:
        return []
    first, want = wrong[0]
    off = np.array([b.watermark_ms - w for b, w in wrong])
    return [f"the watermark is not the declared one ({delay_ms:,} ms behind the newest event time): "
            f"{len(wrong):,} of {sum(b.committed for b in batches):,} batches differ, the first "
            f"batch {first.batch_id} ran with {first.watermark_ms:,} ms where the declared delay gives "
            f"{want:,} ms (Spark's minus ours: {int(off.min()):+,} to {int(off.max()):+,} ms)"]
