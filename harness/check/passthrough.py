"""The oracle of `passthrough`: every event with amount >= MIN_AMOUNT comes out once, as
one row with its fields, its tier and its Kafka partition and offset."""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.check import events, large
from harness.check.batch_reads import real_events, record_ident
from harness.check.checkpoint import Batch
from harness.check.result import CheckResult
from workloads.pipelines import passthrough

NEEDED = ["event_id", "key", "event_time_ms", "amount", "partition", "offset", "append_ms"]


def expected(truth: pd.DataFrame, batches: list[Batch]) -> tuple[pd.DataFrame, int]:
    """The rows the pipeline must output, and how many real events there were."""
    real = real_events(truth, batches, NEEDED)
    kept = real.take(np.flatnonzero(real["amount"].to_numpy() >= passthrough.MIN_AMOUNT))
    high = (kept["amount"].to_numpy() >= passthrough.HIGH_AMOUNT).astype(np.int8)
    kept["tier"] = pd.Categorical.from_codes(high, categories=["low", "high"])   # no string per row
    return kept, len(real)


def check(truth: pd.DataFrame, sink: pd.DataFrame, batches: list[Batch], params: dict) -> CheckResult:
    kept, produced = expected(truth, batches)
    values = [c for c in passthrough.COLUMNS if c != "event_id"]
    ident = "event_id"
    if truth["event_id"].duplicated().any():   # re-sent copies: each Kafka record is an event
        ident, values = "record", ["event_id", *values]
        kept["record"] = record_ident(kept).to_numpy()
        sink = sink.assign(record=record_ident(sink))
    return events.check(kept, sink, values, produced, ident=ident,
                        extra_counts={"filtered": produced - len(kept)})


def check_files(files: large.RunFiles, batches: list[Batch], params: dict) -> CheckResult:
    """`check` from a large run's files, slice by slice of event ids (raises large.Resent)."""
    return large.check_passthrough(files, batches)


def final_watermark_ms(max_event_time_ms: int, params: dict) -> None:
    """No watermark: the output is final once the batches have read every offset."""
    return None
