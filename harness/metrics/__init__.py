"""Throughput and backpressure from a case's raw records (latency: metrics/latency.py).

Raw samples are kept in the run directory; statistics are computed here on demand.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from workloads.pipelines import progress_log


def read_progress(path: Path) -> list[dict]:
    """StreamingQueryProgress records, in the order they ran (workloads.pipelines.progress_log)."""
    return progress_log.read(path)


_end_ms = progress_log.end_ms


def dropped_by_watermark(progress: list[dict]) -> int:
    """Spark's own count of late rows dropped, over every batch (once each: once_per_batch) and
    stateful operator."""
    return sum(batch_dropped(p) for p in once_per_batch(progress))


def batch_dropped(record: dict) -> int:
    """numRowsDroppedByWatermark of one progress record, over its stateful operators."""
    return sum(int(op.get("numRowsDroppedByWatermark", 0)) for op in record.get("stateOperators", []))


def once_per_batch(progress: list[dict]) -> list[dict]:
    """Each batch of each query once, in the order they ran: the record of its last run that
    executed it (durationMs has addBatch), else its last record.

    A batch runs again when a restart finds its commits/N gone (a fault deleted it, a re-plan
    rolled it back), and each run leaves a record with its own counts: summed, the late rows
    of batch 9 run twice read 20 where the oracle, one batch 9 in the checkpoint, finds 10.
    The last run's is the one whose commit stands. A query is its id (a fresh checkpoint's
    query is another, numbering its batches from 0 again); an idle trigger's record repeats
    the next batch's id with nothing executed."""
    last: dict[tuple[str, int], dict] = {}
    for p in progress:
        key = (str(p.get("id")), int(p["batchId"]))
        if _executed(p) or not _executed(last.get(key, {})):
            last[key] = p
    kept = {id(p) for p in last.values()}
    return [p for p in progress if id(p) in kept]


def _executed(record: dict) -> bool:
    return "addBatch" in (record.get("durationMs") or {})


def offered_eps(truth: pd.DataFrame) -> float:
    """Events sent per second of sending."""
    sent = truth.loc[~truth["control"], "sent_ms"]
    span_s = (sent.max() - sent.min()) / 1000.0 if len(sent) > 1 else 0.0
    return round(len(sent) / span_s, 1) if span_s > 0 else 0.0


def processed_eps(progress: list[dict], since_ms: float = 0) -> float:
    """Input rows per second, from the first batch with input to the end of the last one,
    counting only batches that ended after `since_ms` (the warm-up batch does not count)."""
    busy = [p for p in progress if p.get("numInputRows", 0) > 0 and _end_ms(p) > since_ms]
    if not busy:
        return 0.0
    start = _end_ms(busy[0]) - busy[0]["batchDuration"]
    span_s = (_end_ms(busy[-1]) - start) / 1000.0
    rows = sum(p["numInputRows"] for p in busy)
    return round(rows / span_s, 1) if span_s > 0 else 0.0


def end_offsets(progress: dict, topic: str, first_source_only: bool = False) -> dict[int, int]:
    """Partition -> the end offset a batch read up to in `topic`; `first_source_only` for a
    self-join, whose second source reads the same topic."""
    ends: dict[int, int] = {}
    for source in progress.get("sources", [])[:1 if first_source_only else None]:
        end = source.get("endOffset")
        end = json.loads(end) if isinstance(end, str) else (end or {})
        ends.update({int(p): int(o) for p, o in end.get(topic, {}).items()})
    return ends


def partition_logs(truth: pd.DataFrame, rows: np.ndarray | None = None):
    """Per partition of `truth` (its `rows` only, when given): (partition, its records' offsets
    in order, their append times made non-decreasing). A partition's records are appended in
    offset order, so what was appended or read by a time is a lookup in these arrays."""
    part = truth["partition"].to_numpy()
    offset = truth["offset"].to_numpy(np.int64)
    append = truth["append_ms"].to_numpy(np.float64)
    if rows is not None:
        part, offset, append = part[rows], offset[rows], append[rows]
    for partition in np.unique(part):
        mine = part == partition
        order = np.argsort(offset[mine], kind="stable")
        yield int(partition), offset[mine][order], np.maximum.accumulate(append[mine][order])


