"""Witness records: what each holds, and how the fewest of them are picked.

A record is a dict of whatever applies of: event_id, key, window ([start_ms, end_ms]),
window_s (the same window in seconds from the first event sent, the story's unit), partition,
offset, read_by_batch (-1: no batch read it), batch_committed (False when the batch that read
it never wrote commits/N), written_by ([{"batch_id", "committed_s"}]: the sink rows that carry
it), row (the output row's identifying text), expected, actual. evidence.py shows them as the
story says them.
Keys starting with "_" are for the story only and never leave this package.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MAX = 5


def written_by(rows: pd.DataFrame, rel_s) -> list[dict]:
    """The sink rows' batches and visibility times, in the order they became visible."""
    if not len(rows):
        return []
    by = ["committed_ms", *(["batch_id"] if "batch_id" in rows.columns else [])]
    rows = rows.sort_values(by, kind="stable")
    out = []
    for r in rows.itertuples(index=False):
        entry = {"committed_s": rel_s(float(r.committed_ms))}
        if "batch_id" in rows.columns:
            entry = {"batch_id": int(r.batch_id), **entry}
        out.append(entry)
    return out


def pick(candidates: list[dict], group: str = "_cause", limit: int = MAX) -> list[dict]:
    """The fewest records that prove a class: the first candidate of each distinct `group`
    value (a cause, a pattern of batches), the most common first (ties as first seen), up
    to `limit`. A second record of the same pattern proves nothing more."""
    order: dict = {}
    for c in candidates:
        order.setdefault(_hashable(c.get(group)), []).append(c)
    ranked = sorted(order.values(), key=len, reverse=True)
    return [g[0] for g in ranked][:limit]


def public(record: dict) -> dict:
    """The record as summary.json holds it: no private keys, plain JSON types."""
    return {k: _plain(v) for k, v in record.items() if not k.startswith("_")}


def _plain(v):
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


def _hashable(v):
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    return v
