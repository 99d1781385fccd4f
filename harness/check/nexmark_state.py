"""What a Nexmark query's state must hold after a batch (issue 49), for the queries whose state
is modelled here (workloads/pipelines/nexmark.py), by Spark's rules on ground truth, as their
oracles (harness/check/nexmark.py) apply them to the rows. The window aggregations hold, for
the windows batch N's watermark had not closed (Spark evicts a window once its end <= the
watermark), the bids that batches up to N read and did not drop as late (a (bid, window) pair
whose window ended at or before the watermark of the batch that read it):

  q5   per (window_start_ms, window_end_ms, auction) on sliding windows, the `count`
  q7   per tumbling window, the highest price (`max`)
  q12  per (window, bidder), the `count`
  q8   per (window, id, name) the people, per (window, seller) the sellers: which keys are
       held (the join after them reads no count, so Spark keeps none)
  q15  per day (q16: per day and channel) the counts of bids, in all and per price rank (q16:
       and the day's last minute); their collect_set buffers are Spark's serialized bytes, not
       compared
  q19  per (window, auction), which keys are held (its buffer, a collect_list, is bytes)
  q17  per (day, auction), the buffers of its nine aggregates: four counts (all bids, and
       those of each price rank), min, max, avg's sum and count, sum; the state's value repeats
       `count` and `sum`, told apart by position (workloads/pipelines/state_read.py
       `unique_names`: `count#2` is the second)
  q11  per (bidder, session start), the session's end and `count`, by Spark's session rules
       (harness/check/sessions.py), the bidder as the key

The unbounded joins (`JOINS`) hold every row each side read up to batch N, kept for the run:
  q3   left: the category-10 auctions (a_id, seller) by seller; right: the people of OR, ID
       and CA (p_id, name, city, state) by id
  q20  left: every bid by auction; right: the category-10 auctions by id
each row with `matched` (the other side held its key by then) and, per key, the rows' count.

The transformWithState queries' processors (q9's Winner; q4's and q6's Winner and Running;
q18's Newest) are mirrored batch by batch (`winner_state_after`, `running_state_after`,
`newest_state_after`). The operator after q5's, q7's and q8's first (q5's second aggregation,
q7's and q8's joins) is not modelled: the check says so, and `unmodelled` names a query with no
model at all before anything is read. A query is told from the state's own columns (`Model.names`), so a
build of the scenario's own whose state has other columns is said unchecked, not judged against
this.

    model("q5").expected(truth, batches, params, batch) -> frame of key + value columns
    join_state_after(JOINS["q3"], truth, batches, batch) -> {store: frame}
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
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
    rows: str = "bid"          # the events it aggregates: "bid", "person", "auction"
    renamed: tuple[tuple[str, str], ...] = ()   # (ground truth's column, the model's name)

    def expected(self, truth: pd.DataFrame, batches: list[Batch], params: dict, batch: int) -> pd.DataFrame:
        from harness.check import nexmark
        from workloads.generator.nexmark import AUCTION, PERSON

        columns = ["event_time_ms", "partition", "offset", "nx_type", "auction", "bidder", "price", "channel",
                   *(c for c, _ in self.renamed)]
        real = real_events(truth, batches, [c for c in dict.fromkeys(columns) if c in truth.columns])
        if self.rows == "bid":
            b = nexmark.bids(real)
        else:
            b = nexmark._kind(real, {"person": PERSON, "auction": AUCTION}[self.rows])
        b = b.rename(columns=dict(self.renamed))
        b = b[(b["batch"] >= 0) & (b["batch"] <= batch)]
        if self.query == "q11":
            return _sessions(b, batches, int(params["gap_ms"]), batch)[[*self.key, *self.values]]
        window = nexmark.DAY_MS if self.query in ("q15", "q16", "q17") else int(params["window_ms"])
        slide = int(params.get("slide_ms") or window) if self.query == "q5" else window
        pairs = nexmark._pairs(b, batches, window, slide)
        evict = {x.batch_id: x.watermark_ms for x in batches}.get(batch, -1)
        kept = pairs[~pairs["late"] & (pairs["window_end_ms"] > evict)]
        by = ["window_start_ms", "window_end_ms", *[k for k in self.key if not k.startswith("window_")]]
        grouped = kept.groupby(by)
        if self.query == "q7":
            out = grouped["price"].max().rename("max").reset_index()
        elif self.query == "q17":
            out = nexmark._ranked(kept).groupby(by).agg(
                total_bids=("price", "size"), rank1_bids=("rank1", "sum"), rank2_bids=("rank2", "sum"),
                rank3_bids=("rank3", "sum"), min_price=("price", "min"), max_price=("price", "max"),
                avg_sum=("price", "sum"), avg_count=("price", "size"), sum_price=("price", "sum"))
            out = out.reset_index()
            out["avg_sum"] = out["avg_sum"].astype("float64")   # avg's buffer sums as a double
        elif self.query in ("q15", "q16"):
            out = nexmark._ranked(kept).groupby(by).agg(
                total_bids=("price", "size"), rank1_bids=("rank1", "sum"), rank2_bids=("rank2", "sum"),
                rank3_bids=("rank3", "sum"))
            if self.query == "q16":   # the day's last minute with a bid, as Spark's max of "HH:mm"
                minute = kept.assign(m=nexmark._utc(kept["event_time_ms"], "%H:%M")).groupby(by)["m"].max()
                out = out.join(minute.rename("minute"))
            out = out.reset_index()
        elif self.values == (PRESENT,):
            out = grouped.size().rename(PRESENT).reset_index().assign(present=1)
        else:
            out = grouped.size().rename("count").reset_index()
        return out[[*self.key, *self.values]]

    def held(self, state: pd.DataFrame) -> pd.DataFrame:
        """The state's frame in the model's names; a key-only state's `present`: how many times
        it holds the key (1, or a key held twice shows as 2)."""
        got = state.rename(columns=self.names)
        if self.values != (PRESENT,):
            return got
        return got.groupby(list(self.key), dropna=False).size().rename(PRESENT).reset_index()


def _sessions(b: pd.DataFrame, batches: list[Batch], gap_ms: int, batch: int) -> pd.DataFrame:
    """q11's sessions stored after `batch`: the bidder as the key of Spark's session rules
    (harness/check/sessions.py `state_after`), as q11's oracle mirrors them."""
    from harness.check import sessions

    as_keys = pd.DataFrame({"key": b["bidder"].astype(str), "event_time_ms": b["event_time_ms"],
                            "amount": np.zeros(len(b), np.int64), "partition": b["partition"],
                            "offset": b["offset"]})
    state = sessions.state_after(as_keys, batches, gap_ms, batch)
    return pd.DataFrame({"bidder": state["key"].astype(np.int64),
                         "session_start_ms": state["session_start_ms"].astype(np.int64),
                         "session_end_ms": state["session_end_ms"].astype(np.int64),
                         "count": state["count"].astype(np.int64)})


