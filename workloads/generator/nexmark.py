"""Nexmark's online auction as a workload: Person, Auction and Bid events (`[workload] kind =
"nexmark"`), after the model of nexmark/nexmark's generator (its PersonGenerator,
AuctionGenerator, BidGenerator, PriceGenerator and StringsGenerator).

Every field of an event is a pure function of the seed, its event id and its event time:
each event draws from a counter-based stream keyed by (seed, event id), as Beam's Nexmark and
nexmark/nexmark before 2022 seeded `new Random(eventId)`. So the plan's ids, times, pacing,
out-of-order delays and partitions stay the generator's own (workloads/generator/plan.py), the
same event gets the same fields in any process that sends it. Ground truth stores every field
too (TRUTH_SCHEMA), which the oracles read (harness/check/nexmark.py).

What follows Nexmark exactly: an event's kind by its id modulo the proportions (1:3:46 by
default); person and auction ids (lastBase0PersonId, lastBase0AuctionId, +1000); the hot
seller, auction and bidder (`ratio` 4, 2, 4: P(hot) = 1 - 1/ratio, the hot id being the first
of its hundred); the cold ids among the 1,000 active people (10 ahead) and the 100 auctions
in flight (10 ahead); categories 10-14; prices log-uniform in [1, 1,000,000] dollars, in cents
(Math.round(10^(u*6) * 100)); an auction's length uniform in [1, 2 x the time 1,666 events
take at the offered rate]; reserve = initial bid + a price; half the bids on one of four hot
channels (Google, Facebook, Baidu, Apple), the rest on channel-0..9999, 90% of whose URLs
carry `&channel_id=` and the bit-reversed channel number; `extra` padding each kind to its
average size (person 200, auction 500, bid 100 bytes: Nexmark's nextExtra).

What differs, and why:
- event time is the generator's (its pacer and out-of-order delays), not Nexmark's
  `baseTime + n x interEventDelay`: Nexmark's own time model is the in-order special case;
- bidder ids are base0 + 1000 (Beam's model); nexmark/nexmark adds FIRST_PERSON_ID twice
  (base0 + 2000), which only q23's join notices;
- the random strings (emails, item names, descriptions, URL directories) are drawn from
  pools of 4,096 built from the seed, and `extra` is a slice of a 64 KiB letter pool: the
  same lengths and alphabet, without a Python string per character;
- the first event is event 0 (person 1000), as in Beam; nexmark/nexmark's table source starts
  at event 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

PERSON, AUCTION, BID = 0, 1, 2
EVENT_TYPE_NAMES = ("person", "auction", "bid")   # by nx_type: the JSON key of its fields
FIRST_PERSON_ID = FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID, NUM_CATEGORIES = 10, 5
PERSON_ID_LEAD = AUCTION_ID_LEAD = 10
HOT_ID_RATIO = 100  # which id is hot: the first of each hundred (HOT_SELLER/AUCTION/BIDDER_RATIO)
HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
CHANNELS = 10_000
FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter")
LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris")
CITIES = (
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
)
STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
AVG_BYTES = {PERSON: 200, AUCTION: 500, BID: 100}
POOL_STRINGS, EXTRA_POOL_BYTES = 4096, 65_536
_STREAM = 0x4E45584D  # "NEXM": the model's streams, beside the plan's


@dataclass(frozen=True, kw_only=True)
class NexmarkSpec:
    """Nexmark's knobs (`[workload]`: proportions, hot_auction_ratio, hot_seller_ratio,
    hot_bidder_ratio); the defaults are Nexmark's."""

    proportions: tuple[int, int, int] = (1, 3, 46)
    hot_auction_ratio: int = 2
    hot_seller_ratio: int = 4
    hot_bidder_ratio: int = 4
    active_people: int = 1000
    in_flight_auctions: int = 100


# -- a counter-based random stream: (seed, event id, draw) -> 64 uniform bits --------------------
_M1, _M2, _GOLDEN = (
    np.uint64(0xBF58476D1CE4E5B9),
    np.uint64(0x94D049BB133111EB),
    np.uint64(0x9E3779B97F4A7C15),
)


