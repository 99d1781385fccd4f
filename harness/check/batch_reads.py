"""Spark's rules applied to ground truth: which batch read each event, and the watermark
each batch dropped late rows with."""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.check.checkpoint import Batch


def assign_batches(events: pd.DataFrame, batches: list[Batch], committed_only: bool = True) -> pd.Series:
    """The id of the committed batch that read each event, -1 when none did (an event
    between one query's last batch and a fresh query's latest offsets is read by none).
    With `committed_only` False, a batch planned but never committed counts too.

    Per partition the batches' offset ranges are disjoint, so each event's batch is found
    by a binary search over the ranges' starts: O(events x log batches)."""
    batch_of = np.full(len(events), -1, dtype=np.int64)
    part, off = events["partition"].to_numpy(), events["offset"].to_numpy()
    ranges: dict[int, list[tuple[int, int, int]]] = {}
    chained: dict[int, int] = {}
    for batch in batches:
        start = batch.start_offsets if batch.start_offsets is not None else chained
        if batch.committed or not committed_only:
            for p, end in batch.end_offsets.items():
                if end > start.get(p, 0):
                    ranges.setdefault(p, []).append((start.get(p, 0), end, batch.batch_id))
        chained = {**start, **batch.end_offsets}
    for p, spans in ranges.items():
        spans.sort()
        starts = np.array([s for s, _, _ in spans], dtype=np.int64)
        ends = np.array([e for _, e, _ in spans], dtype=np.int64)
        ids = np.array([b for _, _, b in spans], dtype=np.int64)
        here = np.flatnonzero(part == p)
        at = np.searchsorted(starts, off[here], side="right") - 1
        inside = (at >= 0) & (off[here] < ends[np.maximum(at, 0)])
        batch_of[here[inside]] = ids[at[inside]]
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


def record_ident(events: pd.DataFrame) -> pd.Series:
    """One int64 per Kafka record: partition and offset (a re-sent copy of an event is a
    record of its own, with the same event_id)."""
    return events["partition"].astype(np.int64) * (1 << 40) + events["offset"].astype(np.int64)


def real_events(truth: pd.DataFrame, batches: list[Batch], columns: list[str] | None = None) -> pd.DataFrame:
    """The workload's own events (not the harness's control events), with `columns` only
    when given, each with the `batch` that read it (-1: none committed did). One copy of
    the rows kept, nothing more."""
    real = truth.take(np.flatnonzero(~truth["control"].to_numpy()))
    if columns is not None:
        real = real[[c for c in columns if c != "batch"]]
    real["batch"] = assign_batches(real, batches).to_numpy()
    return real


def last_watermark(batches: list[Batch]) -> int:
    """The watermark the last query's last committed batch evicted state with: output up to
    it is final. -1 when that query committed nothing."""
    if not batches:
        return -1
    last = batches[-1].query
    return max((b.watermark_ms for b in batches if b.query == last and b.committed), default=-1)


def by_batch(rows: pd.DataFrame, batches: list[Batch]) -> dict[int, pd.DataFrame]:
    """The rows each committed batch read (assign_batches), by batch id; a batch that read none
    has no entry."""
    read = rows.assign(batch=assign_batches(rows, batches).to_numpy())
    return dict(tuple(read[read["batch"] >= 0].groupby("batch", sort=False)))


def committed_in_order(batches: list[Batch], until: int | None = None):
    """Each committed batch up to batch `until` (all when None), in order, with whether it is the
    first of its query (a fresh checkpoint: an operator's state starts empty there)."""
    query: int | None = None
    for batch in batches:
        if until is not None and batch.batch_id > until:
            break
        if not batch.committed:
            continue
        yield batch, batch.query != query
        query = batch.query

