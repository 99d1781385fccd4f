"""Nexmark's queries on Structured Streaming (`[pipeline] kind = "nexmark"`, `query = "q5"`).

The events of a `kind = "nexmark"` workload (workloads/generator/nexmark.py) arrive on one
topic, as nexmark/nexmark's Kafka table holds them; the watermark is set on that one stream
(Nexmark's DDL: `dateTime - INTERVAL '4' SECOND`), so the harness's watermark flush closes
every window, and the three views are filters of it, as its `ddl_views.sql`:

    person   id, name, email, credit_card, city, state, date_time_ms, extra
    auction  id, item_name, description, initial_bid, reserve, date_time_ms, expires_ms,
             seller, category, extra
    bid      auction, bidder, price, channel, url, date_time_ms, extra

Every query writes in append mode, and its rows are final. Each one is marked with its form:
  native      the query as Nexmark writes it, in Spark's operators;
  rewrite     Spark refuses Nexmark's form (COUNT DISTINCT, a GROUP BY without a window,
              processing-time windows, ROW_NUMBER), so the query is written another way,
              named in its note;
  transformWithState  Nexmark's updating result (a Top-1, an average over all time) as rows
              that stay true: final ones, or numbered versions (workloads/pipelines/nexmark_state.py).
Column names are Nexmark's in snake case; times are epoch milliseconds (`date_time_ms`).
The oracles are harness/check/nexmark.py; docs/pipelines-and-sinks.md has the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from workloads.errors import SpecError
from workloads.pipelines.params import GAP, SLIDE, WATERMARK, WINDOW, Param

NAME = "nexmark"
NATIVE, REWRITE, TWS = "native", "rewrite", "transformWithState"

BID_COLUMNS = {
    "auction": "LONG",
    "bidder": "LONG",
    "price": "LONG",
    "date_time_ms": "LONG",
    "extra": "STRING",
}


DAY_MS = 86_400_000
ORACLE_MODULE = "harness.check.nexmark"   # each query's oracle, named there by the query's name


@dataclass(frozen=True)
class Query:
    """One Nexmark query and what is known of it, registered once (`@query`):

      build           (Views, params) -> the query's streaming DataFrame
      columns         its output columns -> Spark SQL type, in order
      form            native, rewrite or transformWithState (the module's docstring)
      stateless       no state: nothing to close, no watermark to follow
      watermark_rule  its watermark follows the one-input rule (the newest event time read,
                      control events included, minus the delay): the windowed queries, whose
                      every filter names the event time and so stays above withWatermark.
                      Elsewhere Spark pushes a query's own filters below it (q14's price, q21's
                      channel, q3's category, q13's join key) and its watermark is the newest
                      event time of the rows that pass them, which no stateless query or
                      unbounded join reads anyway
      closes          how far past the newest event time its last result is final: a key of
                      its params ("window_ms", "gap_ms"), a span in ms (DAY_MS: an auction's
                      length is at most twice the time 1,666 events take, under a day above
                      0.04 events/s), or None: never (stateless, or a join without a time bound)
      oracle          "module:function" of the oracle that builds its rows from ground truth:
                      named, not imported, since workloads/ imports nothing above it"""

    name: str
    columns: dict[str, str]
    build: Callable
    form: str = NATIVE
    note: str = ""
    stateless: bool = False
    watermark_rule: bool = False
    closes: str | int | None = None
    oracle: str = ""

    def reach_ms(self, params: dict) -> int | None:
        """How far past the newest event time its outputs close (None: they never all do)."""
        if self.stateless or self.closes is None:
            return None
        return int(params[self.closes]) if isinstance(self.closes, str) else self.closes


QUERIES: dict[str, Query] = {}


def query(name: str, columns: dict[str, str], **kw):
    def register(fn):
        if name in QUERIES:
            raise ValueError(f"Nexmark query {name} is registered twice")
        QUERIES[name] = Query(name, columns, fn, oracle=f"{ORACLE_MODULE}:{name}", **kw)
        return fn

    return register


QUERY = Param(
    "query", "text", "q0", "the Nexmark query: q0-q22 (those Spark can run; docs/pipelines-and-sinks.md)"
)
PARAMS = (
    QUERY,
    Param("window", "duration", "10s", "the query's window (q5, q7, q8, q12: 10 s in Nexmark)"),
    Param("slide", "duration", "2s", "q5's hop (2 s in Nexmark)"),
    Param("gap", "duration", "10s", "q11's session gap (10 s in Nexmark)"),
    Param("watermark", "duration", "4s", "the watermark's delay (4 s in Nexmark's DDL)"),
)
_ = (GAP, SLIDE, WATERMARK, WINDOW)  # the shared keys these stand for


def columns_for(params: dict) -> dict[str, str]:
    return dict(QUERIES[params["query"]].columns)


def state_stores_for(params: dict) -> tuple[str, ...] | None:
    """transformWithState runs on RocksDB only: the state stores of a query in that form."""
    q = QUERIES.get(params.get("query", ""))
    return ("rocksdb", "rocksdb-changelog") if q is not None and q.form == TWS else None


def stateless_for(params: dict) -> bool:
    return QUERIES[params["query"]].stateless if params.get("query") in QUERIES else False


def check_params(params: dict) -> None:
    name = params["query"]
    if name not in QUERIES:
        raise SpecError(
            f"pipeline.query {name!r} is not a Nexmark query Spark runs here",
            f"choose from {', '.join(QUERIES)} (docs/pipelines-and-sinks.md lists the others and why)",
        )
    if params["window_ms"] % params["slide_ms"]:
        raise SpecError("pipeline.window is not a multiple of pipeline.slide", "keep Nexmark's 10s and 2s")


def build(events, params: dict):
    """The query `params["query"]` over the parsed stream."""
    q = QUERIES[params["query"]]
    marked = events.withWatermark("event_time", f"{params['watermark_ms']} milliseconds")
    return q.build(Views(marked), params)


# Nexmark's three views (ddl_views.sql): the event type, then each column's field in the
# event's struct and its name here; every view adds date_time_ms and event_time
VIEWS = {
    "person": (0, "person", (("id", "id"), ("name", "name"), ("emailAddress", "email"),
                             ("creditCard", "credit_card"), ("city", "city"), ("state", "state"),
                             ("extra", "extra"))),
    "auction": (1, "auction", (("id", "id"), ("itemName", "item_name"), ("description", "description"),
                               ("initialBid", "initial_bid"), ("reserve", "reserve"),
                               ("expires", "expires_ms"), ("seller", "seller"), ("category", "category"),
                               ("extra", "extra"))),
    "bid": (2, "bid", (("auction", "auction"), ("bidder", "bidder"), ("price", "price"),
                       ("channel", "channel"), ("url", "url"), ("extra", "extra"))),
}


class Views:
    """Nexmark's three views of the one stream, as ddl_views.sql defines them."""

    def __init__(self, events):
        self.events = events

    def _view(self, name: str):
        from pyspark.sql import functions as F

        event_type, struct, fields = VIEWS[name]
        s = F.col(struct)
        # one predicate that names the event time: Spark pushes a filter below withWatermark
        # unless it references the event-time column, and pushed below it, the harness's
        # control events (no event_type) would never move the watermark, nor flush the windows
        kind = _timed("event_type") == event_type
        return self.events.where(kind).select(
            *(s[field].alias(alias) for field, alias in fields),
            F.col("event_time_ms").alias("date_time_ms"),
            "event_time",
        )

    @property
    def person(self):
        return self._view("person")

    @property
    def auction(self):
        return self._view("auction")

    @property
    def bid(self):
        return self._view("bid")


