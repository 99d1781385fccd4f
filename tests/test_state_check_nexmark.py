"""The state check on Nexmark's queries (harness/check/nexmark_state.py): what q5's, q7's,
q12's and q17's window aggregation, q11's sessions and q3's join must hold after a batch, which
operator of a query is judged, and a query with no model said, on state frames faked as
workloads/pipelines/state_read.py writes them (their columns are those Spark 4.2's state data
source gave real runs: q5 and q7 in 20261129T122639, q3's join in 20261129T152307). No Spark: the
quick Nexmark scenario runs the check end to end (tests/test_nexmark_e2e.py)."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pandas as pd
import pytest

from harness.check import nexmark_state, state_check
from harness.check.checkpoint import Batch
from harness.scenario.model import Pipeline
from workloads.generator.nexmark import BID

pytestmark = pytest.mark.unit

T0_MS = 1_000_000


def _ms(s: float) -> int:
    return int(T0_MS + s * 1000)


def _bids(rows: list[tuple[int, float, int]]) -> pd.DataFrame:
    """(auction, event time in s, price) per bid, in offset order on partition 0."""
    n = len(rows)
    return pd.DataFrame({"event_id": np.arange(n), "event_time_ms": [_ms(r[1]) for r in rows],
                         "partition": 0, "offset": np.arange(n), "control": False, "nx_type": BID,
                         "auction": [r[0] for r in rows], "price": [r[2] for r in rows],
                         "bidder": [100 + r[0] for r in rows], "channel": "web", "url": "u", "extra": ""})


def _pipeline(query: str) -> Pipeline:
    return Pipeline(kind="nexmark", values=MappingProxyType(
        {"query": query, "window_ms": 2000, "slide_ms": 1000, "watermark_ms": 1000, "gap_ms": 1000}))


# batch 0 reads offsets 0-2, batch 1 offsets 3-4 (its watermark 3.0 s), batch 2 offset 5, a bid
# of 0.5 s: late for the windows that ended at or before batch 1's watermark
BATCHES = [Batch(0, 0, {0: 3}, True, {0: 0}, committed_ms=_ms(1.0)),
           Batch(1, _ms(3.0), {0: 5}, True, committed_ms=_ms(2.0)),
           Batch(2, _ms(3.0), {0: 6}, True, committed_ms=_ms(3.0))]
TRUTH = _bids([(1, 0.2, 10), (1, 0.4, 30), (2, 1.5, 20), (1, 3.2, 5), (2, 3.6, 50), (2, 0.5, 99)])


def _rows(frame: pd.DataFrame, columns: list[str]) -> set[tuple]:
    return set(frame[columns].itertuples(index=False, name=None))


class TestQ5:
    """q5's first aggregation: bids counted per 2 s window sliding by 1 s and auction."""

    def test_after_batch_0_every_window_of_its_bids_is_open(self):
        got = nexmark_state.model("q5").expected(TRUTH, BATCHES, _pipeline("q5").params(), 0)
        assert _rows(got, ["window_start_ms", "auction", "count"]) == {
            (_ms(-1), 1, 2), (_ms(0), 1, 2), (_ms(0), 2, 1), (_ms(1), 2, 1)}

    def test_a_window_the_watermark_closed_is_evicted_and_a_late_bid_counts_nowhere(self):
        """Batch 1's watermark is 3.0 s: every window ending at or before it is gone. Batch 2's
        bid of 0.5 s falls only in windows that ended before batch 1's watermark: dropped."""
        for batch in (1, 2):
            got = nexmark_state.model("q5").expected(TRUTH, BATCHES, _pipeline("q5").params(), batch)
            assert _rows(got, ["window_start_ms", "auction", "count"]) == {
                (_ms(2), 1, 1), (_ms(3), 1, 1), (_ms(2), 2, 1), (_ms(3), 2, 1)}, batch


class TestQ7:
    def test_the_highest_price_of_each_open_window(self):
        got = nexmark_state.model("q7").expected(TRUTH, BATCHES, _pipeline("q7").params(), 0)
        assert _rows(got, ["window_start_ms", "max"]) == {(_ms(0), 30)}   # 1.5 s is in [0, 2) too
        got = nexmark_state.model("q7").expected(TRUTH, BATCHES, _pipeline("q7").params(), 1)
        assert _rows(got, ["window_start_ms", "max"]) == {(_ms(2), 50)}


