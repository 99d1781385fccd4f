"""Nexmark's generator model (workloads/generator/nexmark.py) without Kafka: its kinds, ids,
hot ratios, prices and sizes as nexmark/nexmark defines them, deterministic from the seed and
the event id, and its wire format as the pipelines parse it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from workloads.errors import SpecError
from workloads.generator import nexmark as nx
from workloads.generator.spec import parse

pytestmark = pytest.mark.unit

T0 = 1_700_000_000_000


def _columns(n: int = 50_000, seed: int = 7, rate: float = 1000.0, start: int = 0):
    model = nx.Model(nx.NexmarkSpec(), seed, rate)
    ids = np.arange(start, start + n)
    return model.columns(ids, T0 + ids)


class TestModel:
    def test_the_same_seed_and_ids_give_the_same_events_in_any_slices(self):
        """An event's fields depend on the seed and its id only: a process that sends ids
        500-999 writes what one sending 0-999 writes for them."""
        whole, tail = _columns(1000), _columns(500, start=500)
        for name in ("price", "auction", "bidder", "seller", "expires_ms"):
            assert (whole[name][500:] == tail[name]).all(), name
        for name in ("name", "url", "extra"):
            assert whole[name][500:].to_pylist() == tail[name].to_pylist(), name
        other = nx.Model(nx.NexmarkSpec(), 8, 1000.0).columns(np.arange(1000), T0 + np.arange(1000))
        assert (other["price"] != whole["price"]).sum() > 800

    def test_kinds_follow_the_proportions_and_ids_are_dense(self):
        c = _columns(5000)
        kinds = c["nx_type"]
        assert (np.bincount(kinds) == [100, 300, 4600]).all()
        people = c["person_id"][kinds == nx.PERSON]
        auctions = c["auction_id"][kinds == nx.AUCTION]
        assert (people == np.arange(1000, 1100)).all() and (auctions == np.arange(1000, 1300)).all()

    def test_hot_auctions_sellers_and_bidders(self):
        """P(hot) = 1 - 1/ratio: half the bids on the first auction of their hundred, three in four
        bidders and sellers the first person (bidder: the second) of theirs."""
        c = _columns()
        bids, auctions = c["nx_type"] == nx.BID, c["nx_type"] == nx.AUCTION
        assert 0.48 < np.mean(c["auction"][bids] % 100 == 0) < 0.56
        assert 0.73 < np.mean(c["bidder"][bids] % 100 == 1) < 0.80
        assert 0.73 < np.mean(c["seller"][auctions] % 100 == 0) < 0.80
        # a cold id is among the in-flight auctions or active people, at most 10 ahead
        last_auction = nx.last_base0_auction_id(np.flatnonzero(bids), (1, 3, 46)) + 1000
        assert (c["auction"][bids] <= last_auction + 10).all()

    def test_prices_are_log_uniform_in_cents_from_a_dollar_to_a_million(self):
        c = _columns()
        price = c["price"][c["nx_type"] == nx.BID]
        assert price.min() >= 100 and price.max() <= 100_000_000
        assert 60_000 < np.median(price) < 170_000  # 10^3 dollars at the median
        assert (c["reserve"] >= c["initial_bid"]).all()

    def test_auctions_last_up_to_twice_the_time_of_1666_events_at_the_rate(self):
        c = _columns(rate=1000.0)
        a = c["nx_type"] == nx.AUCTION
        length = c["expires_ms"][a] - c["date_time_ms"][a]
        assert length.min() >= 1 and length.max() <= 2 * 1666 + 1 and 1400 < length.mean() < 1900

    def test_each_kind_is_padded_to_nexmark_s_average_size(self):
        c = _columns()
        extra = np.array([len(x) for x in c["extra"].to_pylist()])
        kinds = c["nx_type"]
        # fields + extra: about 100 bytes a bid, 500 an auction, 200 a person
        assert 60 <= extra[kinds == nx.BID].mean() <= 75
        assert 350 <= extra[kinds == nx.AUCTION].mean() <= 430
        assert 110 <= extra[kinds == nx.PERSON].mean() <= 160

    def test_channels_and_urls(self):
        c = _columns()
        bids = c["nx_type"] == nx.BID
        channels = np.array(c["channel"].to_pylist(), dtype=object)[bids]
        urls = np.array(c["url"].to_pylist(), dtype=object)[bids]
        hot = np.isin(channels, nx.HOT_CHANNELS)
        assert 0.47 < hot.mean() < 0.53
        with_id = np.array(["&channel_id=" in u for u in urls[~hot]])
        assert 0.87 < with_id.mean() < 0.93 and not any("channel_id" in u for u in urls[hot])
        assert nx.channel_id(2) == 1073741824 and nx.channel_id(1) == -(2**31)

    def test_the_wire_value_is_json_with_the_kind_s_fields(self):
        c = _columns(100)
        tails = nx.wire_tails(c).to_pylist()
        for i in (0, 1, 4):
            value = json.loads('{"event_id":' + str(i) + tails[i])
            kind = nx.EVENT_TYPE_NAMES[c["nx_type"][i]]
            assert value["event_type"] == c["nx_type"][i] and set(value) == {"event_id", "event_type", kind}
        bid = json.loads('{"event_id":4' + tails[4])["bid"]
        assert (bid["auction"], bid["price"], bid["url"]) == (
            c["auction"][4],
            c["price"][4],
            c["url"][4].as_py(),
        )


class TestSpec:
    def test_kind_nexmark_with_its_knobs(self):
        s = parse(
            {
                "kind": "nexmark",
                "duration": "10s",
                "rate": {"eps": 500},
                "proportions": [1, 1, 8],
                "hot_auction_ratio": 3,
            }
        )
        assert s.kind == "nexmark" and s.nexmark.proportions == (1, 1, 8) and s.nexmark.hot_auction_ratio == 3
        assert s.mean_eps == 500

    @pytest.mark.parametrize(
        ("table", "says"),
        [
            ({"hot_bidder_ratio": 2}, "is a Nexmark knob"),
            ({"kind": "nexmark", "payload": {"size": 100}}, "does not apply"),
            ({"kind": "nexmark", "proportions": [1, 3]}, "three positive integers"),
            ({"kind": "auctions"}, "kind"),
        ],
    )
    def test_bad_knobs_are_refused_with_the_fix(self, table, says):
        with pytest.raises(SpecError, match=says):
            parse({"duration": "10s", "rate": {"eps": 500}, **table})
