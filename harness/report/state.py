"""A case's state and checkpoint settings in a word, for the column that the table, report.html
and compare show beside the guarantee when a [matrix] swept them (harness/scenario/state_matrix.py).

    hdfs | rocksdb | rocksdb+changelog | rocksdb+changelog ckpt2 | hdfs async

The column is shown only when the run's cases differ in them: a run that swept nothing reads as
it did before the settings were recorded."""

from __future__ import annotations

from collections.abc import Iterable

from harness.results.model import CaseResult

COLUMN = "state"


def settings(case: CaseResult) -> dict:
    """summary.json's `state_settings` of the case ({} in a summary written before them)."""
    return case.sections.get("state_settings") or {}


def text(case: CaseResult) -> str:
    """The settings in a word: the store, +changelog, the checkpoint format when not 1, async."""
    s = settings(case)
    if not s:
        return "-"
    out = s.get("state_store", "?") + ("+changelog" if s.get("changelog") else "")
    if s.get("checkpoint_format", 1) != 1:
        out += f" ckpt{s['checkpoint_format']}"
    return out + (" async" if s.get("async_progress") else "")


def swept(cases: Iterable[CaseResult]) -> bool:
    """Whether the cases differ in their state settings (a [matrix] swept them)."""
    return len({text(c) for c in cases}) > 1