_WINDOW_KEY = {"key.window.start": "window_start_ms", "key.window.end": "window_end_ms"}
PRESENT = "present"   # a model's value where the state keeps only keys: 1 for each key held
_RANK_COUNTS = {"value.count": "total_bids", "value.count#2": "rank1_bids", "value.count#3": "rank2_bids",
                "value.count#4": "rank3_bids"}
_BUFFERS = {f"value.buf{'' if i == 1 else f'#{i}'}": f"buf{i}" for i in range(1, 9)}
MODELS: dict[str, Model | tuple[Model, ...]] = {
    "q5": Model("q5", "q5's count per window and auction",
                {**_WINDOW_KEY, "key.auction": "auction", "value.count": "count"},
                ("window_start_ms", "window_end_ms", "auction"), ("count",)),
    "q7": Model("q7", "q7's highest price per window", {**_WINDOW_KEY, "value.max": "max"},
                ("window_start_ms", "window_end_ms"), ("max",)),
    "q12": Model("q12", "q12's count per window and bidder",
                 {**_WINDOW_KEY, "key.bidder": "bidder", "value.count": "count"},
                 ("window_start_ms", "window_end_ms", "bidder"), ("count",)),
    "q17": Model("q17", "q17's aggregates per day and auction",
                 {**_WINDOW_KEY, "key.auction": "auction", "value.count": "total_bids",
                  "value.count#2": "rank1_bids", "value.count#3": "rank2_bids", "value.count#4": "rank3_bids",
                  "value.min": "min_price", "value.max": "max_price", "value.sum": "avg_sum",
                  "value.count#5": "avg_count", "value.sum#2": "sum_price"},
                 ("window_start_ms", "window_end_ms", "auction"),
                 ("total_bids", "rank1_bids", "rank2_bids", "rank3_bids", "min_price", "max_price", "avg_sum",
                  "avg_count", "sum_price")),
    # q15's and q16's counts of bids (all, and each price rank's) per day (and channel), and
    # q16's last minute; their distinct counts' collect_set buffers are Spark's own serialized
    # bytes (`value.buf`, eight of them): held, not compared
    "q15": Model("q15", "q15's counts of bids per day",
                 {**_WINDOW_KEY, **_RANK_COUNTS, **_BUFFERS}, ("window_start_ms", "window_end_ms"),
                 tuple(_RANK_COUNTS.values())),
    "q16": Model("q16", "q16's counts of bids and last minute per day and channel",
                 {**_WINDOW_KEY, "key.channel": "channel", "value.max": "minute", **_RANK_COUNTS, **_BUFFERS},
                 ("window_start_ms", "window_end_ms", "channel"), ("minute", *_RANK_COUNTS.values())),
    # q19's bids per (window, auction) are a collect_list's serialized bytes: which keys are held
    "q19": Model("q19", "q19's bids per window and auction", {**_WINDOW_KEY, "key.auction": "auction",
                                                              "value.buf": "buf"},
                 ("window_start_ms", "window_end_ms", "auction"), (PRESENT,)),
    # the session's start and the bidder are the key's, again in the value: not compared
    "q11": Model("q11", "q11's sessions per bidder",
                 {"key.bidder": "bidder", "key.sessionStartTime": "session_start_ms",
                  "value.session_window.start": "start_again", "value.session_window.end": "session_end_ms",
                  "value.bidder": "bidder_again", "value.count": "count"},
                 ("bidder", "session_start_ms"), ("session_end_ms", "count")),
    # q8's two aggregations before its join: the people per (window, id, name), the sellers per
    # (window, seller). The join reads neither count, so Spark keeps no value, only the keys
    # (the id, `_timed`, is a grouping expression): the model says which keys are held
    # ("present"); the join of their rows is not modelled
    "q8": (Model("q8", "q8's people per window", {**_WINDOW_KEY, "key._groupingexpression": "id",
                                                  "key.name": "name"},
                 ("window_start_ms", "window_end_ms", "id", "name"), (PRESENT,), "person",
                 (("person_id", "id"), ("name", "name"))),
           Model("q8", "q8's sellers per window", {**_WINDOW_KEY, "key._groupingexpression": "seller"},
                 ("window_start_ms", "window_end_ms", "seller"), (PRESENT,), "auction",
                 (("seller", "seller"),))),
}


