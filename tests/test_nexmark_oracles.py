"""The oracles of Nexmark's queries (harness/check/nexmark.py) without Spark: each writes its
query's columns, a sink holding them passes and one short of a row fails, Spark's late rule
drops exactly the (bid, window) pairs whose window had closed, and q15's distinct counts are
the hand-counted ones. benchmarks/test_nexmark.py checks them against Spark itself."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.check import nexmark as oracle
from harness.check.checkpoint import Batch
from workloads.generator import nexmark as nx
from workloads.pipelines import nexmark as queries

pytestmark = pytest.mark.unit

T0 = 1_700_000_000_000
PARAMS = {"window_ms": 10_000, "slide_ms": 2_000, "gap_ms": 10_000, "watermark_ms": 4_000}


def _truth(n: int = 4000, eps: float = 100.0) -> pd.DataFrame:
    """n events at `eps`, in one partition in id order, with their Nexmark fields."""
    ids = np.arange(n)
    ts = T0 + (ids * 1000 / eps).astype(np.int64)
    cols = nx.truth_columns(nx.Model(nx.NexmarkSpec(), 3, eps).columns(ids, ts))
    frame = pd.DataFrame({k: (v.to_pylist() if hasattr(v, "to_pylist") else v) for k, v in cols.items()})
    return frame.assign(event_id=ids, event_time_ms=ts, partition=0, offset=ids, append_ms=ts, control=False)


def _batches(truth: pd.DataFrame, watermark_ms: int) -> list[Batch]:
    """Two committed batches: the first half with no watermark, the rest at `watermark_ms`."""
    half = len(truth) // 2
    return [Batch(0, -1, {0: half}, True), Batch(1, watermark_ms, {0: len(truth)}, True)]


def _sink(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(committed_ms=T0)


@pytest.mark.parametrize("name", sorted(queries.QUERIES))
def test_each_oracle_writes_its_query_s_columns_and_a_short_sink_fails(name):
    truth = _truth()
    final = int(truth["event_time_ms"].max()) + 86_400_000 + 1
    batches = _batches(truth, -1) + [Batch(2, final, {0: len(truth)}, True)]
    params = {**PARAMS, "query": name}
    exp = oracle.oracle_of(name)(oracle.real_events(truth, batches), batches, params)
    columns = list(queries.QUERIES[name].columns)
    assert set(columns) <= set(exp.frame.columns), (name, set(columns) - set(exp.frame.columns))
    assert len(exp.frame) > 0, name
    rows = exp.frame[columns]
    good = oracle.check(truth, _sink(rows), batches, params).counts
    assert good["lost"] == good["duplicated"] == good["unexpected"] == 0, (name, good)
    short = oracle.check(truth, _sink(rows.iloc[1:]), batches, params).counts
    assert short["lost"] >= 1, (name, short)


def test_a_bid_read_after_its_window_closed_is_dropped_as_spark_drops_it():
    """q12 (10 s tumbling): the second batch sets the watermark to T0 + 30 s, and the third
    drops its late rows by it (Spark filters by the previous batch's watermark): its bids of
    windows ending at or before it are late, exactly those pairs, no others."""
    truth = _truth()
    wm, third = T0 + 30_000, len(truth) * 3 // 4
    batches = [
        Batch(0, -1, {0: len(truth) // 2}, True),
        Batch(1, wm, {0: third}, True),
        Batch(2, wm, {0: len(truth)}, True),
    ]
    real = oracle.real_events(truth, batches)
    exp = oracle.q12(real, batches, {**PARAMS, "query": "q12"})
    bids = real[(real["nx_type"] == nx.BID)]
    end = bids["event_time_ms"] - bids["event_time_ms"] % 10_000 + 10_000
    late = int(((bids["batch"] == 2) & (end <= wm)).sum())
    assert late == 0 and exp.dropped_late == 0, "events in order are never late"
    # the third batch's events 20 s older: their windows had closed
    shifted = truth.assign(
        event_time_ms=np.where(
            truth["offset"] >= third, truth["event_time_ms"] - 20_000, truth["event_time_ms"]
        )
    )
    real = oracle.real_events(shifted, batches)
    exp = oracle.q12(real, batches, {**PARAMS, "query": "q12"})
    bids = real[(real["nx_type"] == nx.BID)]
    end = bids["event_time_ms"] - bids["event_time_ms"] % 10_000 + 10_000
    late = int(((bids["batch"] == 2) & (end <= wm)).sum())
    assert late > 0 and exp.dropped_late == late
    kept = exp.frame["bid_count"].sum() + (
        exp.open_rows["bid_count"].sum() if exp.open_rows is not None else 0
    )
    assert int(kept) == len(bids) - late


def test_q7_joins_a_bid_at_a_window_s_end_with_both_windows_and_drops_the_join_s_late_bids():
    """q7 (10 s windows): each window's highest price joined with the bids of [end - 10 s, end].
    A bid at exactly a window's end joins that window's maximum as well as its own window's;
    a bid the join drops as late (at or before the previous watermark) still sets the maximum
    of a window the aggregation kept open, and no bid of that window is written."""
    truth = _truth()
    half, wm0 = len(truth) // 2, T0 + 25_000
    batches = [Batch(0, -1, {0: 100}, True), Batch(1, wm0, {0: half}, True),
               Batch(2, T0 + 100_000, {0: len(truth)}, True)]
    bid = truth["nx_type"].to_numpy() == nx.BID
    price = np.where(bid, 1, truth["price"])
    at = {}
    for name, t, p in (("b", T0 + 5_000, 999), ("a", T0 + 10_000, 999), ("c", T0 + 24_000, 5_000)):
        i = int(np.flatnonzero(bid & (truth["event_time_ms"].to_numpy() >= t))[0])
        at[name] = i
        price[i] = p
        truth.loc[i, "event_time_ms"] = t
    truth = truth.assign(price=price)
    real = oracle.real_events(truth, batches)
    exp = oracle.q7(real, batches, {**PARAMS, "query": "q7"})
    top = exp.frame[exp.frame["price"] == 999]
    assert sorted(zip(top["date_time_ms"] - T0, top["window_end_ms"] - T0, strict=True)) == [
        (5_000, 10_000), (10_000, 10_000), (10_000, 20_000)]
    assert not (exp.frame["window_end_ms"] == T0 + 30_000).any(), "its maximum's bid was dropped by the join"
    b = real[real["nx_type"] == nx.BID]
    join_late = int(((b["batch"] == 2) & (b["event_time_ms"] <= wm0)).sum())
    assert join_late > 0 and exp.dropped_late == join_late   # no pair of a closed window was read late
    assert oracle.check(truth, _sink(exp.frame[list(queries.QUERIES["q7"].columns)]), batches,
                        {**PARAMS, "query": "q7"}).counts["lost"] == 0


def test_q15_counts_bids_bidders_and_auctions_per_price_rank():
    """Five bids on one day, hand-counted: prices 5,000 and 7,000 rank 1, 20,000 rank 2,
    2,000,000 rank 3; bidder 1 bids twice in rank 1 on two auctions."""
    rows = [(1, 10, 5_000), (1, 11, 7_000), (2, 10, 20_000), (3, 12, 2_000_000), (2, 12, 20_000)]
    kept = pd.DataFrame(rows, columns=["bidder", "auction", "price"]).assign(
        window_start_ms=0, window_end_ms=1
    )
    got = oracle._day_counts(kept, ["window_start_ms", "window_end_ms"]).iloc[0]
    want = {
        "total_bids": 5,
        "rank1_bids": 2,
        "rank2_bids": 2,
        "rank3_bids": 1,
        "total_bidders": 3,
        "rank1_bidders": 1,
        "rank2_bidders": 1,
        "rank3_bidders": 1,
        "total_auctions": 3,
        "rank1_auctions": 2,
        "rank2_auctions": 2,
        "rank3_auctions": 1,
    }
    assert {k: int(got[k]) for k in want} == want


def test_the_check_reads_each_truth_column_once():
    """Nexmark's extra columns added to the checker's own, none twice (a duplicated append_ms
    made truth["append_ms"] a frame, and the run's metrics failed with a harness error)."""
    from harness import check
    from harness.scenario.model import Pipeline

    columns = check.truth_columns(Pipeline(kind="nexmark"))
    assert columns is not None and len(columns) == len(set(columns))
    assert {"append_ms", "nx_type", "price", "seller"} <= set(columns)


def test_fields_stay_integers_when_truth_has_parts_without_them():
    """The control events' truth parts carry no Nexmark columns, so read together the ids are
    floats with NaN: q13's side-input value came out '1000.0' against Spark's '1000' (every
    row lost and unexpected), and q11's session key '1000.0' failed the checker."""
    truth = _truth(2000)
    control = pd.DataFrame({"event_id": [-1], "event_time_ms": [T0], "partition": [0], "offset": [2000],
                            "append_ms": [T0], "control": [True]})
    truth = pd.concat([truth, control], ignore_index=True)   # nx_type, auction, ... NaN there
    batches = _batches(truth, -1) + [Batch(2, T0 + 86_400_000 * 2, {0: len(truth)}, True)]
    for name in ("q11", "q13"):
        exp = oracle.oracle_of(name)(oracle.real_events(truth, batches), batches, {**PARAMS, "query": name})
        rows = exp.frame[list(queries.QUERIES[name].columns)]
        counts = oracle.check(truth, _sink(rows), batches, {**PARAMS, "query": name}).counts
        assert counts["lost"] == counts["unexpected"] == 0, (name, counts)
    value = oracle.q13(oracle.real_events(truth, batches), batches, {**PARAMS, "query": "q13"}).frame["value"]
    assert not value.str.contains(".", regex=False).any()


def test_the_watermark_rule_is_checked_where_it_holds():
    """A windowed query's filters stay above withWatermark, so its watermark is the newest
    event time read minus the delay, and a batch off by a second is a problem; a stateless
    query's own filters go below it (q14's first run: 13 of 22 batches 4-123 ms behind), and
    its watermark is not judged."""
    truth = _truth()
    half = len(truth) // 2
    newest = int(truth["event_time_ms"][:half].max())
    off = [Batch(0, 0, {0: half}, True), Batch(1, newest - 4_000 - 1_000, {0: len(truth)}, True)]
    def empty(name: str) -> pd.DataFrame:
        return _sink(pd.DataFrame(columns=list(queries.QUERIES[name].columns)))

    windowed = oracle.check(truth, empty("q12"), off, {**PARAMS, "query": "q12"})
    assert any("watermark is not the declared one" in p for p in windowed.problems)
    stateless = oracle.check(truth, empty("q14"), off, {**PARAMS, "query": "q14"})
    assert not any("watermark" in p for p in stateless.problems)


def test_windows_the_flush_closed_have_no_latency():
    """q12's windows that only the harness's end-of-run flush closed became visible before their
    end in wall-clock time: they were half its rows, and the table printed a p50 of 0. Only the
    windows the workload's own events closed are timed; a stateless query's every row is."""
    truth = _truth()
    newest = int(truth["event_time_ms"].max())
    batches = _batches(truth, -1) + [Batch(2, newest + 86_400_000, {0: len(truth)}, True)]
    exp = oracle.q12(oracle.real_events(truth, batches), batches, {**PARAMS, "query": "q12"})
    sink = _sink(exp.frame[list(queries.QUERIES["q12"].columns)])
    result = oracle.check(truth, sink, batches, {**PARAMS, "query": "q12"})
    closable = int((exp.frame["endtime_ms"] <= newest - PARAMS["watermark_ms"]).sum())
    assert 0 < len(result.event_time_latency_ms) == closable < len(exp.frame)
    exp0 = oracle.oracle_of("q0")(oracle.real_events(truth, batches), batches, {**PARAMS, "query": "q0"})
    q0 = oracle.check(truth, _sink(exp0.frame[list(queries.BID_COLUMNS)]), batches, {**PARAMS, "query": "q0"})
    assert len(q0.event_time_latency_ms) == len(exp0.frame)


class TestQueryOwnsItsFacts:
    """A Query carries its watermark rule, how far its results close and its oracle, registered
    once with it (workloads/pipelines/nexmark.py), and the oracle module keeps no table of its own."""

    @pytest.mark.parametrize("name", sorted(queries.QUERIES))
    def test_each_query_names_an_oracle_that_exists(self, name):
        """Query.oracle is "module:function" in harness/check/nexmark.py, under the query's name."""
        q = queries.QUERIES[name]
        assert q.oracle == f"harness.check.nexmark:{name}"
        assert callable(oracle.oracle_of(name))

    def test_the_watermark_rule_holds_for_the_windowed_and_day_long_queries(self):
        """The one-input rule: the queries whose every filter names the event time."""
        ruled = {n for n, q in queries.QUERIES.items() if q.watermark_rule}
        assert ruled == {"q4", "q5", "q6", "q7", "q8", "q9", "q11", "q12", "q15", "q16", "q17", "q19"}

    def test_each_query_says_how_far_past_the_newest_event_its_outputs_close(self):
        """Windows by the window, q11 by its gap, the day-long counts by a day; stateless queries and
        the joins without a time bound never close."""
        reach = {n: q.reach_ms(PARAMS) for n, q in queries.QUERIES.items()}
        day = 86_400_000
        assert (reach["q5"], reach["q11"], reach["q15"], reach["q4"]) == (10_000, 10_000, day, day)
        assert reach["q0"] is reach["q3"] is reach["q18"] is reach["q20"] is None
        assert oracle.final_watermark_ms(1_000, {**PARAMS, "query": "q5"}) == 11_001
        assert oracle.final_watermark_ms(1_000, {**PARAMS, "query": "q20"}) is None

    def test_a_query_registered_twice_is_refused(self):
        """Registered once: a second @query of the same name raises."""
        with pytest.raises(ValueError, match="q5 is registered twice"):
            queries.query("q5", {})(lambda v, params: None)
