"""What an oracle returns: the counts, the problems, the latencies and the discrepancies."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

DISCREPANCY_KINDS = ("lost", "duplicated", "unexpected", "wrong", "open")   # a discrepancy's `kind`
# discrepancies.parquet: the first ones of each kind
COLUMNS = ["kind", "item", "expected", "actual", "batch_id"]
KEEP_PER_KIND = 100


@dataclass(frozen=True)
class CheckResult:
    counts: dict                 # produced, expected, delivered, lost, duplicated, unexpected, ...
    event_time_latency_ms: np.ndarray
    processing_time_latency_ms: np.ndarray
    problems: list[str] = field(default_factory=list)   # what failed beyond the counts
    # kind, item (an event id or a row's key), expected, actual, batch_id (-1: unknown)
    discrepancies: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=COLUMNS))
    unit: str = "events"         # what the counts count: events, or output rows
    # when each latency sample became visible (its row's committed_ms), for the timeline;
    # empty when the oracle does not say
    event_time_at_ms: np.ndarray = field(default_factory=lambda: np.array([], np.int64))
    processing_time_at_ms: np.ndarray = field(default_factory=lambda: np.array([], np.int64))
    # windows only (None otherwise): visible time minus the newest event time the window
    # counted (Karimov et al.), beside event_time's "minus the window end"
    event_time_newest_latency_ms: np.ndarray | None = None
    event_time_newest_at_ms: np.ndarray | None = None

    def with_problems(self, more: list[str]) -> CheckResult:
        return replace(self, problems=[*self.problems, *more])

    def write_discrepancies(self, path: Path) -> Path:
        self.discrepancies.to_parquet(path, index=False)
        return path

    def first_discrepancies(self, limit: int = 5) -> list[str]:
        """The first few, one line each, for the CLI."""
        d = self.discrepancies.head(limit)
        return [f"{r.kind}: {r.item}: expected {r.expected}, got {r.actual}"
                + (f" (batch {r.batch_id})" if r.batch_id >= 0 else "") for r in d.itertuples()]


def discrepancies(kind: str, item: pd.Series, expected: pd.Series, actual: pd.Series,
                  batch_id: pd.Series | None = None) -> pd.DataFrame:
    """The first KEEP_PER_KIND discrepancies of one kind, as strings."""
    n = min(len(item), KEEP_PER_KIND)
    batch = (pd.Series(np.full(n, -1, np.int64)) if batch_id is None
             else batch_id.iloc[:n].fillna(-1).astype(np.int64).reset_index(drop=True))
    return pd.DataFrame({"kind": kind, "item": item.iloc[:n].astype(str).to_numpy(),
                         "expected": expected.iloc[:n].astype(str).to_numpy(),
                         "actual": actual.iloc[:n].astype(str).to_numpy(), "batch_id": batch.to_numpy()})


def concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)


def plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def row_text(df: pd.DataFrame, cols: list[str], names: list[str] | None = None) -> pd.Series:
    """"name=value name=value" per row of `df` (the columns `cols`, shown as `names`)."""
    names = names or cols
    if not len(df) or not cols:
        return pd.Series([""] * len(df), dtype=str)
    out = names[0] + "=" + df[cols[0]].astype(str)
    for name, col in zip(names[1:], cols[1:], strict=True):
        out = out + " " + name + "=" + df[col].astype(str)
    return out.reset_index(drop=True)
