"""Two outputs compared as multisets of rows: what the oracle expects against what the sink holds.

    compare(expected, sink, columns) -> Comparison

Rows are equal when every column is: texts and integers exactly, doubles to DOUBLE_DIGITS
significant digits (a batch sums in another order than a stream's partial aggregates, and a
double sum's last bits depend on the order), nulls with nulls. Each distinct row is counted
on both sides:
  lost         expected copies the sink lacks
  duplicated   sink copies beyond the expected count of a row that is expected
  unexpected   sink rows that are not expected at all
The lost and unexpected rows are kept whole: pairing them by a key tells a wrong value from a
lost row (harness/findings/mismatch.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

DOUBLE_DIGITS = 12
_NULL = "\x00null"


@dataclass(frozen=True)
class Comparison:
    expected: int
    delivered: int            # sink rows that are expected (each copy up to its expected count)
    lost: int
    duplicated: int
    unexpected: int
    lost_rows: pd.DataFrame   # one row per lost copy, the expected side's values
    extra_rows: pd.DataFrame  # one row per sink copy beyond expected, with `extra`: duplicated or unexpected


def canonical(frame: pd.DataFrame, columns: list[str], types: dict[str, str]) -> pd.Series:
    """One text per row: its values in the columns' canonical form, joined."""
    if not len(frame):
        return pd.Series([], dtype=object, index=frame.index)
    parts = [_column(frame[c], types.get(c, "STRING")) for c in columns]
    out = parts[0]
    for p in parts[1:]:
        out = out + "\x1f" + p
    return out


def _column(values: pd.Series, kind: str) -> pd.Series:
    null = values.isna()
    if kind.upper() == "DOUBLE":
        numbers = pd.to_numeric(values, errors="coerce")
        text = numbers.map(lambda v: format(float(v), f".{DOUBLE_DIGITS}g") if v == v else _NULL)
    elif kind.upper() in ("LONG", "INT"):
        numbers = pd.to_numeric(values, errors="coerce")
        text = numbers.map(lambda v: str(int(v)) if v == v else _NULL)
    elif kind.upper() == "BOOLEAN":
        text = values.map(lambda v: "true" if v is True or v == 1 else "false")
    else:
        text = values.astype(str)
    return text.where(~null, _NULL).astype(object)


def compare(expected: pd.DataFrame, sink: pd.DataFrame, columns: dict[str, str]) -> Comparison:
    """`expected` against `sink` on `columns` (name -> type), as multisets."""
    names = list(columns)
    e_text = canonical(expected, names, dict(columns))
    s_text = canonical(sink, names, dict(columns))
    want = e_text.value_counts()
    have = s_text.value_counts()
    both = pd.concat([want.rename("want"), have.rename("have")], axis=1).fillna(0).astype(np.int64)
    short = (both["want"] - both["have"]).clip(lower=0)
    over = (both["have"] - both["want"]).clip(lower=0)
    lost_rows = _copies(expected, e_text, short)
    extra = _copies(sink, s_text, over)
    wanted = both["want"].reindex(extra.index).to_numpy() > 0 if len(extra) else np.zeros(0, bool)
    extra = extra.reset_index(drop=True).assign(extra=np.where(wanted, "duplicated", "unexpected"))
    lost_rows = lost_rows.reset_index(drop=True)
    duplicated = int((extra["extra"] == "duplicated").sum()) if len(extra) else 0
    delivered = int(np.minimum(both["want"], both["have"]).sum())
    return Comparison(expected=int(len(expected)), delivered=delivered,
                      lost=int(short.sum()), duplicated=duplicated, unexpected=int(len(extra) - duplicated),
                      lost_rows=lost_rows, extra_rows=extra)


def _copies(frame: pd.DataFrame, text: pd.Series, count: pd.Series) -> pd.DataFrame:
    """`count[t]` rows of `frame` for each canonical text t (the last copies of each), indexed
    by t."""
    need = count[count > 0]
    if not len(need) or not len(frame):
        return frame.iloc[:0].set_axis(pd.Index([], dtype=object), axis=0)
    picked = frame.assign(_t=text.to_numpy())
    picked = picked[picked["_t"].isin(need.index)]
    rank = picked.groupby("_t", sort=False).cumcount(ascending=False)
    keep = rank.to_numpy() < picked["_t"].map(need).to_numpy()
    picked = picked[keep]
    return picked.set_index("_t", drop=True)