class TestQ12:
    def test_bids_counted_per_window_and_bidder_and_a_closed_window_gone(self):
        """Bidder 100 + auction. Tumbling 2 s windows: after batch 0 the window [0, 2) holds 101's
        two bids and 102's one; batch 1's watermark (3.0 s) closed it, its bids opened [2, 4); batch
        2's bid of 0.5 s is late."""
        got = nexmark_state.model("q12").expected(TRUTH, BATCHES, _pipeline("q12").params(), 0)
        assert _rows(got, ["window_start_ms", "bidder", "count"]) == {(_ms(0), 101, 2), (_ms(0), 102, 1)}
        for batch in (1, 2):
            got = nexmark_state.model("q12").expected(TRUTH, BATCHES, _pipeline("q12").params(), batch)
            assert _rows(got, ["window_start_ms", "bidder", "count"]) == {(_ms(2), 101, 1), (_ms(2), 102, 1)}


class TestQ17:
    def test_the_nine_buffers_of_each_auction_s_day(self):
        """One day's window holds every bid (no watermark closes it): four counts (all, and the
        price ranks below 10,000, to 1,000,000, above), min, max, avg's double sum and count, sum;
        batch 2's bid of 0.5 s is not late for a window that ends a day later."""
        m = nexmark_state.model("q17")
        cols = ["auction", *m.values]
        got = m.expected(TRUTH, BATCHES, _pipeline("q17").params(), 0)
        assert _rows(got, cols) == {(1, 2, 2, 0, 0, 10, 30, 40.0, 2, 40),
                                    (2, 1, 1, 0, 0, 20, 20, 20.0, 1, 20)}
        got = m.expected(TRUTH, BATCHES, _pipeline("q17").params(), 2)
        assert _rows(got, cols) == {(1, 3, 3, 0, 0, 5, 30, 45.0, 3, 45),
                                    (2, 3, 3, 0, 0, 20, 99, 169.0, 3, 169)}
        assert set(got["window_start_ms"]) == {0} and set(got["window_end_ms"]) == {86_400_000}

    def test_the_state_s_repeated_buffer_names_are_told_apart_by_position(self):
        """q17's value, as Spark 4.2's state data source gave it in a real run (20261129T152307):
        `count` five times and `sum` twice; the reader numbers the repeats."""
        from workloads.pipelines.state_read import unique_names

        names = unique_names(["count", "count", "count", "count", "min", "max", "sum", "count", "sum"])
        assert names == ["count", "count#2", "count#3", "count#4", "min", "max", "sum", "count#5", "sum#2"]
        # Spark matches a field's name regardless of case; a number already a name is skipped
        assert unique_names(["count", "Count", "count#2", "count"]) == [
            "count", "Count#3", "count#2", "count#4"]
        assert {f"value.{n}" for n in names} <= set(nexmark_state.model("q17").names)


class TestQ15Q16Q19:
    def test_the_day_s_counts_by_price_rank_and_its_last_minute(self):
        """Every price of TRUTH is below 10,000 (rank 1); its times are 16 min 40 s past the epoch's
        midnight and a few seconds on: q16's last minute is 00:16."""
        m15, m16 = nexmark_state.model("q15"), nexmark_state.model("q16")
        for batch, n in ((0, 3), (2, 6)):
            got = m15.expected(TRUTH, BATCHES, _pipeline("q15").params(), batch)
            assert _rows(got, ["window_start_ms", *m15.values]) == {(0, n, n, 0, 0)}, batch
            got = m16.expected(TRUTH, BATCHES, _pipeline("q16").params(), batch)
            assert _rows(got, ["channel", *m16.values]) == {("web", "00:16", n, n, 0, 0)}, batch
        assert {"value.buf", "value.buf#8"} <= set(m15.names)   # the distinct counts' bytes: held, not judged

    def test_q19_s_keys_of_each_open_window(self):
        m = nexmark_state.model("q19")
        got = m.expected(TRUTH, BATCHES, _pipeline("q19").params(), 0)
        assert _rows(got, ["window_start_ms", "auction", "present"]) == {(_ms(0), 1, 1), (_ms(0), 2, 1)}
        got = m.expected(TRUTH, BATCHES, _pipeline("q19").params(), 1)
        assert _rows(got, ["window_start_ms", "auction", "present"]) == {(_ms(2), 1, 1), (_ms(2), 2, 1)}


