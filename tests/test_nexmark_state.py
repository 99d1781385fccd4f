"""Nexmark's transformWithState queries (q4, q6, q9, q18): their processors
(workloads/pipelines/nexmark_state.py) driven batch by batch through a stand-in for Spark's
state handle, against their oracles (harness/check/nexmark.py), however the events are cut
into batches and out of order; and the rules by hand. benchmarks/test_nexmark.py runs them
on Spark."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from harness.check import nexmark as oracle
from harness.check.checkpoint import Batch
from workloads.generator import nexmark as nx
from workloads.pipelines import nexmark_state as tws

pytestmark = pytest.mark.unit

T0 = 1_700_000_000_000
DELAY = 4_000


class _Value:
    def __init__(self):
        self.v = None

    def exists(self):
        return self.v is not None

    def get(self):
        return self.v

    def update(self, v):
        self.v = tuple(v)

    def clear(self):
        self.v = None


class _List:
    def __init__(self):
        self.v: list = []

    def exists(self):
        return bool(self.v)

    def get(self):
        return iter(list(self.v))

    def put(self, v):
        self.v = [tuple(x) for x in v]

    def appendList(self, v):
        self.v += [tuple(x) for x in v]

    def clear(self):
        self.v = []


class _Handle:
    """One key's state, and its timers, as Spark's StatefulProcessorHandle keeps them."""

    def __init__(self):
        self.states: dict = {}
        self.timers: set[int] = set()

    def getValueState(self, name, schema):
        return self.states.setdefault(name, _Value())

    def getListState(self, name, schema):
        return self.states.setdefault(name, _List())

    def registerTimer(self, at):
        self.timers.add(int(at))


class _Operator:
    """transformWithState over batches: a processor per key (one handle each), late rows
    dropped by the previous batch's watermark (EventTime mode), the input first, then the
    timers at or below the batch's watermark in time order (a timer at exactly the watermark
    fires, as a real run's firing log shows: harness/check/timers.py)."""

    def __init__(self, make, event_time: bool):
        self.make, self.event_time, self.keys = make, event_time, {}

    def _proc(self, key):
        if key not in self.keys:
            p, h = self.make(), _Handle()
            p.init(h)
            self.keys[key] = (p, h)
        return self.keys[key]

    def batch(self, rows: list[tuple[tuple, SimpleNamespace]], late_wm: int, wm: int) -> list:
        out = []
        grouped: dict = {}
        for key, r in rows:
            if self.event_time and r.date_time_ms <= late_wm:
                continue
            grouped.setdefault(key, []).append(r)
        for key, rs in grouped.items():
            p, _ = self._proc(key)
            out += list(p.handleInputRows(key, iter(rs), None))
        if self.event_time:
            due = sorted((t, k) for k, (_, h) in self.keys.items() for t in h.timers if t <= wm)
            for t, k in due:
                p, h = self.keys[k]
                h.timers.discard(t)
                out += list(p.handleExpiredTimer(k, None, SimpleNamespace(getExpiryTimeInMs=lambda t=t: t)))
        return out


def _truth(n: int, eps: float, seed: int, jitter_ms: int) -> pd.DataFrame:
    """n Nexmark events at `eps`, `jitter_ms` out of order, in one partition."""
    ids = np.arange(n)
    rng = np.random.default_rng(seed)
    ts = T0 + (ids * 1000 / eps).astype(np.int64) - rng.integers(0, jitter_ms + 1, n)
    cols = nx.truth_columns(nx.Model(nx.NexmarkSpec(), seed, eps).columns(ids, ts))
    frame = pd.DataFrame({k: (v.to_pylist() if hasattr(v, "to_pylist") else v) for k, v in cols.items()})
    return frame.assign(event_id=ids, event_time_ms=ts, partition=0, offset=ids, append_ms=ts, control=False)


