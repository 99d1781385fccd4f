"""What a Nexmark query's state must hold after a batch (issue 49), for the queries whose state
is modelled here: the window aggregation that q5 and q7 each begin with
(workloads/pipelines/nexmark.py), by Spark's rules on ground truth, as their oracles
(harness/check/nexmark.py) apply them to the rows:

  q5   bids counted per (window, auction), on sliding windows: the state holds, per
       (window_start_ms, window_end_ms, auction), the `count` of the bids that batches up to N
       read and did not drop as late (a (bid, window) pair whose window ended at or before the
       watermark of the batch that read it), for the windows batch N's watermark had not closed
       (Spark evicts a window once its end <= the watermark)
  q7   the highest price per tumbling window, by the same rules: per (window_start_ms,
       window_end_ms), the `max` price

The operator after it (q5's second aggregation, q7's join) is not modelled: the check says so.
The other stateful queries are not modelled at all; `unmodelled` names them before anything is
read. A query is told from the state's own columns (`Model.names`), so a build of the
scenario's own whose state has other columns is said unchecked, not judged against this.

    model("q5").expected(truth, batches, params, batch) -> frame of key + value columns
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.check.batch_reads import real_events
from harness.check.checkpoint import Batch


@dataclass(frozen=True)
class Model:
    """One operator's state: the state data source's columns -> the model's names, the key and
    the values among them, and how the model's rows are built."""

    query: str
    what: str                  # the operator, as a note names it
    names: dict[str, str]      # the state's flattened columns -> the model's
    key: tuple[str, ...]
    values: tuple[str, ...]

    def expected(self, truth: pd.DataFrame, batches: list[Batch], params: dict, batch: int) -> pd.DataFrame:
        from harness.check import nexmark

        window = int(params["window_ms"])
        slide = int(params.get("slide_ms") or window) if self.query == "q5" else window
        b = nexmark.bids(real_events(truth, batches, ["event_time_ms", "partition", "offset", "nx_type",
                                                      "auction", "price"]))
        b = b[(b["batch"] >= 0) & (b["batch"] <= batch)]
        pairs = nexmark._pairs(b, batches, window, slide)
        evict = {x.batch_id: x.watermark_ms for x in batches}.get(batch, -1)
        kept = pairs[~pairs["late"] & (pairs["window_end_ms"] > evict)]
        by = ["window_start_ms", "window_end_ms", *(["auction"] if self.query == "q5" else [])]
        grouped = kept.groupby(by)
        out = grouped.size().rename("count") if self.query == "q5" else grouped["price"].max().rename("max")
        return out.reset_index()[[*self.key, *self.values]]


MODELS = {
    "q5": Model("q5", "q5's count per window and auction",
                {"key.window.start": "window_start_ms", "key.window.end": "window_end_ms",
                 "key.auction": "auction", "value.count": "count"},
                ("window_start_ms", "window_end_ms", "auction"), ("count",)),
    "q7": Model("q7", "q7's highest price per window",
                {"key.window.start": "window_start_ms", "key.window.end": "window_end_ms",
                 "value.max": "max"},
                ("window_start_ms", "window_end_ms"), ("max",)),
}


def model(query: str) -> Model | None:
    return MODELS.get(query)


def unmodelled(query: str) -> str | None:
    """Why a stateful Nexmark query's state is not checked, or None when it is modelled."""
    if query in MODELS:
        return None
    return (f"not checked: no model of Nexmark {query}'s state here yet (modelled: "
            f"{', '.join(m.what for m in MODELS.values())})")