@dataclass(frozen=True)
class JoinSide:
    """One side of an unbounded stream-stream join: its rows' kind and filter, the state's value
    columns -> ground truth's, and the join key among them."""

    kind: int
    where: Callable[[pd.DataFrame], np.ndarray]
    names: dict[str, str]      # value.<column> (without "value.") -> the truth's column
    key: str                   # the truth's column the side joins on
    uses: tuple[str, ...] = ()     # the truth's columns `where` reads


@dataclass(frozen=True)
class Join:
    query: str
    what: str
    sides: dict[str, JoinSide]   # "left", "right"


def _category_10(a: pd.DataFrame) -> np.ndarray:
    return a["category"].to_numpy() == 10


def _join_sides() -> dict[str, Join]:
    from workloads.generator.nexmark import AUCTION, BID, PERSON

    auctions = JoinSide(AUCTION, _category_10, {
        "a_id": "auction_id", "item_name": "item_name", "description": "description",
        "initial_bid": "initial_bid", "reserve": "reserve", "auction_date_time_ms": "event_time_ms",
        "expires_ms": "expires_ms", "seller": "seller", "category": "category", "auction_extra": "extra"},
        "auction_id", ("category",))
    return {
        "q3": Join("q3", "q3's join of auctions and sellers", {
            "left": JoinSide(AUCTION, _category_10, {"a_id": "auction_id", "seller": "seller"}, "seller",
                             ("category",)),
            "right": JoinSide(PERSON, lambda p: p["state"].isin(["OR", "ID", "CA"]).to_numpy(),
                              {"p_id": "person_id", "name": "name", "city": "city", "state": "state"},
                              "person_id", ("state",))}),
        "q20": Join("q20", "q20's join of bids and auctions", {
            "left": JoinSide(BID, lambda b: np.ones(len(b), bool), {
                "auction": "auction", "bidder": "bidder", "price": "price", "channel": "channel",
                "url": "url", "bid_date_time_ms": "event_time_ms", "bid_extra": "extra"}, "auction"),
            "right": auctions}),
    }


