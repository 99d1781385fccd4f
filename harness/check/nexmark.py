"""The oracles of Nexmark's queries (workloads/pipelines/nexmark.py), in pandas over ground
truth, which holds every field of every event (workloads/generator/nexmark.py): no Spark.

Each builds the rows its query must write, with Spark's semantics where they differ from the
SQL text:
  - a windowed query drops the bids Spark drops as late: an (event, window) pair whose window
    ended at or before the watermark of the batch that read it (the one rule of
    harness/check/windows.py); a session window mirrors Spark's session rules
    (harness/check/sessions.py);
  - output is append mode: a window the last watermark had not passed when the run ended,
    and that is not in the sink, is open, not lost;
  - the joins without a time bound keep every row of both sides for the run: every pair
    in truth is expected.
The rows are then matched with the sink's as a multiset by the query's key columns
(harness/check/rows.py): lost, duplicated, unexpected and wrong values, as for any query.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from harness.check import rows, sessions, watermark
from harness.check.batch_reads import last_watermark, late_watermarks, real_events
from harness.check.checkpoint import Batch
from harness.check.result import CheckResult
from workloads.generator.nexmark import AUCTION, BID, PERSON, TRUTH_COLUMNS
from workloads.pipelines import nexmark as queries

NEEDED = ["event_id", "event_time_ms", "partition", "offset", "append_ms", *TRUTH_COLUMNS]
RANKS = queries.RANKS
DAY_MS = queries.DAY_MS


class Expected:
    """What a query must write: its rows, the columns that identify one, when each became
    possible (event time), the late events Spark rightly dropped, and the rows still open."""

    def __init__(
        self,
        frame: pd.DataFrame,
        key: list[str],
        time_col: str | None,
        dropped_late: int = 0,
        open_rows: pd.DataFrame | None = None,
    ):
        self.frame, self.key, self.time_col = frame, key, time_col
        self.dropped_late, self.open_rows = dropped_late, open_rows


def final_watermark_ms(max_event_time_ms: int, params: dict) -> int | None:
    """The watermark at which every window of the run is final (None: a query without one)."""
    reach = queries.QUERIES[params["query"]].reach_ms(params)
    return None if reach is None else max_event_time_ms + reach + 1


def oracle_of(name: str) -> Callable[[pd.DataFrame, list[Batch], dict], Expected]:
    """The oracle the query `name` names (Query.oracle: "module:function", a function of this
    module: looked up here, never imported by its name's text)."""
    module, function = queries.QUERIES[name].oracle.split(":")
    if module != __name__:
        raise ValueError(f"the oracle of Nexmark query {name} is {module}:{function}, not in {__name__}")
    return globals()[function]


def check(truth: pd.DataFrame, sink: pd.DataFrame, batches: list[Batch], params: dict) -> CheckResult:
    real = real_events(truth, batches, [c for c in NEEDED if c in truth.columns])
    q = queries.QUERIES[params["query"]]
    exp = oracle_of(q.name)(real, batches, params)
    columns = list(q.columns)
    frame = exp.frame[columns + ([exp.time_col] if exp.time_col and exp.time_col not in columns else [])]
    result = rows.check(
        frame,
        sink,
        exp.key,
        len(real),
        dropped_late=exp.dropped_late,
        open_rows=exp.open_rows,
        time_col=exp.time_col,
        # the workload's own events close windows up to the newest of them less the delay; the
        # ones after it closed on the harness's flush, whose event time is ahead of the clock
        latency_until_ms=(int(real["event_time_ms"].max()) - params["watermark_ms"]
                          if q.watermark_rule and len(real) else None),
    )
    if q.watermark_rule:
        result = result.with_problems(watermark.check(truth, batches, params["watermark_ms"]))
    return result


# each kind's integer fields: ground truth's parts without Nexmark's columns (the control
# events') make them floats with NaN across the whole frame, so they are cast back per kind
INTS = {PERSON: ("person_id",),
        AUCTION: ("auction_id", "initial_bid", "reserve", "expires_ms", "seller", "category"),
        BID: ("auction", "bidder", "price")}


def _kind(real: pd.DataFrame, kind: int) -> pd.DataFrame:
    rows = real[real["nx_type"].to_numpy() == kind]
    return rows.astype({c: np.int64 for c in INTS[kind] if c in rows.columns})


def bids(real: pd.DataFrame) -> pd.DataFrame:
    b = _kind(real, BID)
    return b.assign(date_time_ms=b["event_time_ms"])


def _utc(ms: pd.Series, fmt: str) -> pd.Series:
    return pd.to_datetime(ms, unit="ms", utc=True).dt.strftime(fmt)


# -- stateless --------------------------------------------------------------------------------------------
def q0(real, batches, params) -> Expected:
    """Every bid, as it came."""
    columns = list(queries.BID_COLUMNS)
    return Expected(bids(real)[columns], columns, "date_time_ms")


def q1(real, batches, params) -> Expected:
    b = bids(real)
    out = b.assign(price=b["price"].astype(np.float64) * 0.908)
    return Expected(out, list(queries.QUERIES["q1"].columns), "date_time_ms")


def q2(real, batches, params) -> Expected:
    b = bids(real)
    b = b[b["auction"] % 123 == 0]
    return Expected(b, ["auction", "price"], "date_time_ms")


def q10(real, batches, params) -> Expected:
    b = bids(real)
    out = b.assign(dt=_utc(b["event_time_ms"], "%Y-%m-%d"), hm=_utc(b["event_time_ms"], "%H:%M"))
    return Expected(out, list(queries.QUERIES["q10"].columns), "date_time_ms")


def q13(real, batches, params) -> Expected:
    b = bids(real)
    out = b.assign(value=(b["auction"] % 10_000).astype(str))
    return Expected(out, list(queries.QUERIES["q13"].columns), "date_time_ms")


def q14(real, batches, params) -> Expected:
    b = bids(real)
    euros = b["price"].astype(np.float64) * 0.908
    b = b[(euros > 1_000_000) & (euros < 50_000_000)]
    hour = pd.to_datetime(b["event_time_ms"], unit="ms", utc=True).dt.hour
    kind = np.where(
        (hour >= 8) & (hour <= 18), "dayTime", np.where((hour <= 6) | (hour >= 20), "nightTime", "otherTime")
    )
    out = b.assign(
        price=b["price"].astype(np.float64) * 0.908,
        bid_time_type=kind,
        c_counts=b["extra"].str.count("c").astype(np.int64),
    )
    return Expected(out, list(queries.QUERIES["q14"].columns), "date_time_ms")


_CHANNEL_ID = re.compile(r"(&|^)channel_id=([^&]*)")
_HOT_IDS = {"apple": "0", "google": "1", "facebook": "2", "baidu": "3"}


def q21(real, batches, params) -> Expected:
    b = bids(real)
    found = b["url"].str.extract(_CHANNEL_ID)[1].fillna("")
    lower = b["channel"].str.lower()
    hot = lower.isin(list(_HOT_IDS))
    keep = (found != "") | hot
    out = b.assign(channel_id=np.where(hot, lower.map(_HOT_IDS), found))[keep]
    return Expected(out, list(queries.QUERIES["q21"].columns), "date_time_ms")


def q22(real, batches, params) -> Expected:
    b = bids(real)
    parts = b["url"].str.split("/", expand=True)
    out = b.assign(dir1=parts[3], dir2=parts[4], dir3=parts[5])
    return Expected(out, list(queries.QUERIES["q22"].columns), "date_time_ms")


# -- joins ------------------------------------------------------------------------------------------------
def q3(real, batches, params) -> Expected:
    a = _kind(real, AUCTION)
    a = a[a["category"] == 10][["auction_id", "seller", "event_time_ms"]]
    p = _kind(real, PERSON)
    p = p[p["state"].isin(["OR", "ID", "CA"])][["person_id", "name", "city", "state", "event_time_ms"]]
    out = a.merge(p, left_on="seller", right_on="person_id", suffixes=("_a", "_p"))
    out = out.assign(
        id=out["auction_id"], ready_ms=np.maximum(out["event_time_ms_a"], out["event_time_ms_p"])
    )
    return Expected(out, ["name", "city", "state", "id"], "ready_ms")


def q20(real, batches, params) -> Expected:
    b = bids(real).rename(columns={"extra": "bid_extra"})
    b = b.assign(bid_date_time_ms=b["event_time_ms"])[
        ["auction", "bidder", "price", "channel", "url", "bid_date_time_ms", "bid_extra"]
    ]
    a = _kind(real, AUCTION)
    a = a[a["category"] == 10].rename(columns={"extra": "auction_extra"})
    a = a.assign(auction_date_time_ms=a["event_time_ms"])[
        [
            "auction_id",
            "item_name",
            "description",
            "initial_bid",
            "reserve",
            "auction_date_time_ms",
            "expires_ms",
            "seller",
            "category",
            "auction_extra",
        ]
    ]
    out = b.merge(a, left_on="auction", right_on="auction_id")
    out = out.assign(ready_ms=np.maximum(out["bid_date_time_ms"], out["auction_date_time_ms"]))
    return Expected(out, list(queries.QUERIES["q20"].columns), "ready_ms")


# -- windows ------------------------------------------------------------------------------------------------
def _pairs(events: pd.DataFrame, batches: list[Batch], window_ms: int, slide_ms: int) -> pd.DataFrame:
    """(event, window) pairs, Spark's window(ts, size, slide), with `late` where Spark drops them:
    the window ended at or before the watermark of the batch that read the event."""
    t = events["event_time_ms"].to_numpy()
    last_start = t - (t % slide_ms)
    parts = [events.assign(window_start_ms=last_start - k * slide_ms) for k in range(window_ms // slide_ms)]
    pairs = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0].reset_index(drop=True)
    pairs["window_end_ms"] = pairs["window_start_ms"] + window_ms
    marks = late_watermarks(batches)
    wm = pairs["batch"].map(marks).fillna(-1).astype(np.int64)
    pairs["late"] = (pairs["batch"].to_numpy() >= 0) & (pairs["window_end_ms"].to_numpy() <= wm.to_numpy())
    return pairs


def _windowed(
    rows_: pd.DataFrame,
    pairs: pd.DataFrame,
    batches: list[Batch],
    key: list[str],
    end_col: str = "window_end_ms",
    late: int = 0,
) -> Expected:
    """The rows of closed windows, and those of windows the last watermark left open; the late
    rows dropped: the (event, window) pairs, and `late` more that another operator dropped."""
    final = last_watermark(batches)
    open_mask = rows_[end_col].to_numpy() > final
    late += int(pairs["late"].sum())
    return Expected(rows_[~open_mask], key, end_col, dropped_late=late, open_rows=rows_[open_mask])


def q5(real, batches, params) -> Expected:
    pairs = _pairs(bids(real), batches, params["window_ms"], params["slide_ms"])
    kept = pairs[~pairs["late"]]
    counts = kept.groupby(["window_start_ms", "window_end_ms", "auction"]).size().rename("num").reset_index()
    most = counts.groupby("window_start_ms")["num"].transform("max")
    out = counts[counts["num"] >= most].rename(
        columns={"window_start_ms": "starttime_ms", "window_end_ms": "endtime_ms"}
    )
    return _windowed(out, pairs, batches, ["starttime_ms", "auction"], "endtime_ms")


def q7(real, batches, params) -> Expected:
    """Each window's maximum over the bids its aggregation kept, joined with every bid the join
    kept whose price is that maximum and whose time is in [window end - window, window end].
    Each operator drops late rows by its own rule, with the batch's previous watermark: the
    aggregation a (bid, window) pair whose window ended at or before it, the join a bid whose
    time is at or before it. The windows' rows are never late for the join: one is emitted in
    the batch whose watermark passes its end, later than the previous watermark."""
    w = params["window_ms"]
    b = bids(real)
    pairs = _pairs(b, batches, w, w)
    maxes = pairs[~pairs["late"]].groupby("window_end_ms")["price"].max().rename("maxprice").reset_index()
    late = (b["batch"].to_numpy() >= 0) & _at_or_before_watermark(b, batches)
    joined = b[~late].merge(maxes, left_on="price", right_on="maxprice")
    t, end = joined["event_time_ms"].to_numpy(), joined["window_end_ms"].to_numpy()
    out = joined[(t >= end - w) & (t <= end)]
    return _windowed(out, pairs, batches, [*queries.BID_COLUMNS, "window_end_ms"], late=int(late.sum()))


def q8(real, batches, params) -> Expected:
    w = params["window_ms"]
    p = _kind(real, PERSON)[["person_id", "name", "event_time_ms", "batch"]].rename(
        columns={"person_id": "id"}
    )
    a = _kind(real, AUCTION)[["seller", "event_time_ms", "batch"]].rename(columns={"seller": "id"})
    pp, ap = _pairs(p, batches, w, w), _pairs(a, batches, w, w)
    people = pp[~pp["late"]].groupby(["window_start_ms", "window_end_ms", "id"])["name"].max().reset_index()
    sellers = ap[~ap["late"]][["window_start_ms", "id"]].drop_duplicates()
    out = people.merge(sellers, on=["window_start_ms", "id"]).rename(
        columns={"window_start_ms": "starttime_ms"}
    )
    return _windowed(out, pd.concat([pp, ap]), batches, ["id", "starttime_ms"])


def q11(real, batches, params) -> Expected:
    b = bids(real)
    # Spark's session rules mirrored (harness/check/sessions.py), the bidder as the key
    as_keys = pd.DataFrame(
        {
            "key": b["bidder"].astype(str),
            "event_time_ms": b["event_time_ms"],
            "amount": np.zeros(len(b), np.int64),
            "partition": b["partition"],
            "offset": b["offset"],
        }
    )
    emitted, stored, late, _ = sessions.mirror(as_keys, batches, params["gap_ms"])

    def shaped(s: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "bidder": s["key"].astype(np.int64),
                "bid_count": s["count"].astype(np.int64),
                "starttime_ms": s["session_start_ms"].astype(np.int64),
                "endtime_ms": s["session_end_ms"].astype(np.int64),
            }
        )

    return Expected(
        shaped(emitted),
        ["bidder", "starttime_ms"],
        "endtime_ms",
        dropped_late=int(len(late)),
        open_rows=shaped(stored),
    )


def q12(real, batches, params) -> Expected:
    w = params["window_ms"]
    pairs = _pairs(bids(real), batches, w, w)
    kept = pairs[~pairs["late"]]
    out = (
        kept.groupby(["window_start_ms", "window_end_ms", "bidder"])
        .size()
        .rename("bid_count")
        .reset_index()
        .rename(columns={"window_start_ms": "starttime_ms", "window_end_ms": "endtime_ms"})
    )
    return _windowed(out, pairs, batches, ["bidder", "starttime_ms"], "endtime_ms")


# q15's, q16's and q17's counts of bids, in all and per price rank (columns of _ranked)
RANKED_BIDS = {
    "total_bids": ("price", "size"),
    "rank1_bids": ("rank1", "sum"),
    "rank2_bids": ("rank2", "sum"),
    "rank3_bids": ("rank3", "sum"),
}


def _ranked(kept: pd.DataFrame) -> pd.DataFrame:
    """`kept` with rank1-rank3: 1 where the bid's price falls in that rank."""
    price = kept["price"].to_numpy()
    out = kept.copy()
    for i, (lo, hi) in enumerate(RANKS):
        cond = np.ones(len(kept), bool)
        if lo is not None:
            cond &= price >= lo
        if hi is not None:
            cond &= price < hi
        out[f"rank{i + 1}"] = cond.astype(np.int64)
    return out


def _day_counts(kept: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """q15's twelve figures per group of `by`: bids, distinct bidders and distinct auctions, in
    all and within each price rank."""
    kept = _ranked(kept)
    out = kept.groupby(by).agg(
        **RANKED_BIDS,
        total_bidders=("bidder", "nunique"),
        total_auctions=("auction", "nunique"),
    )
    for i in range(3):
        inside = kept[kept[f"rank{i + 1}"] == 1].groupby(by)
        for col, name in (("bidder", "bidders"), ("auction", "auctions")):
            out[f"rank{i + 1}_{name}"] = inside[col].nunique()
    return out.fillna(0).astype(np.int64).reset_index()


def q15(real, batches, params) -> Expected:
    pairs = _pairs(bids(real), batches, DAY_MS, DAY_MS)
    out = _day_counts(pairs[~pairs["late"]], ["window_start_ms", "window_end_ms"])
    out["day"] = _utc(out["window_start_ms"], "%Y-%m-%d")
    return _windowed(out, pairs, batches, ["day"])


def q16(real, batches, params) -> Expected:
    pairs = _pairs(bids(real), batches, DAY_MS, DAY_MS)
    kept = pairs[~pairs["late"]]
    by = ["window_start_ms", "window_end_ms", "channel"]
    out = _day_counts(kept, by)
    minute = kept.assign(m=_utc(kept["event_time_ms"], "%H:%M")).groupby(by)["m"].max()
    out = out.merge(minute.rename("minute").reset_index(), on=by)
    out["day"] = _utc(out["window_start_ms"], "%Y-%m-%d")
    return _windowed(out, pairs, batches, ["channel", "day"])


def q17(real, batches, params) -> Expected:
    pairs = _pairs(bids(real), batches, DAY_MS, DAY_MS)
    kept = _ranked(pairs[~pairs["late"]])
    g = kept.groupby(["window_start_ms", "window_end_ms", "auction"])
    out = g.agg(
        **RANKED_BIDS,
        min_price=("price", "min"),
        max_price=("price", "max"),
        sum_price=("price", "sum"),
        mean=("price", "mean"),
    ).reset_index()
    # Spark's avg is a double, cast to BIGINT: truncated toward zero
    out["avg_price"] = np.trunc(out["mean"]).astype(np.int64)
    out["day"] = _utc(out["window_start_ms"], "%Y-%m-%d")
    return _windowed(out, pairs, batches, ["auction", "day"])


def q19(real, batches, params) -> Expected:
    w = params["window_ms"]
    pairs = _pairs(bids(real), batches, w, w)
    kept = pairs[~pairs["late"]].assign(date_time_ms=lambda f: f["event_time_ms"], neg=lambda f: -f["price"])
    # Spark's array_sort of struct(-price, date_time_ms, bidder, price, extra): ascending, field by field
    kept = kept.sort_values(
        ["window_start_ms", "auction", "neg", "date_time_ms", "bidder", "price", "extra"], kind="stable"
    )
    kept["rank_number"] = kept.groupby(["window_start_ms", "auction"]).cumcount() + 1
    out = kept[kept["rank_number"] <= 10]
    return _windowed(out, pairs, batches, ["auction", "window_end_ms", "rank_number"])


# -- transformWithState (workloads/pipelines/nexmark_state.py) ------------------------------------------
def _not_late(real: pd.DataFrame, batches: list[Batch]) -> tuple[pd.DataFrame, int]:
    """The auctions and bids a committed batch read and did not drop as late, and how many it
    dropped: transformWithState in EventTime mode drops a row whose event time is at or before
    the previous batch's watermark, before the processor sees it (as harness/check/logins.py)."""
    read = real[(real["batch"].to_numpy() >= 0) & np.isin(real["nx_type"].to_numpy(), [AUCTION, BID])]
    late = _at_or_before_watermark(read, batches)
    return read[~late], int(late.sum())


def _at_or_before_watermark(rows: pd.DataFrame, batches: list[Batch]) -> np.ndarray:
    """Whether each row's event time is at or before the late-row watermark of the batch that
    read it (the previous batch's): the rows an operator that drops by event time drops."""
    wm = rows["batch"].map(late_watermarks(batches)).fillna(-1).astype(np.int64).to_numpy()
    return rows["event_time_ms"].to_numpy() <= wm


AUCTION_COLUMNS = ("auction_id", "item_name", "description", "initial_bid", "reserve", "expires_ms", "seller",
                   "category", "extra", "event_time_ms")


def winners(real: pd.DataFrame, batches: list[Batch]) -> tuple[pd.DataFrame, int]:
    """q9's rows, each auction with its best bid within its life (nexmark_state.Winner), closed
    or not, and the late rows dropped."""
    kept, dropped = _not_late(real, batches)
    a = _kind(kept, AUCTION).drop_duplicates("auction_id")[list(AUCTION_COLUMNS)]
    b = bids(kept)
    m = b[["auction", "bidder", "price", "event_time_ms", "extra"]].merge(
        a[["auction_id", "event_time_ms", "expires_ms"]], left_on="auction", right_on="auction_id",
        suffixes=("", "_a"))
    m = m[(m["event_time_ms"] >= m["event_time_ms_a"]) & (m["event_time_ms"] <= m["expires_ms"])]
    m = m.assign(neg=-m["price"]).sort_values(["auction", "neg", "event_time_ms", "bidder", "extra"],
                                               kind="stable")
    best = m.drop_duplicates("auction")[["auction", "bidder", "price", "event_time_ms", "extra"]].rename(
        columns={"event_time_ms": "bid_date_time_ms", "extra": "bid_extra"})
    out = a.rename(columns={"auction_id": "id"}).assign(date_time_ms=lambda f: f["event_time_ms"]).merge(
        best, left_on="id", right_on="auction")
    return out, dropped


def _final_by_expiry(out: pd.DataFrame, batches: list[Batch], key: list[str], dropped: int) -> Expected:
    """A row is final once its auction's timer fired: expiry <= the last watermark (Spark fires
    a timer at or below the batch's eviction watermark, as harness/check/timers.py reads it)."""
    open_mask = out["expires_ms"].to_numpy() > last_watermark(batches)
    time_col = "as_of_ms" if "as_of_ms" in out.columns else "expires_ms"
    return Expected(out[~open_mask], key, time_col, dropped_late=dropped, open_rows=out[open_mask])


def q9(real, batches, params) -> Expected:
    out, dropped = winners(real, batches)
    return _final_by_expiry(out, batches, ["id"], dropped)


def _running(real, batches, by: str, name: str, out_col: str, last: int | None) -> Expected:
    """q4's and q6's versions (nexmark_state.Running): per group, the closed auctions in the
    order of their expiry, each with the running average of their winning prices."""
    w, dropped = winners(real, batches)
    w = w.sort_values([by, "expires_ms", "id"], kind="stable")
    g = w.groupby(by, sort=False)["price"]
    n = w.groupby(by, sort=False).cumcount().to_numpy() + 1
    if last is None:
        avg = g.cumsum().to_numpy() // n
    else:
        avg = (g.rolling(last, min_periods=1).sum().to_numpy().astype(np.int64)
               // np.minimum(n, last))
    out = pd.DataFrame({name: w[by].to_numpy(), out_col: avg.astype(np.int64), "auctions": n.astype(np.int64),
                        "as_of_ms": w["expires_ms"].to_numpy(), "expires_ms": w["expires_ms"].to_numpy()})
    return _final_by_expiry(out, batches, [name, "auctions"], dropped)


def q4(real, batches, params) -> Expected:
    return _running(real, batches, "category", "id", "final", None)


def q6(real, batches, params) -> Expected:
    from workloads.pipelines.nexmark_state import LAST_N

    return _running(real, batches, "seller", "seller", "avg_price", LAST_N)


def q18(real, batches, params) -> Expected:
    """Per (bidder, auction), each batch's newest bid when it is newer than every one before
    it (nexmark_state.Newest), batch by batch: no row is late (no event time reaches it)."""
    from workloads.pipelines.nexmark_state import NEWEST

    b = bids(real)
    b = b[b["batch"].to_numpy() >= 0]
    pair = ["bidder", "auction"]
    order = [c if c != "date_time_ms" else "event_time_ms" for c in NEWEST]
    b = b.sort_values([*pair, *order], kind="stable")
    b["rank"] = b.groupby(pair, sort=False).cumcount()
    newest = b.loc[b.groupby([*pair, "batch"], sort=False)["rank"].idxmax()].sort_values([*pair, "batch"])
    before = newest.groupby(pair, sort=False)["rank"].cummax().groupby(
        [newest[c] for c in pair], sort=False).shift(fill_value=-1)
    out = newest[newest["rank"].to_numpy() > before.to_numpy()]
    return Expected(out, ["auction", "bidder", "date_time_ms"], "date_time_ms")