class TestNewestAndRunning:
    def test_q18_holds_each_pair_s_newest_bid(self):
        """Per (bidder, auction) the greatest (time, price, ...): batch 2's bid of 0.5 s is older
        than auction 2's newest (3.6 s), so it changes nothing (q18 drops nothing as late)."""
        cols = ["bidder", "auction", "date_time_ms", "price"]
        got = nexmark_state.newest_state_after(TRUTH, BATCHES, 0)["last"]
        assert _rows(got, cols) == {(101, 1, _ms(0.4), 30), (102, 2, _ms(1.5), 20)}
        got = nexmark_state.newest_state_after(TRUTH, BATCHES, 2)["last"]
        assert _rows(got, cols) == {(101, 1, _ms(3.2), 5), (102, 2, _ms(3.6), 50)}

    @staticmethod
    def _auctions() -> tuple[pd.DataFrame, list[Batch]]:
        """Auction 11 (0.0 s, expires 1.0 s) with bids of 10 and 40, auction 12 (0.1 s, expires
        2.5 s) with a bid of 70, both category 10 and seller 7, all read by batch 0 (watermark 0);
        batches 1 (watermark 1.5 s) and 2 (3.0 s) read nothing more."""
        from workloads.generator.nexmark import AUCTION

        kinds = [AUCTION, AUCTION, BID, BID, BID]
        n = len(kinds)
        truth = pd.DataFrame({
            "event_id": np.arange(n), "event_time_ms": [_ms(t) for t in (0.0, 0.1, 0.2, 0.3, 0.5)],
            "partition": 0, "offset": np.arange(n), "control": False, "nx_type": kinds,
            "auction_id": [11, 12, None, None, None], "expires_ms": [_ms(1.0), _ms(2.5), None, None, None],
            "seller": [7, 7, None, None, None], "category": [10, 10, None, None, None],
            "item_name": "i", "description": "d", "initial_bid": 1, "reserve": 1, "extra": "",
            "auction": [None, None, 11, 12, 11], "bidder": [None, None, 1, 2, 3],
            "price": [None, None, 10, 70, 40]})
        batches = [Batch(0, 0, {0: n}, True, {0: 0}, committed_ms=_ms(1.0)),
                   Batch(1, _ms(1.5), {0: n}, True, committed_ms=_ms(2.0)),
                   Batch(2, _ms(3.0), {0: n}, True, committed_ms=_ms(3.0))]
        return truth, batches

    def test_running_holds_the_auctions_winner_closed_by_the_batch(self):
        """Winner closes an auction when the watermark reaches its expiry; Running then counts
        it: q4 sums the winning prices per category, q6 keeps 0 there and its last 10 prices."""
        truth, batches = self._auctions()
        for batch, q4, q6, recent in ((0, set(), set(), set()), (1, {(10, 1, 40)}, {(7, 1, 0)}, {(7, 40, 1)}),
                                      (2, {(10, 2, 110)}, {(7, 2, 0)}, {(7, 40, 1), (7, 70, 1)})):
            got = nexmark_state.running_state_after("q4", truth, batches, batch)
            assert _rows(got["totals"], ["key", "auctions", "total"]) == q4, batch
            assert not len(got["recent"])   # q4's Running declares it and keeps it empty
            got = nexmark_state.running_state_after("q6", truth, batches, batch)
            assert _rows(got["totals"], ["key", "auctions", "total"]) == q6, batch
            assert _rows(got["recent"], ["key", "price", "copies"]) == recent, batch

    def test_q6_s_last_n_is_the_processor_s(self):
        from workloads.pipelines.nexmark_state import LAST_N

        assert nexmark_state.RUNNING["q6"][1] == LAST_N