def _timed(name: str):
    """Column `name`, as an expression that names the event time (null where it is null)."""
    from pyspark.sql import functions as F

    return F.when(F.col("event_time").isNotNull(), F.col(name))


def _ms(col):
    from pyspark.sql import functions as F

    return F.unix_millis(col)


def _dur(ms: int) -> str:
    return f"{ms} milliseconds"


# -- stateless -----------------------------------------------------------------------------------------
@query("q0", BID_COLUMNS, stateless=True, note="pass-through of every bid")
def q0(v: Views, params: dict):
    return v.bid.select(*BID_COLUMNS)


@query(
    "q1",
    {**BID_COLUMNS, "price": "DOUBLE"},
    stateless=True,
    note="price in euros: the dollar price x 0.908 (a DOUBLE; Nexmark's is DECIMAL(23,3))",
)
def q1(v: Views, params: dict):
    from pyspark.sql import functions as F

    return v.bid.select(
        "auction",
        "bidder",
        (F.col("price").cast("double") * F.lit(0.908)).alias("price"),
        "date_time_ms",
        "extra",
    )


@query("q2", {"auction": "LONG", "price": "LONG"}, stateless=True, note="bids on every 123rd auction")
def q2(v: Views, params: dict):
    return v.bid.where("auction % 123 = 0").select("auction", "price")