JOINS = _join_sides()


def join_state_after(join: Join, truth: pd.DataFrame, batches: list[Batch],
                     batch: int) -> dict[str, pd.DataFrame]:
    """An unbounded join's state after `batch`, per store: `<side>-keyWithIndexToValue`, each
    row the side read up to `batch` (by its key and every value column) with `copies` and
    `matched` (the other side read a row of its key by then: Spark marks a buffered row matched
    when a row of the other side joins it, and a new row that joined rows already buffered); and
    `<side>-keyToNumValues`, the rows per key (`count`). No row leaves: the join has no time bound."""
    from harness.check import nexmark

    wanted = {"event_time_ms", "partition", "offset", "nx_type"}
    for side in join.sides.values():
        wanted |= set(side.names.values()) | {side.key, *side.uses}
    real = real_events(truth, batches, [c for c in wanted if c in truth.columns])
    real = real[(real["batch"] >= 0) & (real["batch"] <= batch)]
    rows = {}
    for name, side in join.sides.items():
        of = nexmark._kind(real, side.kind)
        of = of[side.where(of)]
        rows[name] = pd.DataFrame({"join_key": of[side.key].astype(np.int64).to_numpy(),
                                   **{col: of[src].to_numpy() for col, src in side.names.items()}})
    out = {}
    for name, other in (("left", "right"), ("right", "left")):
        mine, keys = rows[name], set(rows[other]["join_key"])
        columns = ["join_key", *join.sides[name].names]
        grouped = mine.groupby(columns, dropna=False).size().rename("copies").reset_index()
        grouped["matched"] = grouped["join_key"].isin(keys)
        out[f"{name}-keyWithIndexToValue"] = grouped
        out[f"{name}-keyToNumValues"] = mine.groupby("join_key").size().rename("count").reset_index()
    return out


def models(query: str) -> tuple[Model, ...]:
    """The query's modelled operators (q8: two)."""
    m = MODELS.get(query)
    return () if m is None else m if isinstance(m, tuple) else (m,)


def model(query: str) -> Model | None:
    """The query's first modelled operator."""
    return next(iter(models(query)), None)


def matching(query: str, columns) -> Model | None:
    """Of the query's models, the one whose state has exactly these columns (`partition_id` aside)."""
    have = set(columns) - {"partition_id"}
    return next((m for m in models(query) if set(m.names) == have), None)


def unmodelled(query: str) -> str | None:
    """Why a stateful Nexmark query's state is not checked, or None when it is modelled."""
    if query in MODELS or query in TWS_QUERIES or query in JOINS:
        return None
    whats = [*(m.what for q in MODELS for m in models(q)), *(j.what for j in JOINS.values()),
             "Winner (q9, q4, q6)", "Running (q4, q6)", "q18's Newest"]
    return f"not checked: no model of Nexmark {query}'s state here yet (modelled: {', '.join(whats)})"


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
WINNER_QUERIES = ("q9", "q4", "q6")   # q4 and q6 chain Running after it (RUNNING)
# the transformWithState queries: q9's Winner; q4's and q6's Winner and Running; q18's Newest
TWS_QUERIES = (*WINNER_QUERIES, "q18")
# q4's and q6's Running, per query: (the key's column, the state's `last`: None for every auction)
# (workloads/pipelines/nexmark_state.py's LAST_N, 10: that module imports pyspark as it loads)
RUNNING = {"q4": ("category", None), "q6": ("seller", 10)}


