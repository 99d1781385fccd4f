"""Event-by-event accounting, with the semantics of Jepsen's total-queue checker.

Every expected event must come out exactly once, as one row carrying its `event_id`:
  lost         an expected event with no row
  duplicated   rows beyond the first for an expected event
  unexpected   a row whose event_id was never expected (never sent, filtered, or the
               harness's own control event that a filter should have dropped)
  wrong        an expected event whose row carries values other than the oracle's
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.check.result import CheckResult, concat, discrepancies, plural


def check(expected: pd.DataFrame, sink: pd.DataFrame, values: list[str], produced: int,
          dropped_late: int = 0, extra_counts: dict | None = None, ident: str = "event_id") -> CheckResult:
    """`expected`: one row per expected event: `ident` (an int64 identity, event_id unless
    said otherwise), the `values` columns, event_time_ms, append_ms, batch (-1: read by no
    committed batch). `sink`: `ident`, the values, committed_ms and maybe batch_id."""
    exp = expected.drop_duplicates(ident).set_index(ident)
    ids = sink[ident].to_numpy(dtype=np.int64)
    known = np.isin(ids, exp.index.to_numpy())
    copies = pd.Series(ids[known]).value_counts()
    delivered_ids = copies.index.to_numpy()
    lost_mask = ~exp.index.isin(delivered_ids)
    dup = copies[copies > 1]
    first = sink[known].sort_values("committed_ms", kind="stable").drop_duplicates(ident)
    both = (first.set_index(ident).join(exp[values].add_suffix("_expected"), how="inner")
            .join(exp[["event_time_ms", "append_ms"]].add_prefix("truth_")))
    wrong_mask = np.zeros(len(both), bool)
    for col in values:
        wrong_mask |= ~_same(both[col], both[f"{col}_expected"])
    counts = {"produced": produced, "expected": len(exp), "delivered": int(copies.sum()),
              "lost": int(lost_mask.sum()), "duplicated": int((dup - 1).sum()),
              "unexpected": int((~known).sum()), "dropped_late": dropped_late, **(extra_counts or {})}
    lost, unexpected, wrong = exp[lost_mask], sink[~known], both[wrong_mask]
    batch_of = sink.get("batch_id")
    found = concat([
        discrepancies("lost", f"{ident} " + lost.index.to_series().astype(str),
                      pd.Series(["1 row"] * len(lost)), pd.Series(["none"] * len(lost)), lost["batch"]),
        discrepancies("duplicated", f"{ident} " + dup.index.to_series().astype(str),
                      pd.Series(["1 row"] * len(dup)), dup.astype(str) + " rows"),
        discrepancies("unexpected", f"{ident} " + unexpected[ident].astype(str),
                      pd.Series(["no row"] * len(unexpected)), pd.Series(["1 row"] * len(unexpected)),
                      None if batch_of is None else batch_of[~known]),
        discrepancies("wrong", f"{ident} " + wrong.index.to_series().astype(str),
                      _row_text(wrong, [f"{c}_expected" for c in values], values),
                      _row_text(wrong, values, values),
                      wrong["batch_id"] if "batch_id" in wrong else None),
    ])
    problems = [f"{plural(len(wrong), 'event')} came out with wrong values"] if len(wrong) else []
    # event time: visible - when it happened; processing time: visible - appended to Kafka
    event_time = both["committed_ms"] - both["truth_event_time_ms"]
    processing = both["committed_ms"] - both["truth_append_ms"]
    return CheckResult(counts, event_time.to_numpy(dtype=float), processing.to_numpy(dtype=float),
                       problems, found)


def _same(a: pd.Series, b: pd.Series) -> np.ndarray:
    """Equal, or both missing (a column the pipeline leaves null)."""
    return ((a.to_numpy() == b.to_numpy()) | (a.isna().to_numpy() & b.isna().to_numpy()))


def _row_text(df: pd.DataFrame, cols: list[str], names: list[str]) -> pd.Series:
    if not len(df):
        return pd.Series([], dtype=str)
    parts = [names[i] + "=" + df[c].astype(str) for i, c in enumerate(cols)]
    out = parts[0]
    for p in parts[1:]:
        out = out + " " + p
    return out.reset_index(drop=True)
