"""The state check on Nexmark's queries (harness/check/nexmark_state.py): what q5's and q7's
window aggregation must hold after a batch, which operator of a query is judged, and a query with
no model said, on state frames faked as workloads/pipelines/state_read.py writes them (their
columns are those Spark 4.2's state data source gave a real q5 and q7 run, 20261129T122639). No
Spark: the quick Nexmark scenario runs the check end to end (tests/test_nexmark_e2e.py)."""

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
                         "auction": [r[0] for r in rows], "price": [r[2] for r in rows]})


def _pipeline(query: str) -> Pipeline:
    return Pipeline(kind="nexmark", values=MappingProxyType(
        {"query": query, "window_ms": 2000, "slide_ms": 1000, "watermark_ms": 1000}))


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

    def test_a_query_without_a_model_is_said_and_nothing_is_judged(self, tmp_path):
        case = _case(tmp_path, 0)
        assert state_check.unmodelled(case, _pipeline("q11"), [case / "checkpoint"]).startswith(
            "not checked: no model of Nexmark q11's state")
        assert state_check.unmodelled(case, _pipeline("q9"), [case / "checkpoint"]) is None
        outcome = self._check(case, "q11")
        assert outcome is not None and outcome.count == 0 and not outcome.checked
        assert "q11" in outcome.notes[0]

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
