"""Row-by-row accounting of an output keyed by some columns (a session, a window's rank,
a custom oracle's rows): each expected row must come out exactly once, with its values.

  lost         an expected key with no row (or fewer rows than it is expected times)
  duplicated   rows beyond the first for an expected key (beyond the times it is expected)
  unexpected   a row whose key the oracle never expected
  wrong        an expected key whose rows all carry other values
  open         an expected key the watermark had not yet closed when the run ended:
               reported, never counted as lost
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.check.result import CheckResult, concat, discrepancies, plural, row_text


def check(expected: pd.DataFrame, sink: pd.DataFrame, key: list[str], produced: int,
          dropped_late: int = 0, open_rows: pd.DataFrame | None = None,
          time_col: str | None = None, latency_until_ms: int | None = None) -> CheckResult:
    """`expected` and `sink` share the output columns; `sink` adds committed_ms (and maybe
    batch_id). `time_col` names the expected column holding the event time a row's result
    became possible at (a window's or session's end): event-time latency counts from it, for
    the rows whose time is at most `latency_until_ms` when it is given."""
    values = [c for c in expected.columns if c not in key and c in sink.columns and c != "committed_ms"]
    open_rows = open_rows if open_rows is not None else expected.iloc[:0]
    # a key may be expected more than once (a join of a re-sent record): a multiset
    wanted = expected.groupby(key, sort=False).size()
    exp = expected.drop_duplicates(key)
    e_keys = _keys(exp, key)
    s_keys = _keys(sink, key)
    known = s_keys.isin(e_keys)
    is_open = s_keys.isin(_keys(open_rows, key)) if len(open_rows) else np.zeros(len(sink), bool)
    got = sink[known]
    copies = got.groupby(key, sort=False).size().reindex(wanted.index, fill_value=0)
    short = (wanted - copies).clip(lower=0)
    lost_mask = e_keys.isin(short[short > 0].index)
    extra = (copies - wanted).clip(lower=0)
    dup = copies[extra > 0]
    # a key is right when any of its copies carries the expected values
    merged = got.merge(exp, on=key, suffixes=("", "_expected"))
    match = np.ones(len(merged), bool)
    for col in values:
        a, b = merged[col], merged[f"{col}_expected"]
        match &= (a.to_numpy() == b.to_numpy()) | (a.isna().to_numpy() & b.isna().to_numpy())
    merged["match"] = match
    right = merged.groupby(key, sort=False)["match"].any()
    wrong_keys = right[~right].index
    wrong = merged.set_index(key).loc[wrong_keys].reset_index() if len(wrong_keys) else merged.iloc[:0]
    wrong = wrong.drop_duplicates(key)
    unexpected = sink[~known & ~is_open]
    counts = {"produced": produced, "expected": int(wanted.sum()), "delivered": int(len(got)),
              "lost": int(short.sum()), "duplicated": int(extra.sum()),
              "unexpected": int(len(unexpected)), "dropped_late": dropped_late, "open": int(len(open_rows))}
    lost = exp[lost_mask]
    found = concat([
        discrepancies("lost", row_text(lost, key), row_text(lost, values), pd.Series(["none"] * len(lost))),
        discrepancies("duplicated", _index_text(dup, key), pd.Series(["1 row"] * len(dup)),
                      dup.astype(str).reset_index(drop=True) + " rows"),
        discrepancies("unexpected", row_text(unexpected, key), pd.Series(["no row"] * len(unexpected)),
                      row_text(unexpected, values), unexpected.get("batch_id")),
        discrepancies("wrong", row_text(wrong, key),
                      row_text(wrong, [f"{c}_expected" for c in values], values),
                      row_text(wrong, values), wrong.get("batch_id")),
        discrepancies("open", row_text(open_rows, key), row_text(open_rows, values),
                      pd.Series(["not yet final"] * len(open_rows))),
    ])
    problems = [f"{plural(len(wrong), 'row')} came out with wrong values"] if len(wrong) else []
    first = got.groupby(key, sort=False)["committed_ms"].min().rename("first_ms")
    timed = exp.join(first, on=key, how="inner")
    if time_col and latency_until_ms is not None:
        # a result the harness's end-of-run flush made possible, ahead of its event time: no
        # latency; counted, so a sustain trial can tell "nothing could close" from "nothing timed"
        on_flush = timed[time_col].to_numpy() > latency_until_ms
        if on_flush.any():
            counts["closed_on_flush"] = int(on_flush.sum())
        timed = timed[~on_flush]
    event_time = (timed["first_ms"] - timed[time_col]).to_numpy(dtype=float) if time_col else np.array([])
    at_ms = timed["first_ms"].to_numpy(np.int64) if time_col else np.array([], np.int64)
    return CheckResult(counts, event_time, np.array([]), problems, found, unit="rows", event_time_at_ms=at_ms)


def _keys(frame: pd.DataFrame, key: list[str]) -> pd.Index:
    """The frame's keys as groupby(key) indexes them: one column, a plain Index; more, a MultiIndex."""
    if len(key) == 1:
        return pd.Index(frame[key[0]], name=key[0])
    return pd.MultiIndex.from_frame(frame[key]) if len(frame) else pd.MultiIndex.from_tuples([], names=key)


def _index_text(counts: pd.Series, key: list[str]) -> pd.Series:
    return row_text(counts.index.to_frame(index=False), key)