@query(
    "q10",
    {**BID_COLUMNS, "dt": "STRING", "hm": "STRING"},
    stateless=True,
    note="each bid with its day and minute (UTC); Nexmark writes it to files partitioned by them, "
    "here it goes to the case's sink",
)
def q10(v: Views, params: dict):
    from pyspark.sql import functions as F

    return v.bid.select(
        *BID_COLUMNS,
        F.date_format("event_time", "yyyy-MM-dd").alias("dt"),
        F.date_format("event_time", "HH:mm").alias("hm"),
    )


@query(
    "q13",
    {"auction": "LONG", "bidder": "LONG", "price": "LONG", "date_time_ms": "LONG", "value": "STRING"},
    stateless=True,
    note="each bid joined with a bounded side input (key i, value str(i), 10,000 rows, as "
    "Nexmark's side_input_gen writes it) on auction mod 10000: a stream-static join, where "
    "Nexmark joins the table as of processing time",
)
def q13(v: Views, params: dict):
    from pyspark.sql import functions as F

    spark = v.events.sparkSession
    side = spark.range(10_000).select(F.col("id").alias("key"), F.col("id").cast("string").alias("value"))
    return v.bid.join(F.broadcast(side), F.expr("auction % 10000") == F.col("key")).select(
        "auction", "bidder", "price", "date_time_ms", "value"
    )


@query(
    "q14",
    {
        "auction": "LONG",
        "bidder": "LONG",
        "price": "DOUBLE",
        "bid_time_type": "STRING",
        "date_time_ms": "LONG",
        "extra": "STRING",
        "c_counts": "LONG",
    },
    stateless=True,
    note="bids between 1,000,000 and 50,000,000 euros, the hour's kind (UTC), and the c's in extra "
    "(Nexmark's count_char UDF as an expression)",
)
def q14(v: Views, params: dict):
    from pyspark.sql import functions as F

    euros = F.col("price").cast("double") * F.lit(0.908)
    hour = F.hour("event_time")
    kind = (
        F.when((hour >= 8) & (hour <= 18), "dayTime")
        .when((hour <= 6) | (hour >= 20), "nightTime")
        .otherwise("otherTime")
    )
    c_counts = (F.length("extra") - F.length(F.regexp_replace("extra", "c", ""))).cast("long")
    return v.bid.where((euros > 1_000_000) & (euros < 50_000_000)).select(
        "auction",
        "bidder",
        euros.alias("price"),
        kind.alias("bid_time_type"),
        "date_time_ms",
        "extra",
        c_counts.alias("c_counts"),
    )


@query(
    "q21",
    {"auction": "LONG", "bidder": "LONG", "price": "LONG", "channel": "STRING", "channel_id": "STRING"},
    stateless=True,
    note="each bid's channel id: 0-3 for the four hot channels, else from its URL; Spark's "
    "regexp_extract gives '' where Flink's gives null, so the filter tests for ''",
)
def q21(v: Views, params: dict):
    from pyspark.sql import functions as F

    found = F.regexp_extract("url", "(&|^)channel_id=([^&]*)", 2)
    lower = F.lower("channel")
    cid = (
        F.when(lower == "apple", "0")
        .when(lower == "google", "1")
        .when(lower == "facebook", "2")
        .when(lower == "baidu", "3")
        .otherwise(found)
    )
    return v.bid.where((found != "") | lower.isin("apple", "google", "facebook", "baidu")).select(
        "auction", "bidder", "price", "channel", cid.alias("channel_id")
    )


