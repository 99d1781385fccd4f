"""The check of a large run, from its files: truth Parquet and the sink's Parquet, read in
slices (harness/check/sweep.py), never whole.

The in-memory oracles hold truth and sink as pandas frames: 10 million events peak near
3 GB, so an hour at 28,000 events/s (100 million) does not fit. Here the passthrough oracle
sweeps truth and sink together in slices of event ids and adds up each slice's accounting
(events.Totals); the window oracles (large_windows.py) sum each chunk's windows. The result
is the CheckResult the in-memory oracle gives on the same run (tests/test_checker_scaled.py);
docs/performance.md "Checker speed" has the measurements behind LARGE_ROWS.

A run whose truth repeats an event id (re-sent copies: each Kafka record is an event) and a
pipeline without a sliced oracle are checked in memory, as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness.check import events, sweep
from harness.check.batch_reads import assign_batches
from harness.check.checkpoint import Batch
from harness.check.result import CheckResult
from workloads.pipelines import passthrough

# truth rows from which the harness checks from files (docs/performance.md "Checker speed")
LARGE_ROWS = 5_000_000
NEEDED = ["event_id", "key", "event_time_ms", "amount", "partition", "offset", "append_ms", "control"]


@dataclass(frozen=True)
class RunFiles:
    """What the check reads when the run is large: the truth directory, the sink as written to
    the case's directory, and the ranges Kafka deleted before any batch read them (a
    kafka-retention fault's `deleted`: partition, from, to), which are neither expected nor lost."""

    truth_dir: Path
    sink: Path
    deleted: list[dict] = field(default_factory=list)

    def is_large(self) -> bool:
        return sweep.rows(sweep.files(self.truth_dir)) >= LARGE_ROWS


class Resent(Exception):
    """Truth repeats an event id: the check goes by Kafka record, in memory."""


def real(table: pa.Table, deleted: list[dict]) -> np.ndarray:
    """Which rows are the workload's own events, not deleted by Kafka before any batch read them."""
    mask = ~table["control"].to_numpy(zero_copy_only=False)
    if deleted:
        part = table["partition"].to_numpy(zero_copy_only=False)
        offset = table["offset"].to_numpy(zero_copy_only=False)
        for d in deleted:
            mask &= ~((part == d["partition"]) & (offset >= d["from"]) & (offset < d["to"]))
    return mask


def check_passthrough(files: RunFiles, batches: list[Batch]) -> CheckResult:
    """harness.check.passthrough.check, slice by slice of event ids (raises Resent)."""
    values = [c for c in passthrough.COLUMNS if c != "event_id"]
    names = set(pq.read_schema(files.sink).names)
    sink_columns = [*passthrough.COLUMNS, "committed_ms", *(["batch_id"] if "batch_id" in names else [])]
    totals = events.Totals(sweep.rows([files.sink]))
    produced = kept = 0
    for t, s in sweep.slices(sweep.files(files.truth_dir), NEEDED, files.sink, sink_columns):
        _no_repeats(t["event_id"].to_numpy())
        is_real = real(t, files.deleted)
        produced += int(is_real.sum())
        expected = _expected(t.filter(pa.array(is_real)))
        kept += len(expected)
        sink = s.to_pandas()
        if len(sink) > 1 and not (np.diff(sink[sweep.POS].to_numpy()) > 0).all():
            sink = sink.sort_values(sweep.POS, kind="stable", ignore_index=True)
        totals.add(events.tally(expected, sink, values, pos=sink.pop(sweep.POS).to_numpy()))
        del t, s, expected, sink
    tally = totals.tally()
    tally.lost = tally.lost.assign(batch=assign_batches(tally.lost, batches).to_numpy())
    for name in ("lost", "unexpected", "wrong_got", "wrong_want"):
        setattr(tally, name, as_read(getattr(tally, name)))
    return tally.result(values, "event_id", produced, extra_counts={"filtered": produced - kept})


def _expected(real_rows: pa.Table) -> pd.DataFrame:
    """passthrough.expected for one slice: the kept events, with their tier."""
    df = real_rows.drop_columns(["control"]).to_pandas()
    df = df.take(np.flatnonzero(df["amount"].to_numpy() >= passthrough.MIN_AMOUNT))
    high = (df["amount"].to_numpy() >= passthrough.HIGH_AMOUNT).astype(np.int8)
    df["tier"] = pd.Categorical.from_codes(high, categories=["low", "high"])
    return df


def _no_repeats(ids: np.ndarray) -> None:
    """Raise Resent when an id repeats (every row of an id is in its slice)."""
    if len(ids) > 1 and not (ids[1:] > ids[:-1]).all():
        ids = np.sort(ids)
        if (ids[1:] == ids[:-1]).any():
            raise Resent()


def as_read(df: pd.DataFrame) -> pd.DataFrame:
    """Categorical columns as pandas reads strings (objects, None where missing), so that the
    few rows shown as discrepancies read as the in-memory check shows them."""
    out = df.copy()
    for col in out.columns:
        if isinstance(out[col].dtype, pd.CategoricalDtype):
            values = out[col].astype(object)
            out[col] = values.where(values.notna(), None)
    return out