class TestTwoProcessors:
    """q4's two transformWithState operators through `check`: Running (operator 0) and Winner
    (operator 1), each told by the variables the reader found, after batch 1 of
    TestNewestAndRunning's auctions (auction 11 closed with 40; auction 12 open, its best 70)."""

    def _case(self, tmp_path: Path, auctions_closed: int) -> Path:
        from workloads.pipelines.state_read import ANSWER

        case = tmp_path / "case"
        (case / "checkpoint" / "state").mkdir(parents=True)
        reads = case / state_check.STATE_DIR
        reads.mkdir()
        pd.DataFrame({"operatorId": [0, 1], "operatorName": [state_check.LOGINS] * 2,
                      "stateStoreName": ["default"] * 2}).to_parquet(reads / "metadata.parquet")
        none = pd.Series([], dtype="int64")
        frames = {
            (0, "totals"): {"key.category": [10], "value.auctions": [auctions_closed], "value.total": [40]},
            (0, "recent"): {"key.category": none, "list_element.price": none},
            (1, "auction"): {"key.id": [12], "value.date_time_ms": [_ms(0.1)],
                             "value.expires_ms": [_ms(2.5)]},
            (1, "best"): {"key.id": [12], "value.bidder": [2], "value.price": [70],
                          "value.bid_date_time_ms": [_ms(0.3)]},
            (1, "pending"): {"key.id": none, "list_element.bidder": none, "list_element.price": none,
                             "list_element.bid_date_time_ms": none},
            (1, "registered-timers"): {"key.id": [12], "expiration_timestamp_ms": [_ms(2.5)]}}
        files = []
        for (op, var), columns in frames.items():
            rows = len(next(iter(columns.values())))
            pd.DataFrame({**columns, "partition_id": pd.Series([0] * rows, dtype="int64")}).to_parquet(
                reads / f"{op}-{var}.parquet")
            files.append({"operator": op, "store": "default", "batch": 1, "var": var,
                          "file": f"{op}-{var}.parquet"})
        answer = {"in_driver": True, "batches": [1], "failed": [], "files": files}
        (reads / ANSWER).write_text(json.dumps(answer))
        return case

    def _check(self, case: Path) -> state_check.Outcome | None:
        truth, batches = TestNewestAndRunning._auctions()
        return state_check.check(case, _pipeline("q4"), truth, batches, [], T0_MS / 1000,
                                 [case / "checkpoint"], wanted={1: "final"})

    def test_winner_and_running_are_each_judged_and_hold(self, tmp_path):
        outcome = self._check(self._case(tmp_path, 1))
        assert outcome is not None and outcome.count == 0, (outcome.diverged, outcome.notes)
        assert sorted((c["operator"], c["store"]) for c in outcome.checked) == [
            (0, "recent"), (0, "totals"), (1, "auction"), (1, "best"), (1, "pending"),
            (1, "registered-timers")]

    def test_running_s_count_one_too_many_is_its_divergence(self, tmp_path):
        outcome = self._check(self._case(tmp_path, 2))
        assert outcome is not None and outcome.count == 1, outcome.diverged
        found = outcome.diverged.iloc[0]
        assert (found["operator"], found["store"], found["column"], found["expected"], found["held"]) == (
            0, "totals", "auctions", "1", "2")


class TestQ11:
    def test_each_bidder_s_open_sessions(self):
        """Gap 1 s. After batch 0: 101's session [0.2, 1.4) of two bids, 102's [1.5, 2.5). Batch 1's
        watermark (3.0 s) closed both; its bids opened [3.2, 4.2) and [3.6, 4.6). Batch 2's bid of
        0.5 s is late."""
        m = nexmark_state.model("q11")
        got = m.expected(TRUTH, BATCHES, _pipeline("q11").params(), 0)
        cols = ["bidder", "session_start_ms", "session_end_ms", "count"]
        assert _rows(got, cols) == {(101, _ms(0.2), _ms(1.4), 2), (102, _ms(1.5), _ms(2.5), 1)}
        for batch in (1, 2):
            got = m.expected(TRUTH, BATCHES, _pipeline("q11").params(), batch)
            assert _rows(got, cols) == {(101, _ms(3.2), _ms(4.2), 1), (102, _ms(3.6), _ms(4.6), 1)}, batch


def _join_truth() -> pd.DataFrame:
    """q3's inputs, one a batch as BATCHES cuts them: auction 11 of seller 7 (category 10) and
    12 of seller 8 (category 3), person 8 of CA (batch 0); person 7 of OR, 9 of NY (batch 1);
    auction 13 of seller 7 (batch 2)."""
    from workloads.generator.nexmark import AUCTION, PERSON

    rows = [(AUCTION, 11, 7, 10, None, None), (AUCTION, 12, 8, 3, None, None),
            (PERSON, None, None, None, 8, "CA"),
            (PERSON, None, None, None, 7, "OR"), (PERSON, None, None, None, 9, "NY"),
            (AUCTION, 13, 7, 10, None, None)]
    n = len(rows)
    return pd.DataFrame({"event_id": np.arange(n), "event_time_ms": [_ms(0.1 * i) for i in range(n)],
                         "partition": 0, "offset": np.arange(n), "control": False,
                         "nx_type": [r[0] for r in rows], "auction_id": [r[1] for r in rows],
                         "seller": [r[2] for r in rows], "category": [r[3] for r in rows],
                         "person_id": [r[4] for r in rows], "name": "Ann", "city": "Boise",
                         "state": [r[5] for r in rows]})