@query(
    "q22",
    {
        "auction": "LONG",
        "bidder": "LONG",
        "price": "LONG",
        "channel": "STRING",
        "dir1": "STRING",
        "dir2": "STRING",
        "dir3": "STRING",
    },
    stateless=True,
    note="the three directories of each bid's URL (Flink's SPLIT_INDEX 3-5, 0-based)",
)
def q22(v: Views, params: dict):
    from pyspark.sql import functions as F

    parts = F.split("url", "/")
    return v.bid.select(
        "auction",
        "bidder",
        "price",
        "channel",
        *(F.element_at(parts, i + 1).alias(f"dir{i - 2}") for i in (3, 4, 5)),
    )


# -- joins -------------------------------------------------------------------------------------------
@query(
    "q3",
    {"name": "STRING", "city": "STRING", "state": "STRING", "id": "LONG"},
    note="sellers in OR, ID or CA of category-10 auctions: a stream-stream inner join without a time "
    "bound, whose state Spark keeps for the run (as Flink's regular join)",
)
def q3(v: Views, params: dict):
    from pyspark.sql import functions as F

    a = v.auction.where("category = 10").select(F.col("id").alias("a_id"), F.col("seller"))
    p = v.person.where(F.col("state").isin("OR", "ID", "CA")).select(
        F.col("id").alias("p_id"), "name", "city", "state"
    )
    return a.join(p, F.col("seller") == F.col("p_id")).select(
        "name", "city", "state", F.col("a_id").alias("id")
    )


@query(
    "q20",
    {
        "auction": "LONG",
        "bidder": "LONG",
        "price": "LONG",
        "channel": "STRING",
        "url": "STRING",
        "bid_date_time_ms": "LONG",
        "bid_extra": "STRING",
        "item_name": "STRING",
        "description": "STRING",
        "initial_bid": "LONG",
        "reserve": "LONG",
        "auction_date_time_ms": "LONG",
        "expires_ms": "LONG",
        "seller": "LONG",
        "category": "LONG",
        "auction_extra": "STRING",
    },
    note="each bid on a category-10 auction with its auction: a stream-stream inner join without a time "
    "bound",
)
def q20(v: Views, params: dict):
    from pyspark.sql import functions as F

    b = v.bid.select(
        "auction",
        "bidder",
        "price",
        "channel",
        "url",
        F.col("date_time_ms").alias("bid_date_time_ms"),
        F.col("extra").alias("bid_extra"),
    )
    a = v.auction.where("category = 10").select(
        F.col("id").alias("a_id"),
        "item_name",
        "description",
        "initial_bid",
        "reserve",
        F.col("date_time_ms").alias("auction_date_time_ms"),
        "expires_ms",
        "seller",
        "category",
        F.col("extra").alias("auction_extra"),
    )
    return b.join(a, F.col("auction") == F.col("a_id")).drop("a_id")


# -- windows -------------------------------------------------------------------------------------------
@query(
    "q5",
    {"auction": "LONG", "num": "LONG", "starttime_ms": "LONG", "endtime_ms": "LONG"},
    note="hot items: per hopping window (10 s, every 2 s) the auctions with the most bids, ties kept; two "
    "chained window aggregations (count per auction, then the window's most), with the window's "
    "bounds beside Nexmark's two columns",
    watermark_rule=True,
    closes="window_ms",
)
def q5(v: Views, params: dict):
    from pyspark.sql import functions as F

    counts = v.bid.groupBy(
        F.window("event_time", _dur(params["window_ms"]), _dur(params["slide_ms"])), "auction"
    ).agg(F.count(F.lit(1)).alias("num"))
    best = counts.groupBy("window").agg(
        F.max("num").alias("maxn"), F.collect_list(F.struct("auction", "num")).alias("all")
    )
    return best.select(
        F.explode(F.filter("all", lambda x: x["num"] >= F.col("maxn"))).alias("hot"), "window"
    ).select(
        F.col("hot.auction").alias("auction"),
        F.col("hot.num").alias("num"),
        _ms(F.col("window.start")).alias("starttime_ms"),
        _ms(F.col("window.end")).alias("endtime_ms"),
    )


