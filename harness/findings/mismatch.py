"""mismatch: lost and unexpected rows that are one row with a wrong value.

A sink that cuts text to 16 characters loses every row with a longer text and holds as many
rows the oracle never expected: 11,040 lost plus 11,040 unexpected, each told on its own.
They pair up: joined on every column but the wrong ones, a lost row and an unexpected one are
the same output. This finding pairs them (by the output's key when it has one and the key is
intact, else by every column but one or two), names the columns that differ and how:

  truncated   a text cut short (the length it was cut to, when every pair has the same)
  rounded     a number rounded, or cut, to fewer decimals (or to an integer)
  shifted     a number moved by the same amount in every pair (a time zone, an off-by-one)
  null        a value that came out null
  changed     anything else

    analyse(lost, unexpected, columns, key) -> Mismatch | None   (pure; pandas in, counts out)
    build(inputs) -> Finding | None                             (from the case's discrepancies, or
                                                                 the batch oracle's whole rows)
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness.findings import fix
from harness.results.model import Finding

MIN_SHARE = 0.5          # the pairs must cover at least this share of the smaller side
MAX_WITNESSES = 5
SEARCH_ROWS = 2_000
_PAIR = re.compile(r"(\w+)=(\S*)")
_NULLS = ("None", "nan", "<NA>")


@dataclass(frozen=True)
class Column:
    """One differing column: how many pairs differ in it, by pattern, and an example."""

    name: str
    patterns: dict[str, int]
    detail: dict[str, str]          # pattern -> what it means here ("to 16 characters", "by +3,600,000")
    example: tuple[str, str]        # (expected, actual)


@dataclass(frozen=True)
class Mismatch:
    pairs: int
    lost: int
    unexpected: int
    by: list[str]                   # the columns the pairs were joined on
    columns: list[Column]
    witnesses: list[dict] = field(default_factory=list)


def analyse(lost: pd.DataFrame, unexpected: pd.DataFrame, columns: list[str],
            key: list[str] | None = None) -> Mismatch | None:
    """The pairing of `lost` and `unexpected` rows (both with `columns`) that covers the most,
    and the differing columns' patterns; None when no pairing covers MIN_SHARE of the fewer."""
    columns = [c for c in columns if c in lost.columns and c in unexpected.columns]
    if not len(lost) or not len(unexpected) or not columns:
        return None
    # the pairing is searched on the first SEARCH_ROWS of each side, then made on all of them
    few_lost, few_unexpected = lost.head(SEARCH_ROWS), unexpected.head(SEARCH_ROWS)
    need = MIN_SHARE * min(len(few_lost), len(few_unexpected))
    best: tuple[int, list[str]] | None = None
    for by in _candidates(columns, key):
        n = len(_join(few_lost, few_unexpected, by))
        if n >= need and (best is None or n > best[0]):
            best = (n, by)
        if best is not None and best[0] >= min(len(few_lost), len(few_unexpected)):
            break
    if best is None:
        return None
    by = best[1]
    joined = _join(lost, unexpected, by)
    differing = []
    for c in columns:
        if c in by:
            continue
        e, a = joined[f"{c}_e"], joined[f"{c}_a"]
        diff = ~((e.astype(str) == a.astype(str)) | (e.isna() & a.isna()))
        if diff.any():
            differing.append(_column(c, e[diff], a[diff]))
    if not differing:
        return None
    witnesses = [{"row": " ".join(f"{b}={joined.iloc[i][b]}" for b in by),
                  **{c.name: {"expected": str(joined.iloc[i][f"{c.name}_e"]),
                              "actual": str(joined.iloc[i][f"{c.name}_a"])} for c in differing}}
                 for i in range(min(MAX_WITNESSES, len(joined)))]
    return Mismatch(len(joined), len(lost), len(unexpected), by, differing, witnesses)


def _candidates(columns: list[str], key: list[str] | None):
    """Join columns to try: the key; every column but one; every column but two."""
    if key and all(k in columns for k in key) and len(key) < len(columns):
        yield list(key)
    if len(columns) > 1:
        for c in columns:
            yield [x for x in columns if x != c]
    if len(columns) > 2 and len(columns) <= 12:
        for a, b in itertools.combinations(columns, 2):
            yield [x for x in columns if x not in (a, b)]