class TestQ8:
    def test_the_people_and_the_sellers_of_each_open_window(self):
        """q8's two aggregations before its join (their keys alone: the join reads no count), on
        _join_truth's rows (2 s windows): after
        batch 0 the people [0, 2) hold person 8 and the sellers [0, 2) sellers 7 and 8 (auction
        12's category does not matter here); batch 1's watermark (3.0 s) closed that window."""
        from harness.check.checkpoint import Batch as B

        truth = _join_truth()
        people, sellers = nexmark_state.models("q8")
        got = people.expected(truth, BATCHES, _pipeline("q8").params(), 0)
        assert _rows(got, ["window_start_ms", "id", "name", "present"]) == {(_ms(0), 8, "Ann", 1)}
        got = sellers.expected(truth, BATCHES, _pipeline("q8").params(), 0)
        assert _rows(got, ["window_start_ms", "seller", "present"]) == {(_ms(0), 7, 1), (_ms(0), 8, 1)}
        assert not len(people.expected(truth, BATCHES, _pipeline("q8").params(), 1))
        # a watermark that closes nothing: batch 1's people 7 and 9 join the window (q8 takes
        # every person, of any state)
        open_ = [B(b.batch_id, 0, b.end_offsets, True, b.start_offsets, committed_ms=b.committed_ms)
                 for b in BATCHES]
        got = people.expected(truth, open_, _pipeline("q8").params(), 1)
        assert _rows(got, ["window_start_ms", "id"]) == {(_ms(0), 8), (_ms(0), 7), (_ms(0), 9)}

    def test_each_operator_is_told_by_its_state_s_columns(self):
        people, sellers = nexmark_state.models("q8")
        assert nexmark_state.matching("q8", [*people.names, "partition_id"]) is people
        assert nexmark_state.matching("q8", [*sellers.names, "partition_id"]) is sellers
        assert nexmark_state.matching("q8", ["key.window.start", "value.count"]) is None
        # held as the reader writes it (run 20261129T153548): keys only, each `present`
        held = pd.DataFrame({"key.window.start": [0, 0, 0], "key.window.end": [2000] * 3,
                             "key._groupingexpression": [7, 8, 8], "partition_id": [0, 0, 1]})
        # a key held twice (in two partitions) is not the one key the model expects
        assert _rows(sellers.held(held), ["seller", "present"]) == {(7, 1), (8, 2)}