@query(
    "q7",
    {**BID_COLUMNS, "window_end_ms": "LONG"},
    note="the highest bids of each 10 s window, Nexmark's form: the bids joined with each window's maximum "
    "price (a window aggregation, then a stream-stream join in append mode), on the price and on the "
    "bid's time between the window's end less the window and its end, both ends included (a bid at "
    "exactly a window's end joins that window's maximum and its own window's)",
    watermark_rule=True,
    closes="window_ms",
)
def q7(v: Views, params: dict):
    from pyspark.sql import functions as F

    w = params["window_ms"]
    maxes = v.bid.groupBy(F.window("event_time", _dur(w)).alias("w")).agg(
        F.max("price").alias("maxprice"))
    # window_time (the window's end less 1 microsecond) keeps the event-time mark, so the join
    # bounds both sides' state by the watermark; the price names the event time, so the
    # `price IS NOT NULL` Spark infers for the join key stays above withWatermark (Views._view)
    maxes = maxes.select(
        "maxprice", F.window_time("w").alias("w_time"), _ms(F.col("w.end")).alias("window_end_ms"))
    b = v.bid.select("auction", "bidder", _timed("price").alias("price"), "date_time_ms", "extra",
                     "event_time")
    end = F.col("w_time") + F.expr("INTERVAL 1 MICROSECOND")
    joined = b.join(
        maxes,
        (F.col("price") == F.col("maxprice"))
        & (F.col("event_time") >= end - F.expr(f"INTERVAL {w} MILLISECONDS"))
        & (F.col("event_time") <= end),
    )
    return joined.select("auction", "bidder", "price", "date_time_ms", "extra", "window_end_ms")


@query(
    "q8",
    {"id": "LONG", "name": "STRING", "starttime_ms": "LONG"},
    note="new users who opened an auction in the same 10 s window they joined: Nexmark's join of two "
    "window aggregations (people by id and name, sellers), on the id and the window; a join after "
    "aggregations that Spark 4 runs in append mode",
    watermark_rule=True,
    closes="window_ms",
)
def q8(v: Views, params: dict):
    from pyspark.sql import functions as F

    w = F.window("event_time", _dur(params["window_ms"]))
    # the join keys name the event time: Spark infers `key IS NOT NULL` for an inner join and
    # pushes it below withWatermark unless it does, where it drops the control events as the
    # views' filters would (Views._view)
    people = v.person.groupBy(w.alias("p_window"), _timed("id").alias("id"), "name").agg(
        F.count(F.lit(1)).alias("n")
    )
    sellers = v.auction.groupBy(w.alias("a_window"), _timed("seller").alias("seller")).agg(
        F.count(F.lit(1)).alias("m")
    )
    joined = people.join(
        sellers, (F.col("id") == F.col("seller")) & (F.col("p_window") == F.col("a_window"))
    )
    return joined.select("id", "name", _ms(F.col("p_window.start")).alias("starttime_ms"))


@query(
    "q11",
    {"bidder": "LONG", "bid_count": "LONG", "starttime_ms": "LONG", "endtime_ms": "LONG"},
    note="each bidder's sessions (10 s of silence closes one) and their bids",
    watermark_rule=True,
    closes="gap_ms",
)
def q11(v: Views, params: dict):
    from pyspark.sql import functions as F

    return _bids_per_bidder(v, F.session_window("event_time", _dur(params["gap_ms"])), "session_window")