def lag_series(truth: pd.DataFrame, progress: list[dict], topic: str) -> list[tuple[float, int, float]]:
    """Consumer lag at the end of each batch, in time order: (end ms, records appended to
    Kafka but not yet read by a finished batch, age of the oldest of them in seconds), from
    each partition's sorted arrays: an hour's run (80 million records) in seconds."""
    ends = sorted((_end_ms(record), end_offsets(record, topic)) for record in progress)
    at = np.array([a for a, _ in ends], dtype=np.float64)
    waiting = np.zeros(len(ends), dtype=np.int64)
    oldest = np.full(len(ends), np.inf)
    for partition, offset, append in partition_logs(truth, ~truth["control"].to_numpy(bool)):
        end_of = np.array([e.get(partition, 0) for _, e in ends], dtype=np.int64)
        read = np.searchsorted(offset, end_of)                      # records read by then
        appended = np.searchsorted(append, at, side="right")        # records appended by then
        count = np.maximum(appended - read, 0)
        waiting += count
        first = append[np.minimum(read, max(len(append) - 1, 0))] if len(append) else at
        oldest = np.where(count > 0, np.minimum(oldest, first), oldest)
    age = np.where(np.isfinite(oldest), (at - oldest) / 1000.0, 0.0)
    return [(float(a), int(n), float(s)) for a, n, s in zip(at, waiting, age, strict=True)]


def backpressure(truth: pd.DataFrame, progress: list[dict], topic: str,
                 series: list[tuple[float, int, float]] | None = None) -> dict:
    """The largest consumer lag of the run, in records and in seconds (from `series`, the
    run's lag_series, when the caller has it)."""
    series = lag_series(truth, progress, topic) if series is None else series
    return {"max_lag_records": max((n for _, n, _ in series), default=0),
            "max_lag_s": round(max((s for _, _, s in series), default=0.0), 3), "recovery_s": None}


def lag_recovered_s(series: list[tuple[float, int, float]], started_ms: float, ended_ms: float,
                    before_ms: float = 10_000) -> float | None:
    """Seconds from a fault's start until the lag, after the fault ended, is back at its level
    before the fault: the largest lag at the ends of the batches in the `before_ms` before
    it. None when the run had not yet run `before_ms` of batches when the fault came (no
    level to come back to: a fault 1 s in would wait for the end of the run), or the lag
    never came back (lag_recovery says which)."""
    return lag_recovery(series, started_ms, ended_ms, before_ms)[0]


def lag_recovery(series: list[tuple[float, int, float]], started_ms: float, ended_ms: float,
                 before_ms: float = 10_000, since_ms: float | None = None) -> tuple[float | None, str | None]:
    """lag_recovered_s, and when it is None, a sentence saying why. `since_ms`: when the
    warm-up ended; the level before the fault is then read from the batches after it (at most
    `before_ms` of them), so that a fault soon after a warm-up still has one."""
    if not series:
        return None, "no batch reported its progress (measurement off, or no batch ran)"
    lo = started_ms - before_ms if since_ms is None else max(started_ms - before_ms, since_ms)
    level = [n for at, n, _ in series if lo <= at < started_ms]
    if since_ms is not None and since_ms >= started_ms:
        return None, "the fault came before the warm-up ended: no steady level before it to come back to"
    if since_ms is None and series[0][0] > started_ms - before_ms:
        ran_s = max(0.0, (started_ms - series[0][0]) / 1000)
        return None, (f"the run had run {ran_s:.1f} s of batches when the fault came, fewer than "
                      f"{before_ms / 1000:g} s: no level before it to come back to")
    if not level:   # batches before, but none in the window: the query was down or stalled then
        span = f"{(started_ms - lo) / 1000:g} s"
        return None, (f"no batch ended in the {span} before the fault (the query was down or stalled): no "
                      "level before it to come back to")
    back = next((at for at, n, _ in series if at >= ended_ms and n <= max(level)), None)
    if back is None:
        last_ms = series[-1][0]
        after = [n for at, n, _ in series if at >= ended_ms]
        if not after:
            gap_s = (last_ms - ended_ms) / 1000
            return None, f"no batch ended after the fault did ({gap_s:+.1f} s from its end to the last batch)"
        return None, (f"the lag never came back to its level before the fault ({max(level):,} records): "
                      f"{min(after):,} at the least, by the last batch {(last_ms - ended_ms) / 1000:.1f} s "
                      "after the fault ended")
    return round((back - started_ms) / 1000, 3), None
