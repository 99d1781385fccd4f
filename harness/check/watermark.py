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
import pyarrow as pa

from harness.check import large, sweep
from harness.check.batch_reads import assign_batches
from harness.check.checkpoint import Batch


def expected_watermarks(truth: pd.DataFrame, batches: list[Batch], delay_ms: int) -> dict[int, int]:
    """Batch id -> the watermark it must run with, for every batch."""
    return _marks(_newest(truth, batches), batches, delay_ms)


def check(truth: pd.DataFrame, batches: list[Batch], delay_ms: int) -> list[str]:
    """Problems when a committed batch's watermark is not the declared one's."""
    return _problems(expected_watermarks(truth, batches, delay_ms), batches, delay_ms)


def check_files(files: large.RunFiles, batches: list[Batch], delay_ms: int) -> list[str]:
    """`check` from a large run's files, chunk by chunk."""
    newest: dict[int, int] = {}
    columns = ["partition", "offset", "event_time_ms", "control"]
    for chunk in sweep.chunks(sweep.files(files.truth_dir), columns):
        # the deleted events were never read; the control events were
        keep = large.real(chunk, files.deleted) | chunk["control"].to_numpy(zero_copy_only=False)
        for b, t in _newest(chunk.filter(pa.array(keep)).to_pandas(), batches).items():
            newest[b] = max(t, newest.get(b, t))
    return _problems(_marks(newest, batches, delay_ms), batches, delay_ms)


def _newest(events: pd.DataFrame, batches: list[Batch]) -> dict[int, int]:
    """Batch id -> the largest event time it read (control events included)."""
    events = events[["partition", "offset", "event_time_ms"]]
    read_by = assign_batches(events, batches, committed_only=False)
    return {int(b): int(t) for b, t in events["event_time_ms"].groupby(read_by.to_numpy()).max().items()}


def _marks(newest: dict[int, int], batches: list[Batch], delay_ms: int) -> dict[int, int]:
    out: dict[int, int] = {}
    mark, query = 0, None
    for batch in batches:
        if batch.query != query:          # a fresh checkpoint starts with no watermark
            mark, query = 0, batch.query
        out[batch.batch_id] = mark
        if batch.batch_id in newest:
            mark = max(mark, newest[batch.batch_id] - delay_ms)
    return out


def _problems(expected: dict[int, int], batches: list[Batch], delay_ms: int) -> list[str]:
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