def _mix(x):
    """splitmix64's finaliser, on uint64 arrays (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


class Draws:
    """The draws of a set of events: draw k of event e is the same wherever it is asked."""

    def __init__(self, seed: int, event_id: np.ndarray):
        with np.errstate(over="ignore"):
            base = _mix(np.uint64(seed & (2**64 - 1)) ^ np.uint64(_STREAM) + _GOLDEN)
            self.key = _mix(event_id.astype(np.uint64) * _GOLDEN + base)

    def bits(self, k: int) -> np.ndarray:
        with np.errstate(over="ignore"):
            return _mix(self.key + np.uint64(k + 1) * _GOLDEN)

    def below(self, k: int, n) -> np.ndarray:
        """Uniform integers in [0, n) (n a number or an array of them)."""
        return np.floor(self.unit(k) * np.asarray(n, dtype=np.float64)).astype(np.int64)

    def unit(self, k: int) -> np.ndarray:
        """Uniform doubles in [0, 1)."""
        return (self.bits(k) >> np.uint64(11)).astype(np.float64) * 2.0**-53


# -- Nexmark's id arithmetic (PersonGenerator, AuctionGenerator) -------------------------------------
def last_base0_person_id(e: np.ndarray, props: tuple[int, int, int]) -> np.ndarray:
    p, _, _ = props
    total = sum(props)
    epoch, off = e // total, np.minimum(e % total, p - 1)
    return epoch * p + off


def last_base0_auction_id(e: np.ndarray, props: tuple[int, int, int]) -> np.ndarray:
    p, a, _ = props
    total = sum(props)
    epoch, off = e // total, e % total
    person_slot, bid_slot = off < p, off >= p + a
    epoch = np.where(person_slot, epoch - 1, epoch)
    off = np.where(person_slot | bid_slot, a - 1, off - p)
    return np.maximum(epoch * a + off, 0)  # Nexmark's -1 before the first auction: auction 1000


def next_base0_person_id(e: np.ndarray, props, active: int, u: np.ndarray) -> np.ndarray:
    people = last_base0_person_id(e, props) + 1
    live = np.minimum(people, active)
    return people - live + np.floor(u * (live + PERSON_ID_LEAD)).astype(np.int64)


def next_base0_auction_id(e: np.ndarray, props, in_flight: int, u: np.ndarray) -> np.ndarray:
    most = last_base0_auction_id(e, props)
    least = np.maximum(most - in_flight, 0)
    return least + np.floor(u * (most - least + 1 + AUCTION_ID_LEAD)).astype(np.int64)


def price(u: np.ndarray) -> np.ndarray:
    """PriceGenerator.nextPrice: Math.round(10^(u*6) * 100), cents from 1 dollar to 1,000,000."""
    return np.floor(10.0 ** (u * 6.0) * 100.0 + 0.5).astype(np.int64)


def channel_id(k: int) -> int:
    """abs(Integer.reverse(k)) as Java computes it (abs(MIN_VALUE) stays negative)."""
    r = int(f"{k & 0xFFFFFFFF:032b}"[::-1], 2)
    r = r - 2**32 if r >= 2**31 else r
    return r if r == -(2**31) else abs(r)


# -- the model ----------------------------------------------------------------------------------------
class Model:
    """Every Nexmark field of a set of events, as columns: `columns(event_id, event_time_ms)`.
    Numbers are numpy int64 arrays (-1 outside their kind); strings are Arrow string arrays
    (null outside their kind), built from pools by take(): no Python string per event."""

    def __init__(self, spec: NexmarkSpec, seed: int, rate_eps: float):
        self.spec, self.seed = spec, seed
        total = sum(spec.proportions)
        # AuctionGenerator.nextAuctionLengthMs: 2 x the time the events of 100 in-flight auctions take
        events_per_auctions = spec.in_flight_auctions * total // spec.proportions[1]
        self.horizon_ms = max(1000.0 * events_per_auctions / max(rate_eps, 1e-9), 1.0)

    @cached_property
    def _pools(self) -> dict[str, pa.Array]:
        rng = np.random.default_rng((self.seed, _STREAM, 1))
        s7, s5 = _strings(rng, 7), _strings(rng, 5)
        names = [f"{f} {la}" for f in FIRST_NAMES for la in LAST_NAMES]
        dirs = _strings(rng, 5, special="_", trim=False)
        urls = np.random.default_rng((self.seed, _STREAM, 2))

        def base() -> str:
            a, b, c = dirs[urls.integers(0, POOL_STRINGS, 3)]
            return f"https://www.nexmark.com/{a}/{b}/{c}/item.htm?query=1"

        hot_urls = [base() for _ in HOT_CHANNELS]
        cold_urls = [
            base() + (f"&channel_id={channel_id(i)}" if urls.integers(0, 10) > 0 else "")
            for i in range(CHANNELS)
        ]
        return {
            "name": pa.array(names),
            "s7": pa.array(s7.tolist()),
            "s5": pa.array(s5.tolist()),
            "s20": pa.array(_strings(rng, 20).tolist()),
            "s100": pa.array(_strings(rng, 100).tolist()),
            "card": pa.array([f"{i:04d}" for i in range(10_000)]),
            "city": pa.array(CITIES),
            "state": pa.array(STATES),
            # channels and URLs: the four hot ones first, then channel-0..9999 (BidGenerator's caches)
            "channel": pa.array([*HOT_CHANNELS, *(f"channel-{k}" for k in range(CHANNELS))]),
            "url": pa.array(hot_urls + cold_urls),
        }

    @cached_property
    def _letters(self) -> np.ndarray:
        rng = np.random.default_rng((self.seed, _STREAM, 3))
        return rng.integers(ord("a"), ord("z") + 1, EXTRA_POOL_BYTES).astype(np.uint8)

    def kind(self, event_id: np.ndarray) -> np.ndarray:
        p, a, _ = self.spec.proportions
        rem = np.asarray(event_id, dtype=np.int64) % sum(self.spec.proportions)
        return np.where(rem < p, PERSON, np.where(rem < p + a, AUCTION, BID)).astype(np.int8)

    def columns(self, event_id: np.ndarray, event_time_ms: np.ndarray) -> dict:
        """Every event's kind (`nx_type`) and fields; `date_time_ms` is its event time."""
        spec, props = self.spec, self.spec.proportions
        e = np.asarray(event_id, dtype=np.int64)
        ts = np.asarray(event_time_ms, dtype=np.int64)
        n, d, pools = len(e), Draws(self.seed, e), self._pools
        kind = self.kind(e)
        is_p, is_a, is_b = kind == PERSON, kind == AUCTION, kind == BID
        neg = np.full(n, -1, dtype=np.int64)
        last_person = last_base0_person_id(e, props)
        last_auction = last_base0_auction_id(e, props)
        out: dict = {"nx_type": kind, "date_time_ms": ts}
        # person
        out["person_id"] = np.where(is_p, last_person + FIRST_PERSON_ID, neg)
        out["name"] = _take(
            pools["name"], d.below(0, len(FIRST_NAMES)) * len(LAST_NAMES) + d.below(1, len(LAST_NAMES)), is_p
        )
        out["email"] = _join(
            is_p,
            _take(pools["s7"], d.below(2, POOL_STRINGS), is_p),
            "@",
            _take(pools["s5"], d.below(3, POOL_STRINGS), is_p),
            ".com",
        )
        card = [_take(pools["card"], d.below(4 + i, 10_000), is_p) for i in range(4)]
        out["credit_card"] = _join(is_p, card[0], " ", card[1], " ", card[2], " ", card[3])
        out["city"] = _take(pools["city"], d.below(8, len(CITIES)), is_p)
        out["state"] = _take(pools["state"], d.below(9, len(STATES)), is_p)
        # auction
        out["auction_id"] = np.where(is_a, last_auction + FIRST_AUCTION_ID, neg)
        hot_seller = d.below(10, spec.hot_seller_ratio) > 0
        cold_seller = next_base0_person_id(e, props, spec.active_people, d.unit(11))
        seller = (
            np.where(hot_seller, last_person // HOT_ID_RATIO * HOT_ID_RATIO, cold_seller) + FIRST_PERSON_ID
        )
        out["seller"] = np.where(is_a, seller, neg)
        out["category"] = np.where(is_a, FIRST_CATEGORY_ID + d.below(12, NUM_CATEGORIES), neg)
        initial = price(d.unit(13))
        out["initial_bid"] = np.where(is_a, initial, neg)
        out["reserve"] = np.where(is_a, initial + price(d.unit(14)), neg)
        length = 1 + d.below(15, max(int(2 * self.horizon_ms), 1))
        out["expires_ms"] = np.where(is_a, ts + length, neg)
        out["item_name"] = _take(pools["s20"], d.below(16, POOL_STRINGS), is_a)
        out["description"] = _take(pools["s100"], d.below(17, POOL_STRINGS), is_a)
        # bid
        hot_auction = d.below(18, spec.hot_auction_ratio) > 0
        cold_auction = next_base0_auction_id(e, props, spec.in_flight_auctions, d.unit(19))
        auction = np.where(hot_auction, last_auction // HOT_ID_RATIO * HOT_ID_RATIO, cold_auction)
        out["auction"] = np.where(is_b, auction + FIRST_AUCTION_ID, neg)
        hot_bidder = d.below(20, spec.hot_bidder_ratio) > 0
        cold_bidder = next_base0_person_id(e, props, spec.active_people, d.unit(21))
        bidder = np.where(hot_bidder, last_person // HOT_ID_RATIO * HOT_ID_RATIO + 1, cold_bidder)
        out["bidder"] = np.where(is_b, bidder + FIRST_PERSON_ID, neg)
        out["price"] = np.where(is_b, price(d.unit(22)), neg)
        # half the bids on a hot channel (0-3 in the pools), the rest on channel-k (4 + k)
        which = np.where(
            d.below(23, 2) > 0, d.below(24, len(HOT_CHANNELS)), len(HOT_CHANNELS) + d.below(25, CHANNELS)
        )
        out["channel"] = _take(pools["channel"], which, is_b)
        out["url"] = _take(pools["url"], which, is_b)
        out["extra"] = self._extra(d, kind, out)
        return out

    def _extra(self, d: Draws, kind: np.ndarray, out: dict) -> pa.StringArray:
        """StringsGenerator.nextExtra: each kind padded to its average size, from its fields' size."""
        size = np.select([kind == PERSON, kind == AUCTION], [8, 48], 32).astype(np.int64)
        for f in ("name", "email", "credit_card", "city", "state", "item_name", "description"):
            size += pc.fill_null(pc.binary_length(out[f]), 0).to_numpy(zero_copy_only=False)
        avg = np.array([AVG_BYTES[PERSON], AVG_BYTES[AUCTION], AVG_BYTES[BID]])[kind]
        gap = np.maximum(avg - size, 0)
        delta = np.floor(gap * 0.2 + 0.5).astype(np.int64)
        spread = np.where(delta > 0, d.below(26, np.maximum(2 * delta, 1)), 0)
        length = np.where(size > avg, 0, gap - delta + spread)
        start = d.below(27, EXTRA_POOL_BYTES - length)
        return _slices(self._letters, start, length)

    def frame(self, event_id: np.ndarray, event_time_ms: np.ndarray):
        """The columns as a pandas DataFrame (strings as Python objects, None outside their kind)."""
        import pandas as pd

        cols = self.columns(event_id, event_time_ms)
        return pd.DataFrame(
            {k: (v.to_numpy(zero_copy_only=False) if isinstance(v, pa.Array) else v) for k, v in cols.items()}
        )


def _strings(rng: np.random.Generator, max_len: int, special: str = " ", trim: bool = True) -> np.ndarray:
    """StringsGenerator.nextString: length 3..max_len-1 of a-z, `special` with probability 1/13."""
    out = []
    for _ in range(POOL_STRINGS):
        length = 3 + int(rng.integers(0, max_len - 3))
        chars = np.where(
            rng.integers(0, 13, length) == 0, ord(special), rng.integers(ord("a"), ord("z") + 1, length)
        )
        s = bytes(chars.astype(np.uint8)).decode()
        out.append(s.strip(" ") if trim else s)
    return np.array(out, dtype=object)


def _take(pool: pa.Array, index: np.ndarray, where: np.ndarray) -> pa.Array:
    """pool[index] where `where`, null elsewhere."""
    return pool.take(pa.array(index, mask=~where))


def _join(where: np.ndarray, *parts) -> pa.Array:
    joined = pc.binary_join_element_wise(*[p if isinstance(p, pa.Array) else pa.scalar(p) for p in parts], "")
    return pc.if_else(pa.array(where), joined, pa.scalar(None, pa.string()))


def _slices(pool: np.ndarray, start: np.ndarray, length: np.ndarray) -> pa.StringArray:
    """pool[start[i]:start[i] + length[i]] for each i, gathered in one pass into one Arrow array."""
    offsets = np.concatenate([[0], np.cumsum(length)]).astype(np.int64)
    index = np.repeat(start - offsets[:-1], length) + np.arange(offsets[-1])
    return pa.StringArray.from_buffers(
        len(length), pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(pool[index].tobytes())
    )


# -- in ground truth --------------------------------------------------------------------------------------
TRUTH_SCHEMA = pa.schema(
    [
        ("nx_type", pa.int8()),
        ("person_id", pa.int64()),
        ("name", pa.string()),
        ("email", pa.string()),
        ("credit_card", pa.string()),
        ("city", pa.string()),
        ("state", pa.string()),
        ("auction_id", pa.int64()),
        ("item_name", pa.string()),
        ("description", pa.string()),
        ("initial_bid", pa.int64()),
        ("reserve", pa.int64()),
        ("expires_ms", pa.int64()),
        ("seller", pa.int64()),
        ("category", pa.int64()),
        ("auction", pa.int64()),
        ("bidder", pa.int64()),
        ("price", pa.int64()),
        ("channel", pa.string()),
        ("url", pa.string()),
        ("extra", pa.string()),
    ]
)
TRUTH_COLUMNS = tuple(TRUTH_SCHEMA.names)


def truth_columns(columns: dict) -> dict:
    """The model's columns as ground truth stores them (its event time is truth's own)."""
    return {name: columns[name] for name in TRUTH_COLUMNS}


# -- on the wire ----------------------------------------------------------------------------------------
# a record's value: the harness's fields, then Nexmark's, as nexmark/nexmark's Kafka DDL nests them
#   {"event_id":7,"key":"k3","event_time_ms":...,"event_type":2,"bid":{"auction":1000,"bidder":1001,
#    "price":3719,"channel":"Google","url":"https://...","extra":"..."}}
WIRE_FIELDS = {
    PERSON: (
        "person",
        (
            ("id", "person_id", False),
            ("name", "name", True),
            ("emailAddress", "email", True),
            ("creditCard", "credit_card", True),
            ("city", "city", True),
            ("state", "state", True),
            ("extra", "extra", True),
        ),
    ),
    AUCTION: (
        "auction",
        (
            ("id", "auction_id", False),
            ("itemName", "item_name", True),
            ("description", "description", True),
            ("initialBid", "initial_bid", False),
            ("reserve", "reserve", False),
            ("expires", "expires_ms", False),
            ("seller", "seller", False),
            ("category", "category", False),
            ("extra", "extra", True),
        ),
    ),
    BID: (
        "bid",
        (
            ("auction", "auction", False),
            ("bidder", "bidder", False),
            ("price", "price", False),
            ("channel", "channel", True),
            ("url", "url", True),
            ("extra", "extra", True),
        ),
    ),
}


def wire_tails(columns: dict) -> pa.Array:
    """Each event's Nexmark part of its JSON value: `,"event_type":K,"<kind>":{...}}` (the
    value's closing brace included), built in Arrow per kind and put back in order."""
    kind = columns["nx_type"]
    n = len(kind)
    pieces = []
    order = []
    for k, (name, fields) in WIRE_FIELDS.items():
        mine = np.flatnonzero(kind == k)
        if not len(mine):
            continue
        rows = pa.array(mine)
        parts: list = []
        for i, (wire, column, quoted) in enumerate(fields):
            lead = f',"event_type":{k},"{name}":{{' if i == 0 else ","
            values = columns[column]
            text = values.take(rows) if quoted else pc.cast(pa.array(values[mine]), pa.string())
            parts += [pa.scalar(f'{lead}"{wire}":' + ('"' if quoted else "")), text]
            if quoted:
                parts.append(pa.scalar('"'))
        parts.append(pa.scalar("}}"))
        pieces.append(pc.binary_join_element_wise(*parts, ""))
        order.append(mine)
    if not pieces:
        return pa.array([], pa.string())
    joined = pa.concat_arrays(pieces)
    inverse = np.empty(n, dtype=np.int64)
    inverse[np.concatenate(order)] = np.arange(n)
    return joined.take(pa.array(inverse))