def _bids_per_bidder(v: Views, window, name: str):
    """Each bidder's bids per window (`name`: the window column's name), with its bounds."""
    from pyspark.sql import functions as F

    counts = v.bid.groupBy(window, "bidder").agg(F.count(F.lit(1)).alias("bid_count"))
    return counts.select(
        "bidder",
        "bid_count",
        _ms(F.col(f"{name}.start")).alias("starttime_ms"),
        _ms(F.col(f"{name}.end")).alias("endtime_ms"),
    )


@query(
    "q12",
    {"bidder": "LONG", "bid_count": "LONG", "starttime_ms": "LONG", "endtime_ms": "LONG"},
    form=REWRITE,
    note="bids per bidder per 10 s window of event time: Nexmark's windows are of processing time, whose "
    "output no oracle can know, and Spark's window() takes an event-time column",
    watermark_rule=True,
    closes="window_ms",
)
def q12(v: Views, params: dict):
    from pyspark.sql import functions as F

    return _bids_per_bidder(v, F.window("event_time", _dur(params["window_ms"])), "window")


RANKS = ((None, 10_000), (10_000, 1_000_000), (1_000_000, None))


def _rank(i: int):
    from pyspark.sql import functions as F

    lo, hi = RANKS[i]
    cond = F.lit(True)
    if lo is not None:
        cond = cond & (F.col("price") >= lo)
    if hi is not None:
        cond = cond & (F.col("price") < hi)
    return cond


DAY_COUNTS = {
    "total_bids": "LONG",
    "rank1_bids": "LONG",
    "rank2_bids": "LONG",
    "rank3_bids": "LONG",
    "total_bidders": "LONG",
    "rank1_bidders": "LONG",
    "rank2_bidders": "LONG",
    "rank3_bidders": "LONG",
    "total_auctions": "LONG",
    "rank1_auctions": "LONG",
    "rank2_auctions": "LONG",
    "rank3_auctions": "LONG",
}


def _day_counts():
    """q15's and q16's twelve aggregates; COUNT(DISTINCT x) FILTER (WHERE c) written as
    size(collect_set(CASE WHEN c THEN x END)): collect_set skips nulls, and Spark refuses
    distinct aggregates on a stream ("Distinct aggregations are not supported on streaming
    DataFrames/Datasets")."""
    from pyspark.sql import functions as F

    aggs = [F.count(F.lit(1)).alias("total_bids")]
    aggs += [F.count_if(_rank(i)).alias(f"rank{i + 1}_bids") for i in range(3)]
    for col, name in (("bidder", "bidders"), ("auction", "auctions")):
        aggs.append(F.size(F.collect_set(col)).cast("long").alias(f"total_{name}"))
        aggs += [
            F.size(F.collect_set(F.when(_rank(i), F.col(col)))).cast("long").alias(f"rank{i + 1}_{name}")
            for i in range(3)
        ]
    return aggs


@query(
    "q15",
    {"day": "STRING", **DAY_COUNTS},
    form=REWRITE,
    note="bids, bidders and auctions per day, in all and by price rank: a 1-day window aggregation, final "
    "when the day closes, where Nexmark's GROUP BY day updates its row; each COUNT DISTINCT as the size "
    "of a collect_set",
    watermark_rule=True,
    closes=DAY_MS,
)
def q15(v: Views, params: dict):
    from pyspark.sql import functions as F

    d = v.bid.groupBy(F.window("event_time", "1 day")).agg(*_day_counts())
    return d.select(F.date_format(F.col("window.start"), "yyyy-MM-dd").alias("day"), *DAY_COUNTS)


@query(
    "q16",
    {"channel": "STRING", "day": "STRING", "minute": "STRING", **DAY_COUNTS},
    form=REWRITE,
    note="q15 per channel, with the day's last minute (HH:mm) that had a bid: as q15's rewrite",
    watermark_rule=True,
    closes=DAY_MS,
)
def q16(v: Views, params: dict):
    from pyspark.sql import functions as F

    d = v.bid.groupBy(F.window("event_time", "1 day"), "channel").agg(
        F.max(F.date_format("event_time", "HH:mm")).alias("minute"), *_day_counts()
    )
    return d.select(
        "channel", F.date_format(F.col("window.start"), "yyyy-MM-dd").alias("day"), "minute", *DAY_COUNTS
    )