def _cut(truth: pd.DataFrame, sizes: list[int]) -> list[tuple[Batch, pd.DataFrame]]:
    """Batches of `sizes` events in offset order, then one with none whose watermark passes
    every expiry (the harness's flush): each with Spark's watermark (the newest event time
    of the batches before it, less the delay)."""
    out, start, newest = [], 0, None
    for i, size in enumerate([*sizes, 0]):
        part = truth.iloc[start:start + size]
        wm = -1 if newest is None else newest - DELAY
        if i == len(sizes):
            wm = int(truth["event_time_ms"].max()) + 86_400_000
        start += size
        out.append((Batch(i, wm, {0: start}, True), part))
        if len(part):
            newest = max(newest or 0, int(part["event_time_ms"].max()))
    return out


def _rows(part: pd.DataFrame, kinds) -> list[SimpleNamespace]:
    return [SimpleNamespace(**r) for r in part[part["nx_type"].isin(kinds)].to_dict("records")]


def _winner_input(r: SimpleNamespace):
    a = r.nx_type == nx.AUCTION
    key = int(r.auction_id) if a else int(r.auction)
    return (key,), SimpleNamespace(
        kind=1 if a else 2, id=key, item_name=r.item_name, description=r.description,
        initial_bid=int(r.initial_bid) if a else None, reserve=int(r.reserve) if a else None,
        date_time_ms=int(r.event_time_ms), expires_ms=int(r.expires_ms) if a else None,
        seller=int(r.seller) if a else None, category=int(r.category) if a else None, extra=r.extra,
        bidder=None if a else int(r.bidder), price=None if a else int(r.price))


def _run_winners(cuts, then=None):
    """Winner over the batches; `then`: a second operator over its rows, by a key function."""
    op = _Operator(tws.Winner, event_time=True)
    second = then[0] if then else None
    out, late_wm = [], -1
    for batch, part in cuts:
        rows = [_winner_input(r) for r in _rows(part, (nx.AUCTION, nx.BID))]
        won = op.batch(rows, late_wm, batch.watermark_ms)
        if second is not None:
            won = second.batch([(then[1](w), SimpleNamespace(**w.asDict())) for w in won], late_wm, 0)
        out += [w.asDict() for w in won]
        late_wm = batch.watermark_ms
    return pd.DataFrame(out)


def _same(got: pd.DataFrame, exp: pd.DataFrame, key: list[str]):
    cols = list(got.columns)
    a = got.sort_values(key).reset_index(drop=True)
    b = exp[cols].sort_values(key).reset_index(drop=True).astype(a.dtypes.to_dict())
    pd.testing.assert_frame_equal(a, b, check_dtype=False)


CUTS = [[400] * 10, [1000, 37, 2963], [4000]]


@pytest.mark.parametrize("sizes", CUTS, ids=["ten", "uneven", "one"])
@pytest.mark.parametrize("seed", [1, 2])
def test_q9_s_processor_writes_what_its_oracle_expects(sizes, seed):
    truth = _truth(4000, 200.0, seed, jitter_ms=3_000)
    cuts = _cut(truth, sizes)
    batches = [b for b, _ in cuts]
    exp = oracle.q9(oracle.real_events(truth, batches), batches, {"query": "q9"})
    got = _run_winners(cuts)
    assert len(got) > 20
    _same(got, exp.frame, ["id"])


@pytest.mark.parametrize("query,by,out,last", [("q4", "category", "final", None),
                                               ("q6", "seller", "avg_price", tws.LAST_N)])
@pytest.mark.parametrize("sizes", CUTS[:2], ids=["ten", "uneven"])
def test_q4_and_q6_s_versions_do_not_depend_on_the_batches(query, by, out, last, sizes):
    truth = _truth(4000, 200.0, 3, jitter_ms=3_000)
    cuts = _cut(truth, sizes)
    batches = [b for b, _ in cuts]
    name = "id" if by == "category" else by
    running = _Operator(lambda: tws.Running(name, out, last), event_time=False)
    got = _run_winners(cuts, (running, lambda w: (w[by],)))
    exp = oracle.oracle_of(query)(oracle.real_events(truth, batches), batches, {"query": query})
    assert len(got) > 20 and got["auctions"].max() > 1
    _same(got, exp.frame, [name, "auctions"])


