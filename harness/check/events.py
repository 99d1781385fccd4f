"""Event-by-event accounting, with the semantics of Jepsen's total-queue checker.

Every expected event must come out exactly once, as one row carrying its `event_id`:
  lost         an expected event with no row
  duplicated   rows beyond the first for an expected event
  unexpected   a row whose event_id was never expected (never sent, filtered, or the
               harness's own control event that a filter should have dropped)
  wrong        an expected event whose row carries values other than the oracle's

Rows are matched to events by position (a binary search over the sorted expected ids),
never by joining frames: 10 million events check in seconds and in little more memory
than the two inputs (benchmarks/test_checker_speed.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.check.result import KEEP_PER_KIND, CheckResult, concat, discrepancies, plural, row_text

_POS, _IDENT = "_pos", "_ident"   # sort keys kept beside a discrepancy's rows, to merge slices


def check(expected: pd.DataFrame, sink: pd.DataFrame, values: list[str], produced: int,
          dropped_late: int = 0, extra_counts: dict | None = None, ident: str = "event_id") -> CheckResult:
    """`expected`: one row per expected event: `ident` (an int64 identity, event_id unless
    said otherwise), the `values` columns, event_time_ms, append_ms, batch (-1: read by no
    committed batch). `sink`: `ident`, the values, committed_ms and maybe batch_id."""
    return tally(expected, sink, values, ident).result(values, ident, produced, dropped_late, extra_counts)


@dataclass
class Tally:
    """The accounting of a set of events and the sink rows carrying their ids: of all of
    them, or of one slice of ids (harness/check/large.py adds slices up with `Totals`).

    The latencies are per delivered event (its first copy); the rows kept for the
    discrepancies are the first KEEP_PER_KIND of each kind in the order the whole check
    reports them, with their sort keys: lost and duplicated by ident, unexpected by sink
    position, wrong by sink position (or by ident once any event is duplicated)."""

    counts: dict                 # expected, delivered, lost, duplicated, unexpected, wrong
    event_time_ms: np.ndarray
    processing_ms: np.ndarray
    committed_ms: np.ndarray
    lost: pd.DataFrame           # expected rows
    duplicated: pd.DataFrame     # ident, copies
    unexpected: pd.DataFrame     # sink rows
    wrong_got: pd.DataFrame      # sink rows, and beside them
    wrong_want: pd.DataFrame     # the expected rows

    def result(self, values: list[str], ident: str, produced: int, dropped_late: int = 0,
               extra_counts: dict | None = None) -> CheckResult:
        c = self.counts
        counts = {"produced": produced, **{k: c[k] for k in ("expected", "delivered", "lost", "duplicated",
                                                             "unexpected")},
                  "dropped_late": dropped_late, **(extra_counts or {})}
        by = _IDENT if c["duplicated"] else _POS
        order = np.argsort(self.wrong_got[by].to_numpy(), kind="stable")[:KEEP_PER_KIND]
        unexpected = self.unexpected
        if _POS in unexpected.columns:   # slices add up in id order; the whole check lists by sink position
            unexpected = unexpected.iloc[np.argsort(unexpected[_POS].to_numpy(), kind="stable")]
        found = _discrepancies(self.lost, self.duplicated, unexpected, self.wrong_got.iloc[order],
                               self.wrong_want.iloc[order], values, ident)
        problems = [f"{plural(c['wrong'], 'event')} came out with wrong values"] if c["wrong"] else []
        return CheckResult(counts, self.event_time_ms, self.processing_ms, problems, found,
                           event_time_at_ms=self.committed_ms, processing_time_at_ms=self.committed_ms)


def tally(expected: pd.DataFrame, sink: pd.DataFrame, values: list[str], ident: str = "event_id",
          pos: np.ndarray | None = None) -> Tally:
    """Rows are matched to events by position (a binary search over the sorted expected ids),
    never by joining frames. `pos`: each sink row's position in the whole sink (default: its
    row number here), in increasing order."""
    e_ids = expected[ident].to_numpy(np.int64)
    if len(e_ids) < 2 or bool((e_ids[1:] > e_ids[:-1]).all()):   # already sorted, no repeat: no sort
        order, e_sorted = np.arange(len(e_ids)), e_ids
    else:
        order = np.argsort(e_ids, kind="stable")
        e_sorted = e_ids[order]
        unique = np.ones(len(e_sorted), bool)
        unique[1:] = e_sorted[1:] != e_sorted[:-1]
        order, e_sorted = order[unique], e_sorted[unique]   # the first row of an id that repeats

    s_ids = sink[ident].to_numpy(np.int64)
    at = np.minimum(np.searchsorted(e_sorted, s_ids), max(len(e_sorted) - 1, 0))
    known = (e_sorted[at] == s_ids) if len(e_sorted) else np.zeros(len(s_ids), bool)
    rows_known = np.flatnonzero(known)
    copies = np.bincount(at[rows_known], minlength=len(e_sorted))
    committed = sink["committed_ms"].to_numpy(np.int64)
    first = _first_copies(rows_known, at[rows_known], committed, copies)
    exp_of_first = order[at[first]]

    wrong = np.zeros(len(first), bool)
    for col in values:
        wrong |= ~_same(sink[col], first, expected[col], exp_of_first)
    lost_rows = order[copies == 0]
    dup_at = np.flatnonzero(copies > 1)
    counts = {"expected": len(e_sorted), "delivered": int(copies.sum()), "lost": len(lost_rows),
              "duplicated": int((copies[dup_at] - 1).sum()), "unexpected": int(len(s_ids) - len(rows_known)),
              "wrong": int(wrong.sum())}

    at_ms = committed[first]
    event_time = at_ms - expected["event_time_ms"].to_numpy(np.int64)[exp_of_first]
    processing = at_ms - expected["append_ms"].to_numpy(np.int64)[exp_of_first]
    pos = np.arange(len(sink)) if pos is None else pos
    keep = slice(0, KEEP_PER_KIND)
    unexpected = np.flatnonzero(~known)[keep]
    wrong_rows, wrong_exp = first[wrong], exp_of_first[wrong]
    if len(wrong_rows) > KEEP_PER_KIND:   # the first ones by sink position, and by ident
        by_ident = np.argsort(s_ids[wrong_rows], kind="stable")[keep]
        pick = np.union1d(np.argsort(pos[wrong_rows], kind="stable")[keep], by_ident)
        wrong_rows, wrong_exp = wrong_rows[pick], wrong_exp[pick]
    return Tally(counts, event_time.astype(float), processing.astype(float), at_ms,
                 expected.iloc[lost_rows[keep]],
                 pd.DataFrame({_IDENT: e_sorted[dup_at[keep]], "copies": copies[dup_at[keep]]}),
                 sink.iloc[unexpected].assign(**{_POS: pos[unexpected]}),
                 sink.iloc[wrong_rows].assign(**{_POS: pos[wrong_rows], _IDENT: s_ids[wrong_rows]}),
                 expected.iloc[wrong_exp])


class Totals:
    """Tallies of slices of ids, added up in ascending order of their ids. The latencies go
    into buffers of `capacity` samples made once (pages never written are never resident),
    so the sum costs no second copy of them."""

    def __init__(self, capacity: int):
        self.counts = dict.fromkeys(("expected", "delivered", "lost", "duplicated", "unexpected", "wrong"), 0)
        self.event_time = np.empty(capacity)
        self.processing = np.empty(capacity)
        self.committed = np.empty(capacity, np.int64)
        self.n = 0
        kinds = ("lost", "duplicated", "unexpected", "wrong")
        self.kept: dict[str, pd.DataFrame | None] = dict.fromkeys(kinds)

    def add(self, t: Tally) -> None:
        for k in self.counts:
            self.counts[k] += t.counts[k]
        end = self.n + len(t.committed_ms)
        self.event_time[self.n:end], self.processing[self.n:end] = t.event_time_ms, t.processing_ms
        self.committed[self.n:end] = t.committed_ms
        self.n = end
        wrong = pd.concat({"got": t.wrong_got.reset_index(drop=True),
                           "want": t.wrong_want.reset_index(drop=True)}, axis=1)
        for kind, rows, by in (("lost", t.lost, ()), ("duplicated", t.duplicated, ()),
                               ("unexpected", t.unexpected, (_POS,)), ("wrong", wrong, (_POS, _IDENT))):
            self.kept[kind] = _first(self.kept[kind], rows, by)

    def tally(self) -> Tally:
        kept = {k: v for k, v in self.kept.items() if v is not None}
        wrong = kept["wrong"]
        return Tally(dict(self.counts), self.event_time[:self.n], self.processing[:self.n],
                     self.committed[:self.n], kept["lost"], kept["duplicated"], kept["unexpected"],
                     wrong["got"], wrong["want"])


def _first(kept: pd.DataFrame | None, more: pd.DataFrame, by: tuple[str, ...]) -> pd.DataFrame:
    """The first KEEP_PER_KIND rows of kept then more: in that order (slices come in ascending
    ids), or by each sort key in `by` (wrong rows keep the first by either, see Tally)."""
    frames = [f for f in (kept, more.reset_index(drop=True)) if f is not None and len(f)]
    both = pd.concat(frames, ignore_index=True) if len(frames) > 1 else (frames or [more])[0]
    if not by:
        return both.head(KEEP_PER_KIND)
    keys = both["got"] if isinstance(both.columns, pd.MultiIndex) else both
    pick = np.unique(np.concatenate([np.argsort(keys[k].to_numpy(), kind="stable")[:KEEP_PER_KIND]
                                     for k in by]))
    return both.iloc[pick].reset_index(drop=True)


def _first_copies(rows: np.ndarray, at: np.ndarray, committed: np.ndarray, copies: np.ndarray) -> np.ndarray:
    """The sink row of each delivered event that became visible first."""
    if not (copies > 1).any():
        return rows
    by = np.lexsort((committed[rows], at))      # by event, then by commit time
    rows, at = rows[by], at[by]
    keep = np.ones(len(rows), bool)
    keep[1:] = at[1:] != at[:-1]
    return rows[keep]


def _same(got: pd.Series, got_at: np.ndarray, want: pd.Series, want_at: np.ndarray) -> np.ndarray:
    """Whether got[got_at] equals want[want_at], element by element (both missing is equal).
    A categorical expected column compares by codes, without a string per row (a value
    outside its categories has code -1, as a missing one has)."""
    if isinstance(want.dtype, pd.CategoricalDtype):
        if isinstance(got.dtype, pd.CategoricalDtype):   # both: one code table mapped onto the other
            mapped = np.append(want.cat.categories.get_indexer(got.cat.categories), -1)
            codes = mapped[got.cat.codes.to_numpy()[got_at]]
        else:
            codes = pd.Categorical(got.to_numpy()[got_at], categories=want.cat.categories).codes
        return codes == want.cat.codes.to_numpy()[want_at]
    a, b = got.to_numpy()[got_at], want.to_numpy()[want_at]
    same = a == b
    if a.dtype == object or b.dtype == object or a.dtype.kind == "f" or b.dtype.kind == "f":
        same |= pd.isna(a) & pd.isna(b)
    return np.asarray(same, bool)


def _discrepancies(lost, duplicated, unexpected, wrong_got, wrong_want, values, ident) -> pd.DataFrame:
    """The first of each kind, as text (only these rows are ever made into frames)."""
    n_dup = len(duplicated)
    return concat([
        discrepancies("lost", f"{ident} " + lost[ident].astype(str), pd.Series(["1 row"] * len(lost)),
                      pd.Series(["none"] * len(lost)), lost.get("batch")),
        discrepancies("duplicated", pd.Series([f"{ident} {i}" for i in duplicated[_IDENT]], dtype=object),
                      pd.Series(["1 row"] * n_dup), pd.Series([f"{n} rows" for n in duplicated["copies"]])),
        discrepancies("unexpected", f"{ident} " + unexpected[ident].astype(str),
                      pd.Series(["no row"] * len(unexpected)), pd.Series(["1 row"] * len(unexpected)),
                      unexpected.get("batch_id")),
        discrepancies("wrong", f"{ident} " + wrong_got[ident].astype(str), row_text(wrong_want, values),
                      row_text(wrong_got, values), wrong_got.get("batch_id")),
    ])