@query(
    "q17",
    {
        "auction": "LONG",
        "day": "STRING",
        "total_bids": "LONG",
        "rank1_bids": "LONG",
        "rank2_bids": "LONG",
        "rank3_bids": "LONG",
        "min_price": "LONG",
        "max_price": "LONG",
        "avg_price": "LONG",
        "sum_price": "LONG",
    },
    form=REWRITE,
    note="each auction's bids per day: a 1-day window aggregation, final when the day's window closes, where "
    "Nexmark's GROUP BY day updates its rows; avg_price truncated to an integer, as Flink's BIGINT AVG",
    watermark_rule=True,
    closes=DAY_MS,
)
def q17(v: Views, params: dict):
    from pyspark.sql import functions as F

    d = v.bid.groupBy(F.window("event_time", "1 day"), "auction").agg(
        F.count(F.lit(1)).alias("total_bids"),
        *(F.count_if(_rank(i)).alias(f"rank{i + 1}_bids") for i in range(3)),
        F.min("price").alias("min_price"),
        F.max("price").alias("max_price"),
        F.avg("price").alias("avg"),
        F.sum("price").alias("sum_price"),
    )
    return d.select(
        "auction",
        F.date_format(F.col("window.start"), "yyyy-MM-dd").alias("day"),
        "total_bids",
        "rank1_bids",
        "rank2_bids",
        "rank3_bids",
        "min_price",
        "max_price",
        F.col("avg").cast("long").alias("avg_price"),
        "sum_price",
    )


@query(
    "q19",
    {**BID_COLUMNS, "rank_number": "LONG", "window_end_ms": "LONG"},
    form=REWRITE,
    note="the 10 highest bids of each auction per 10 s window (ties by time, then bidder): Nexmark's Top-N "
    "over all time is an updating result, which append mode cannot emit",
    watermark_rule=True,
    closes="window_ms",
)
def q19(v: Views, params: dict):
    from pyspark.sql import functions as F

    per = v.bid.groupBy(F.window("event_time", _dur(params["window_ms"])), "auction").agg(
        F.collect_list(
            F.struct(F.negative("price").alias("neg"), "date_time_ms", "bidder", "price", "extra")
        ).alias("bids")
    )
    top = per.select(
        "auction", "window", F.posexplode(F.slice(F.array_sort("bids"), 1, 10)).alias("pos", "b")
    )
    return top.select(
        "auction",
        "b.bidder",
        "b.price",
        "b.date_time_ms",
        "b.extra",
        (F.col("pos") + 1).cast("long").alias("rank_number"),
        _ms(F.col("window.end")).alias("window_end_ms"),
    )


# -- transformWithState: Nexmark's updating outputs as rows that stay true ------------------------
def _winners(v: Views, params: dict):
    """q9's winning bid of each auction, emitted at its expiry (nexmark_state.Winner), its timers'
    firings recorded when the harness gave the build a timer log."""
    from pyspark.sql import functions as F

    from workloads.pipelines.nexmark_state import WINNER_COLUMNS, Winner
    from workloads.pipelines.timer_log import TimerLog

    a, b = F.col("auction"), F.col("bid")
    is_auction = F.col("event_type") == 1
    rows = v.events.where(_timed("event_type").isin(1, 2)).select(
        F.when(is_auction, a["id"]).otherwise(b["auction"]).alias("id"),
        F.col("event_type").alias("kind"),
        a["itemName"].alias("item_name"),
        a["description"].alias("description"),
        a["initialBid"].alias("initial_bid"),
        a["reserve"].alias("reserve"),
        F.col("event_time_ms").alias("date_time_ms"),
        a["expires"].alias("expires_ms"),
        a["seller"].alias("seller"),
        a["category"].alias("category"),
        F.when(is_auction, a["extra"]).otherwise(b["extra"]).alias("extra"),
        b["bidder"].alias("bidder"),
        b["price"].alias("price"),
        "event_time",
    )
    schema = ", ".join(f"{n} {k}" for n, k in WINNER_COLUMNS.items())
    return rows.groupBy("id").transformWithState(Winner(TimerLog.opened(params)), outputStructType=schema,
                                                 outputMode="Append", timeMode="EventTime")