class TestQ3Join:
    """q3's unbounded join: every row each side read, `matched` once the other side read its key."""

    def _state(self, batch: int) -> dict[str, set]:
        frames = nexmark_state.join_state_after(nexmark_state.JOINS["q3"], _join_truth(), BATCHES, batch)
        return {store: set(f.itertuples(index=False, name=None)) for store, f in frames.items()}

    def test_a_row_is_buffered_unmatched_until_the_other_side_reads_its_key(self):
        got = self._state(0)
        assert got["left-keyWithIndexToValue"] == {(7, 11, 7, 1, False)}
        assert got["right-keyWithIndexToValue"] == {(8, 8, "Ann", "Boise", "CA", 1, False)}
        assert got["left-keyToNumValues"] == {(7, 1)} and got["right-keyToNumValues"] == {(8, 1)}

    def test_a_key_both_sides_read_is_matched_on_both_and_nothing_leaves(self):
        got = self._state(1)
        assert got["left-keyWithIndexToValue"] == {(7, 11, 7, 1, True)}
        assert got["right-keyWithIndexToValue"] == {(8, 8, "Ann", "Boise", "CA", 1, False),
                                                     (7, 7, "Ann", "Boise", "OR", 1, True)}
        got = self._state(2)
        assert got["left-keyWithIndexToValue"] == {(7, 11, 7, 1, True), (7, 13, 7, 1, True)}
        assert got["left-keyToNumValues"] == {(7, 2)}

    def _case(self, tmp_path: Path, matched: bool) -> Path:
        """q3's four stores after batch 1 as the reader writes them (their columns those of the
        real run 20261129T152307), the left row's `matched` as given."""
        from workloads.pipelines.state_read import ANSWER

        case = tmp_path / "case"
        (case / "checkpoint" / "state").mkdir(parents=True)
        reads = case / state_check.STATE_DIR
        reads.mkdir()
        stores = ["left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues",
                  "right-keyWithIndexToValue"]
        pd.DataFrame({"operatorId": [0] * 4, "operatorName": [state_check.JOIN] * 4,
                      "stateStoreName": stores}).to_parquet(reads / "metadata.parquet")
        frames = {
            "left-keyToNumValues": {"key.field0": [7], "value.value": [1]},
            "left-keyWithIndexToValue": {"key.field0": [7], "key.index": [0], "value.a_id": [11],
                                         "value.seller": [7], "value.matched": [matched]},
            "right-keyToNumValues": {"key.field0": [8, 7], "value.value": [1, 1]},
            "right-keyWithIndexToValue": {"key.field0": [8, 7], "key.index": [0, 0], "value.p_id": [8, 7],
                                          "value.name": ["Ann", "Ann"], "value.city": ["Boise", "Boise"],
                                          "value.state": ["CA", "OR"], "value.matched": [False, True]}}
        files = []
        for store, columns in frames.items():
            pd.DataFrame({**columns, "partition_id": 0}).to_parquet(reads / f"{store}.parquet")
            files.append({"operator": 0, "store": store, "batch": 1, "file": f"{store}.parquet"})
        answer = {"in_driver": True, "batches": [1], "failed": [], "files": files}
        (reads / ANSWER).write_text(json.dumps(answer))
        return case

    def _check(self, case: Path) -> state_check.Outcome | None:
        return state_check.check(case, _pipeline("q3"), _join_truth(), BATCHES, [], T0_MS / 1000,
                                 [case / "checkpoint"], wanted={1: "final"})

    def test_the_four_stores_are_judged_and_hold(self, tmp_path):
        outcome = self._check(self._case(tmp_path, True))
        assert outcome is not None and outcome.count == 0, (outcome.diverged, outcome.notes)
        stores = ("keyToNumValues", "keyWithIndexToValue")
        assert sorted(c["store"] for c in outcome.checked) == sorted(
            [f"{side}-{store}" for side in ("left", "right") for store in stores])

    def test_a_row_not_marked_matched_is_a_divergence_of_its_store(self, tmp_path):
        outcome = self._check(self._case(tmp_path, False))
        assert outcome is not None and outcome.count == 1, outcome.diverged
        found = outcome.diverged.iloc[0]
        assert (found["store"], found["column"], found["expected"], found["held"]) == (
            "left-keyWithIndexToValue", "matched", "True", "False")


def _case(tmp_path: Path, count_of_auction_1: int) -> Path:
    """q5's reads after batch 1 as the driver writes them: two aggregations, the second (the hot
    items' max and list) first in Spark's numbering, as in the real run."""
    from workloads.pipelines.state_read import ANSWER

    case = tmp_path / "case"
    (case / "checkpoint" / "state").mkdir(parents=True)
    reads = case / state_check.STATE_DIR
    reads.mkdir()
    pd.DataFrame({"operatorId": [0, 1], "operatorName": [state_check.AGGREGATE] * 2}).to_parquet(
        reads / "metadata.parquet")
    pd.DataFrame({"key.window.start": [], "key.window.end": [], "value.max": [], "value.buf": [],
                  "partition_id": []}).to_parquet(reads / "op0.parquet")
    held = [(2, 1, count_of_auction_1), (3, 1, 1), (2, 2, 1), (3, 2, 1)]
    pd.DataFrame({"key.window.start": [_ms(h[0]) for h in held],
                  "key.window.end": [_ms(h[0] + 2) for h in held], "key.auction": [h[1] for h in held],
                  "value.count": [h[2] for h in held],
                  "partition_id": 0}).to_parquet(reads / "op1.parquet")
    files = [{"operator": op, "batch": 1, "file": f"op{op}.parquet"} for op in (0, 1)]
    (reads / ANSWER).write_text(json.dumps({"in_driver": True, "batches": [1], "failed": [], "files": files}))
    return case


