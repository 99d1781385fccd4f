"""An upsert's own failure when a batch runs again: a row that went back to an older batch's
value.

Spark runs a batch again only when its commit is missing, and never after a newer one; so
in the order an upsert sink applied its writes, each key's batch ids must never fall. A key
whose write carries an older batch id than one applied before it went backwards: a newer
value was overwritten by an older one (a sink that applies its own log again on recovery, or
applies a write late, without comparing batch ids). The final table may even be right again
by the end of the run; a reader in between saw the old value.

    went_backwards(history, key) -> one row per write that went back, with the newer batch
                                    it overwrote and the values before and after
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.check.result import plural, row_text


def went_backwards(history: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """Writes (of `history`: key columns, values, batch_id, seq, committed_ms, in any order) that
    carry an older batch id than a write applied before them to the same key; with
    `over_batch`, the newest batch id applied before, and `was_*` its values."""
    if history is None or not len(history):
        return pd.DataFrame()
    h = history.sort_values("seq", kind="stable").reset_index(drop=True)
    newest = h.groupby(key, sort=False)["batch_id"].cummax()
    before = newest.groupby([h[k] for k in key], sort=False).shift(1)
    back = h[(before.notna() & (h["batch_id"] < before)).to_numpy()].copy()
    if not len(back):
        return back
    back["over_batch"] = before[back.index].astype(np.int64)
    values = [c for c in h.columns if c not in (*key, "batch_id", "seq", "committed_ms")]
    was = h.merge(back[[*key, "over_batch"]].drop_duplicates(), left_on=[*key, "batch_id"],
                  right_on=[*key, "over_batch"]).drop_duplicates([*key, "batch_id"], keep="last")
    back = back.merge(was[[*key, "over_batch", *values, "committed_ms"]]
                      .rename(columns={**{v: f"was_{v}" for v in values},
                                       "committed_ms": "was_committed_ms"}),
                      on=[*key, "over_batch"], how="left")
    return back


def problem(back: pd.DataFrame, key: list[str]) -> str:
    """The verdict's sentence for the writes that went backwards."""
    first = back.iloc[0]
    keys = row_text(back.head(1), key).iloc[0]
    return (f"{plural(len(back), 'write')} of the upsert sink went backwards: an older batch's row was "
            f"applied over a newer one (first {keys}: batch {int(first['batch_id'])} over batch "
            f"{int(first['over_batch'])})")