@pytest.mark.parametrize("sizes", CUTS, ids=["ten", "uneven", "one"])
def test_q18_s_changelog_is_mirrored_batch_by_batch(sizes):
    truth = _truth(4000, 200.0, 4, jitter_ms=3_000)
    cuts = _cut(truth, sizes)
    batches = [b for b, _ in cuts]
    op, out = _Operator(tws.Newest, event_time=False), []
    for _, part in cuts:
        rows = [((int(r.bidder), int(r.auction)),
                 SimpleNamespace(date_time_ms=int(r.event_time_ms), price=int(r.price), channel=r.channel,
                                 url=r.url, extra=r.extra)) for r in _rows(part, (nx.BID,))]
        out += [w.asDict() for w in op.batch(rows, -1, 0)]
    got = pd.DataFrame(out)
    exp = oracle.q18(oracle.real_events(truth, batches), batches, {"query": "q18"})
    _same(got, exp.frame, ["auction", "bidder", "date_time_ms"])
    if sizes == [4000]:   # one batch: one row per pair, its newest bid
        assert len(got) == len(truth[truth["nx_type"] == nx.BID].groupby(["bidder", "auction"]))


def _events(*rows) -> pd.DataFrame:
    """Hand-written auctions (kind, id, t, expires) and bids (kind, auction, t, price, bidder)."""
    out = []
    for i, r in enumerate(rows):
        base = dict(event_id=i, partition=0, offset=i, append_ms=r[2], control=False, event_time_ms=r[2],
                    item_name="i", description="d", initial_bid=1, reserve=2, seller=7, category=10,
                    extra=f"x{i}", auction_id=-1, expires_ms=-1, auction=-1, bidder=-1, price=-1,
                    channel="c", url="u", nx_type=r[0])
        if r[0] == nx.AUCTION:
            base.update(auction_id=r[1], expires_ms=r[3])
        else:
            base.update(auction=r[1], price=r[3], bidder=r[4])
        out.append(base)
    return pd.DataFrame(out)


def test_q9_s_rules_by_hand():
    """Within the auction's life only, ends included; the higher price, then the earlier bid;
    a bid read in a batch whose previous watermark had passed it is dropped as late; an
    auction whose expiry the last watermark has not passed is open, not lost."""
    A, B = nx.AUCTION, nx.BID
    truth = _events(
        (A, 1, 1000, 5000), (B, 1, 999, 900, 1), (B, 1, 1000, 50, 2), (B, 1, 5000, 60, 3),
        (B, 1, 5001, 999, 4), (B, 1, 3000, 60, 5),      # 60 at 5000 and at 3000: the earlier wins
        (A, 2, 2000, 4000), (B, 2, 2500, 10, 6),
        (A, 3, 3000, 90_000), (B, 3, 3500, 70, 7),      # open: expires after the last watermark
        (B, 2, 2600, 999, 8),                            # read after the watermark passed it: late
    )
    batches = [Batch(0, -1, {0: 10}, True), Batch(1, 2600, {0: 10}, True), Batch(2, 60_000, {0: 11}, True)]
    exp = oracle.q9(oracle.real_events(truth, batches), batches, {"query": "q9"})
    rows = exp.frame.set_index("id")
    assert (rows.loc[1, "price"], rows.loc[1, "bid_date_time_ms"], rows.loc[1, "bidder"]) == (60, 3000, 5)
    assert rows.loc[2, "price"] == 10
    assert list(exp.open_rows["id"]) == [3] and exp.dropped_late == 1


def test_an_auction_expiring_at_exactly_the_last_watermark_is_final():
    """Spark fires a timer at or below the batch's watermark (timers.py): auction 1, expiring at
    5000 with the last watermark at 5000, has been written; it is expected, not open."""
    A, B = nx.AUCTION, nx.BID
    truth = _events((A, 1, 1000, 5000), (B, 1, 2000, 70, 1))
    batches = [Batch(0, -1, {0: 2}, True), Batch(1, 5000, {0: 2}, True)]
    exp = oracle.q9(oracle.real_events(truth, batches), batches, {"query": "q9"})
    assert list(exp.frame["id"]) == [1] and exp.open_rows.empty
