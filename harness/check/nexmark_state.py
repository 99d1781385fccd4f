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
    if query in MODELS or query in WINNER_QUERIES:
        return None
    return (f"not checked: no model of Nexmark {query}'s state here yet (modelled: "
            f"{', '.join(m.what for m in MODELS.values())}, q9's Winner)")


# -- q9's transformWithState processor (workloads/pipelines/nexmark_state.py `Winner`) ----------------
# its state variables as the state data source flattens them: file `var` -> (the columns read ->
# the model's names, the key, the values); a list element or a timer held twice is two copies
WINNER_VARS = {
    "auction": ({"key.id": "id", "value.date_time_ms": "date_time_ms", "value.expires_ms": "expires_ms"},
                ["id"], ["date_time_ms", "expires_ms"]),
    "best": ({"key.id": "id", "value.bidder": "bidder", "value.price": "price",
              "value.bid_date_time_ms": "bid_date_time_ms"}, ["id"], ["bidder", "price", "bid_date_time_ms"]),
    "pending": ({"key.id": "id", "list_element.bidder": "bidder", "list_element.price": "price",
                 "list_element.bid_date_time_ms": "bid_date_time_ms"},
                ["id", "bidder", "price", "bid_date_time_ms"], ["copies"]),
    "registered-timers": ({"key.id": "id", "expiration_timestamp_ms": "expiration_timestamp_ms"},
                          ["id", "expiration_timestamp_ms"], ["copies"]),
}
WINNER_QUERIES = ("q9",)   # q4 and q6 chain Running after it: a second operator, not modelled


def winner_state_after(truth: pd.DataFrame, batches: list[Batch], batch: int) -> dict[str, pd.DataFrame]:
    """Winner's state after `batch`, per state variable (WINNER_VARS), by its own rules mirrored
    batch by batch: each auction's rows and bids that committed batches up to `batch` read and did
    not drop as late (transformWithState drops a row at or before the previous batch's watermark,
    harness/check/nexmark.py `_not_late`); in each batch the input first, then the timers at or
    below the batch's watermark, in time order (Spark fires them after the input, a timer at
    exactly the watermark too). An auction's first row sets `auction` and a timer at its expiry; a
    bid before its auction waits in `pending` with a timer at its own time; the auction's bids
    within its life make `best`; its expiry's firing clears both, any other firing keeps the
    pending bids after it."""
    from harness.check import nexmark
    from workloads.generator.nexmark import AUCTION
    from workloads.pipelines.nexmark_state import better

    columns = ["event_time_ms", "partition", "offset", "nx_type", "auction_id", "expires_ms", "auction",
               "bidder", "price", "extra"]
    real = real_events(truth, batches, [c for c in columns if c in truth.columns])
    kept, _ = nexmark._not_late(real, batches)
    kept = kept[kept["batch"] <= batch]
    committed = sorted((b for b in batches if b.committed and b.batch_id <= batch), key=lambda b: b.batch_id)
    marks = {b.batch_id: b.watermark_ms for b in committed}
    before = {b.batch_id: a.watermark_ms for a, b in zip(committed, committed[1:], strict=False)}
    rows: dict[int, dict[int, tuple[list, list]]] = {}
    for r in nexmark._kind(kept, AUCTION).itertuples(index=False):
        rows.setdefault(int(r.auction_id), {}).setdefault(int(r.batch), ([], []))[0].append(
            (int(r.event_time_ms), int(r.expires_ms)))
    for r in nexmark.bids(kept).itertuples(index=False):
        rows.setdefault(int(r.auction), {}).setdefault(int(r.batch), ([], []))[1].append(
            (int(r.bidder), int(r.price), int(r.event_time_ms), str(r.extra)))
    out: dict[str, list] = {var: [] for var in WINNER_VARS}
    last_mark = marks.get(batch, -1)
    for key, by_batch in rows.items():
        state = _Winner()
        for n in sorted(by_batch):
            state.fire(before.get(n, -1))
            state.input(*by_batch[n], better)
            state.fire(marks.get(n, -1))
        state.fire(last_mark)
        state.rows(key, out)
    frames = {}
    for var, (_names, key_cols, values) in WINNER_VARS.items():
        cols = [*key_cols, *[v for v in values if v != "copies"]]
        frame = pd.DataFrame(out[var], columns=cols)
        if "copies" in values:
            frame = frame.groupby(key_cols).size().rename("copies").reset_index()
        frames[var] = frame
    return frames


class _Winner:
    """One auction's Winner state, as the processor keeps it."""

    def __init__(self):
        self.auction: tuple[int, int] | None = None     # (date_time_ms, expires_ms)
        self.best: tuple | None = None                  # (bidder, price, time, extra)
        self.pending: list[tuple] = []
        self.timers: set[int] = set()

    def input(self, auctions: list, bids: list, better) -> None:
        if self.auction is None and auctions:
            self.auction = auctions[0]
            self.timers.add(self.auction[1])
        if self.auction is None:
            self.pending += bids
            self.timers |= {b[2] for b in bids}
            return
        bids = [*bids, *self.pending]
        self.pending = []
        start, end = self.auction
        for b in bids:
            if start <= b[2] <= end and better(b, self.best):
                self.best = b

    def fire(self, watermark: int) -> None:
        for at in sorted(t for t in self.timers if t <= watermark):
            self.timers.discard(at)
            if self.auction is None:
                self.pending = [b for b in self.pending if b[2] > at]
            elif self.auction[1] == at:
                self.auction, self.best = None, None

    def rows(self, key: int, out: dict[str, list]) -> None:
        if self.auction is not None:
            out["auction"].append((key, *self.auction))
        if self.best is not None:
            out["best"].append((key, self.best[0], self.best[1], self.best[2]))
        out["pending"] += [(key, b[0], b[1], b[2]) for b in self.pending]
        out["registered-timers"] += [(key, t) for t in self.timers]