def _join(lost: pd.DataFrame, unexpected: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Lost and unexpected rows paired one to one on `by` (as text), the k-th copy of a value
    on one side with the k-th on the other."""
    def keyed(frame: pd.DataFrame, suffix: str) -> pd.DataFrame:
        out = frame.reset_index(drop=True).add_suffix(suffix)
        joined = frame[by[0]].astype(str).reset_index(drop=True)
        for b in by[1:]:
            joined = joined + "\x1f" + frame[b].astype(str).reset_index(drop=True)
        out["_k"] = joined.to_numpy()
        out["_n"] = out.groupby("_k").cumcount()
        for b in by:
            out[b] = frame[b].astype(str).to_numpy()
        return out

    e, a = keyed(lost, "_e"), keyed(unexpected, "_a")
    return e.merge(a.drop(columns=by), on=["_k", "_n"])


def _column(name: str, expected: pd.Series, actual: pd.Series) -> Column:
    patterns: Counter = Counter()
    lengths: Counter = Counter()
    shifts: Counter = Counter()
    digits: Counter = Counter()
    for e, a in zip(expected, actual, strict=True):
        kind, extra = classify(e, a)
        patterns[kind] += 1
        if kind == "truncated":
            lengths[extra] += 1
        elif kind == "rounded":
            digits[extra] += 1
        elif kind == "changed" and extra is not None:
            shifts[extra] += 1
    # the same difference in most pairs is a shift, not a change
    if shifts:
        delta, n = shifts.most_common(1)[0]
        if n >= 0.8 * sum(patterns.values()) and delta != 0:
            patterns["changed"] -= n
            patterns["shifted"] += n
            if not patterns["changed"]:
                del patterns["changed"]
    detail: dict[str, str] = {}
    if lengths:
        length, n = lengths.most_common(1)[0]
        detail["truncated"] = f"to {length} characters" if n == patterns["truncated"] else \
            f"to {length} characters mostly"
    if "shifted" in patterns:
        detail["shifted"] = f"by {_signed(shifts.most_common(1)[0][0])}"
    if digits:
        d = digits.most_common(1)[0][0]
        detail["rounded"] = "to an integer" if d == 0 else f"to {d} decimal{'s' if d != 1 else ''}"
    return Column(name, dict(patterns.most_common()), detail, (str(expected.iloc[0]), str(actual.iloc[0])))


def classify(expected, actual) -> tuple[str, object]:
    """The pattern of one differing value, and its parameter (a truncation's length, a
    rounding's decimals, a change's numeric difference)."""
    if actual is None or (isinstance(actual, float) and math.isnan(actual)) or actual in _NULLS:
        return "null", None
    e, a = str(expected), str(actual)
    if len(a) < len(e) and e.startswith(a) and not _number(e):
        return "truncated", len(a)
    x, y = _number(e), _number(a)
    if x is not None and y is not None:
        for d in range(0, 7):
            cut = math.trunc(x * 10**d) / 10**d
            if abs(y - round(x, d)) < 1e-9 * max(1.0, abs(x)) or abs(y - cut) < 1e-12:
                if abs(y - x) > 1e-12:
                    return "rounded", d
        return "changed", y - x
    return "changed", None


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _signed(delta: float) -> str:
    shown = f"{delta:+,.0f}" if float(delta).is_integer() else f"{delta:+,g}"
    if float(delta).is_integer() and abs(delta) >= 1000 and delta % 1000 == 0:
        hours = delta / 3_600_000
        if float(hours).is_integer():
            shown += f" ({hours:+g} h in ms)"
    return shown


def story(m: Mismatch, lost_total: int, unexpected_total: int, sampled: bool) -> str:
    """One paragraph: the counts, how they pair, each differing column's pattern, an example."""
    cols = []
    for c in m.columns:
        parts = [f"{kind} {c.detail[kind]}" if kind in c.detail else kind for kind in c.patterns]
        counts = ", ".join(f"{p} in {n:,}" for p, n in zip(parts, c.patterns.values(), strict=True))
        cols.append(f"column {c.name}: {counts} of the {m.pairs:,} pairs (expected {c.example[0]!r}, "
                    f"got {c.example[1]!r})")
    scope = (f"of the first {m.lost:,} lost and {m.unexpected:,} unexpected rows kept, " if sampled else "")
    head = (f"The {lost_total:,} lost and {unexpected_total:,} unexpected rows are mostly one row with a "
            f"wrong value: {scope}{m.pairs:,} pair up on {', '.join(m.by)}")
    return head + "; " + "; ".join(cols) + "."


# -- from a case ------------------------------------------------------------------------------
def build(inputs) -> Finding | None:
    """The mismatch finding of a case (harness.findings.Inputs), or None. The batch oracle's whole
    lost and extra rows when it left them (<case>/oracle/), else the discrepancies' first rows."""
    c = inputs.checked.counts
    lost_total, unexpected_total = int(c.get("lost") or 0), int(c.get("unexpected") or 0)
    if not lost_total or not unexpected_total:
        return None
    columns = list(inputs.pipeline.columns)
    key = list(getattr(inputs.pipeline, "key", ()) or ())
    whole = _oracle_rows(inputs)
    if whole is not None:
        lost, unexpected = whole
        sampled = False
    else:
        lost, unexpected = _from_discrepancies(inputs.checked.discrepancies)
        sampled = len(lost) < lost_total or len(unexpected) < unexpected_total
    found = analyse(lost, unexpected, columns, key)
    if found is None:
        return None
    return Finding(cls="mismatch", count=found.pairs, witness=found.witnesses,
                   story=f"{story(found, lost_total, unexpected_total, sampled)} {fix.advice('mismatch')}")


def _oracle_rows(inputs) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    if not inputs.checkpoints:
        return None
    where = Path(inputs.checkpoints[0]).parent / "oracle"
    try:
        lost = pd.read_parquet(where / "lost.parquet")
        extra = pd.read_parquet(where / "extra.parquet")
    except (OSError, ValueError):
        return None
    return lost, extra[extra["extra"] == "unexpected"] if "extra" in extra else extra


def _from_discrepancies(found: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The lost and unexpected rows the discrepancies keep, rebuilt from their texts: a lost
    row is its item and expected values, an unexpected one its item and actual values."""
    def rows(kind: str, values: str) -> pd.DataFrame:
        picked = found[found["kind"] == kind]
        return pd.DataFrame([{**dict(_PAIR.findall(str(r.item))),
                              **dict(_PAIR.findall(str(getattr(r, values))))} for r in picked.itertuples()])

    return rows("lost", "expected"), rows("unexpected", "actual")