def running_vars(query: str) -> dict:
    """Running's state variables (as WINNER_VARS) for q4 or q6: `totals` (how many auctions
    closed, and q4's sum of their prices; q6 keeps 0 there) and `recent` (q6's last prices; q4's
    stays empty)."""
    by = RUNNING[query][0]
    return {"totals": ({f"key.{by}": "key", "value.auctions": "auctions", "value.total": "total"},
                       ["key"], ["auctions", "total"]),
            "recent": ({f"key.{by}": "key", "list_element.price": "price"}, ["key", "price"], ["copies"])}


def running_state_after(query: str, truth: pd.DataFrame, batches: list[Batch],
                        batch: int) -> dict[str, pd.DataFrame]:
    """Running's state after `batch` (workloads/pipelines/nexmark_state.py): per key, the
    auctions Winner closed by then, those whose expiry is at or below batch N's watermark and
    that had a best bid (Winner's timer fires there, and its row reaches Running in the same
    batch), with the sum of their winning prices (q4) or the last 10 of them in the order of
    expiry (q6, a price held twice counted as copies)."""
    from harness.check import nexmark

    by, last = RUNNING[query]
    columns = ["event_time_ms", "partition", "offset", "nx_type", "auction_id", "expires_ms", "auction",
               "bidder", "price", "extra", "seller", "category", "item_name", "description", "initial_bid",
               "reserve"]
    real = real_events(truth, batches, [c for c in columns if c in truth.columns])
    w, _ = nexmark.winners(real, batches)
    mark = {b.batch_id: b.watermark_ms for b in batches}.get(batch, -1)
    w = w[w["expires_ms"].to_numpy() <= mark].sort_values([by, "expires_ms", "id"], kind="stable")
    g = w.groupby(by)
    totals = pd.DataFrame({"auctions": g.size(), "total": g["price"].sum() if last is None else 0})
    totals = totals.rename_axis("key").reset_index().astype("int64")
    recent = w.groupby(by).tail(last) if last else w.iloc[:0]   # q4 declares `recent` and keeps it empty
    return {"totals": totals,
            "recent": (recent.groupby([by, "price"]).size().rename("copies").reset_index()
                       .rename(columns={by: "key"}).astype("int64"))}


# q18's Newest: per (bidder, auction) the newest bid written, by (time, price, channel, url, extra)
NEWEST_VARS = {"last": ({"key.bidder": "bidder", "key.auction": "auction",
                         "value.date_time_ms": "date_time_ms", "value.price": "price",
                         "value.channel": "channel", "value.url": "url",
                         "value.extra": "extra"},
                        ["bidder", "auction"], ["date_time_ms", "price", "channel", "url", "extra"])}


def newest_state_after(truth: pd.DataFrame, batches: list[Batch], batch: int) -> dict[str, pd.DataFrame]:
    """Newest's `last` after `batch`: per (bidder, auction), the greatest (time, price, channel,
    url, extra) of the bids batches up to N read (no row is late: the query keeps no event time)."""
    from harness.check import nexmark

    columns = ("event_time_ms", "partition", "offset", "nx_type", "auction", "bidder", "price", "channel",
               "url", "extra")
    real = real_events(truth, batches, [c for c in columns if c in truth.columns])
    b = nexmark.bids(real)
    b = b[(b["batch"] >= 0) & (b["batch"] <= batch)]
    b = b.sort_values(["bidder", "auction", "event_time_ms", "price", "channel", "url", "extra"],
                      kind="stable")
    newest = b.drop_duplicates(["bidder", "auction"], keep="last")
    return {"last": newest[["bidder", "auction", "date_time_ms", "price", "channel", "url", "extra"]]
            .reset_index(drop=True)}


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