def _running(v: Views, params: dict, by: str, name: str, out: str, last: int | None):
    """Running's versions per `by` (category, seller), its value written as column `name`."""
    from workloads.pipelines.nexmark_state import Running

    schema = f"{name} LONG, {out} LONG, auctions LONG, as_of_ms LONG"
    return _winners(v, params).groupBy(by).transformWithState(
        Running(name, out, last), outputStructType=schema, outputMode="Append", timeMode="None")


RUNNING = {"auctions": "LONG", "as_of_ms": "LONG"}


@query(
    "q4",
    {"id": "LONG", "final": "LONG", **RUNNING},
    form=TWS,
    note="the average closing price per category (id): q9's winners, then per category a running average "
    "over its closed auctions in the order of their expiry, one row per closing (`auctions`: how many, "
    "`as_of_ms`: the last one's expiry), where Nexmark's GROUP BY category updates one row; truncated to an "
    "integer, as Flink's BIGINT AVG",
    watermark_rule=True,
    closes=DAY_MS,
)
def q4(v: Views, params: dict):
    return _running(v, params, "category", "id", "final", None)


@query(
    "q6",
    {"seller": "LONG", "avg_price": "LONG", **RUNNING},
    form=TWS,
    note="the average selling price of each seller's last 10 closed auctions (Beam's Nexmark model; "
    "nexmark/nexmark's SQL is unsupported on Flink, FLINK-19059): q9's winners, then per seller one row "
    "per closing, in the order of expiry",
    watermark_rule=True,
    closes=DAY_MS,
)
def q6(v: Views, params: dict):
    from workloads.pipelines.nexmark_state import LAST_N

    return _running(v, params, "seller", "seller", "avg_price", LAST_N)


@query(
    "q9",
    {
        "id": "LONG",
        "item_name": "STRING",
        "description": "STRING",
        "initial_bid": "LONG",
        "reserve": "LONG",
        "date_time_ms": "LONG",
        "expires_ms": "LONG",
        "seller": "LONG",
        "category": "LONG",
        "extra": "STRING",
        "auction": "LONG",
        "bidder": "LONG",
        "price": "LONG",
        "bid_date_time_ms": "LONG",
        "bid_extra": "STRING",
    },
    form=TWS,
    note="each auction with its winning bid (the highest within its life, then the earliest): kept per "
    "auction and written once, at its expiry, by an event-time timer, where Nexmark's ROW_NUMBER over an "
    "unbounded join updates the row with each better bid",
    watermark_rule=True,
    closes=DAY_MS,
)
def q9(v: Views, params: dict):
    return _winners(v, params)


@query(
    "q18",
    {"auction": "LONG", "bidder": "LONG", "price": "LONG", "channel": "STRING", "url": "STRING",
     "date_time_ms": "LONG", "extra": "STRING"},
    form=TWS,
    note="the last bid per bidder and auction, as the changelog micro-batches emit: per pair, a batch's "
    "newest bid when it is newer than the last one written, where Nexmark's ROW_NUMBER updates one row",
)
def q18(v: Views, params: dict):
    from workloads.pipelines.nexmark_state import NEWEST_COLUMNS, Newest

    # without the event-time column: the processor keeps no timers, and nothing is dropped as late
    bids = v.bid.select("auction", "bidder", "price", "channel", "url", "date_time_ms", "extra")
    schema = ", ".join(f"{n} {k}" for n, k in NEWEST_COLUMNS.items())
    return bids.groupBy("bidder", "auction").transformWithState(
        Newest(), outputStructType=schema, outputMode="Append", timeMode="None")


COLUMNS = BID_COLUMNS  # a query's own are columns_for(params); this is q0's, the default


# the queries nexmark/nexmark defines that do not run here, with why
NOT_HERE: dict[str, str] = {}