class TestCheck:
    def _check(self, case: Path, query: str = "q5") -> state_check.Outcome | None:
        return state_check.check(case, _pipeline(query), TRUTH, BATCHES, [], T0_MS / 1000,
                                 [case / "checkpoint"], wanted={1: "final"})

    def test_the_count_aggregation_is_judged_and_holds(self, tmp_path):
        outcome = self._check(_case(tmp_path, 1))
        assert outcome is not None and outcome.count == 0, outcome.diverged
        assert [(c["operator"], c["batch"], c["keys"]) for c in outcome.checked] == [(1, 1, 4)]
        assert any("operator 0 (stateStoreSave)" in n for n in outcome.notes), outcome.notes

    def test_a_count_one_short_is_a_divergence_of_that_operator_key_and_batch(self, tmp_path):
        outcome = self._check(_case(tmp_path, 0))
        assert outcome is not None and outcome.count == 1, outcome.diverged
        found = outcome.diverged.iloc[0]
        assert (found["operator"], found["batch"], found["column"], found["expected"], found["held"]) == (
            1, 1, "count", "1", "0")
        assert found["key"] == f"window_start_ms={_ms(2)} window_end_ms={_ms(4)} auction=1"

    def test_every_stateful_query_has_a_model_and_one_without_is_said(self, tmp_path):
        """Each stateful query of workloads/pipelines/nexmark.py has a model of at least one of its
        operators; a query registered later without one is said unchecked before any read."""
        from workloads.pipelines import nexmark

        case = _case(tmp_path, 0)
        stateful = [q for q, spec in nexmark.QUERIES.items() if not spec.stateless]
        assert len(stateful) == 15, stateful
        for query in stateful:
            assert state_check.unmodelled(case, _pipeline(query), [case / "checkpoint"]) is None, query
        said = nexmark_state.unmodelled("q99")
        assert said.startswith("not checked: no model of Nexmark q99's state") and "Running (q4, q6)" in said

    def test_a_stateless_query_is_not_the_check_s(self):
        assert not state_check.applies(_pipeline("q0"))
        assert state_check.applies(_pipeline("q5")) and state_check.applies(_pipeline("q9"))


class TestWinner:
    """q9's Winner state (nexmark_state.py `winner_state_after`) against the processor itself,
    driven batch by batch through tests/test_nexmark_state.py's stand-in for Spark's handle: after
    each batch but the flush, every state variable and the registered timers are the model's."""

    @staticmethod
    def _held(op) -> dict[str, set]:
        held: dict[str, set] = {"auction": set(), "best": set(), "pending": set(), "registered-timers": set()}
        for (key,), (_, handle) in op.keys.items():
            auction, best, pending = (handle.states.get(n) for n in ("auction", "best", "pending"))
            if auction is not None and auction.exists():
                held["auction"].add((key, auction.v[5], auction.v[6]))
            if best is not None and best.exists():
                held["best"].add((key, best.v[0], best.v[1], best.v[2]))
            if pending is not None:
                held["pending"] |= {(key, b[0], b[1], b[2], pending.v.count(b)) for b in pending.v}
            held["registered-timers"] |= {(key, t, 1) for t in handle.timers}
        return held

    @pytest.mark.parametrize("sizes", [[400] * 10, [1000, 37, 2963]], ids=["ten", "uneven"])
    def test_the_model_holds_what_the_processor_holds_after_each_batch(self, sizes):
        from tests import test_nexmark_state as tns
        from workloads.generator import nexmark as nx
        from workloads.pipelines import nexmark_state as tws

        truth = tns._truth(sum(sizes), 200.0, 3, 3_000)
        cuts = tns._cut(truth, sizes)[:-1]   # not the flush: it closes every auction
        batches = [b for b, _ in cuts]
        op, late_wm = tns._Operator(tws.Winner, event_time=True), -1
        for batch, part in cuts:
            op.batch([tns._winner_input(r) for r in tns._rows(part, (nx.AUCTION, nx.BID))], late_wm,
                     batch.watermark_ms)
            late_wm = batch.watermark_ms
            model = nexmark_state.winner_state_after(truth, batches, batch.batch_id)
            got = {var: set(frame.itertuples(index=False, name=None)) for var, frame in model.items()}
            assert got == self._held(op), batch.batch_id
        assert got["auction"] and got["best"] and got["registered-timers"]   # something was open
