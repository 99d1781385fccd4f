"""Two outputs compared as multisets of rows: what the oracle expects against what the sink holds.

    compare(expected, sink, columns) -> Comparison

Rows are equal when every column is: texts and integers exactly, doubles to DOUBLE_DIGITS
significant digits (a batch sums in another order than a stream's partial aggregates, and a
double sum's last bits depend on the order; two doubles an ulp apart that round to different
texts are still equal, within DOUBLE_RTOL), nulls with nulls. Each distinct row is counted
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
DOUBLE_RTOL = 1e-9   # a lost and an unexpected row whose doubles agree this closely are one row
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
    lost_rows, extra, near = _near_doubles(lost_rows, extra, columns)
    duplicated = int((extra["extra"] == "duplicated").sum()) if len(extra) else 0
    delivered = int(np.minimum(both["want"], both["have"]).sum()) + near
    return Comparison(expected=int(len(expected)), delivered=delivered,
                      lost=int(short.sum()) - near, duplicated=duplicated,
                      unexpected=int(len(extra) - duplicated), lost_rows=lost_rows, extra_rows=extra)


def _near_doubles(lost: pd.DataFrame, extra: pd.DataFrame, columns: dict[str, str]):
    """A lost and an unexpected row equal in every other column whose doubles agree within
    DOUBLE_RTOL are one row delivered: two doubles an ulp apart can round to different texts at
    DOUBLE_DIGITS (a batch's average against a stream's, summed in another order). Returns the
    lost rows and extra rows left, and how many pairs were equal."""
    doubles = [c for c, kind in columns.items() if kind.upper() == "DOUBLE"]
    if not doubles or not len(lost) or not len(extra) or not (extra["extra"] == "unexpected").any():
        return lost, extra, 0
    others = [c for c in columns if c not in doubles]
    unexpected = extra[extra["extra"] == "unexpected"]
    sides = []
    for frame in (lost, unexpected):
        text = (canonical(frame, others, columns) if others else
                pd.Series([""] * len(frame), index=frame.index, dtype=object))
        rank = text.groupby(text.to_numpy(), sort=False).cumcount()
        sides.append(pd.DataFrame({"t": text.to_numpy(), "r": rank.to_numpy(), "at": np.arange(len(frame))}))
    pairs = sides[0].merge(sides[1], on=["t", "r"], suffixes=("_l", "_u"))
    if not len(pairs):
        return lost, extra, 0
    close = np.ones(len(pairs), dtype=bool)
    for c in doubles:
        a = pd.to_numeric(lost[c].iloc[pairs["at_l"]], errors="coerce").to_numpy(np.float64)
        b = pd.to_numeric(unexpected[c].iloc[pairs["at_u"]], errors="coerce").to_numpy(np.float64)
        close &= np.isclose(a, b, rtol=DOUBLE_RTOL, atol=0.0) | (np.isnan(a) & np.isnan(b))
    if not close.any():
        return lost, extra, 0
    drop_l = np.zeros(len(lost), dtype=bool)
    drop_l[pairs["at_l"].to_numpy()[close]] = True
    drop_u = pd.Series(False, index=extra.index)
    drop_u.loc[unexpected.index[pairs["at_u"].to_numpy()[close]]] = True
    return (lost[~drop_l].reset_index(drop=True), extra[~drop_u.to_numpy()].reset_index(drop=True),
            int(close.sum()))


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
