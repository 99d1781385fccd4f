"""The oracle of `order_payment_join`: the exact pairs and unpaid orders, from ground truth.

Spark 4.2's stream-stream join drops a row of either side as late when its event time <=
the previous batch's watermark (the global one: the minimum of the two sides'), and counts
it in numRowsDroppedByWatermark. A row that is not late always finds its partner still
in state: an order leaves the state only once the watermark passes its time + bound, and a
payment that could still pay it would then be late. So the output is the join of the rows
that are not late, each side read through its own source's offsets, plus every order
that is not late and has no partner, with nulls. Control events never match (no user)
and their null rows are set aside.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.check import rows
from harness.check.batch_reads import assign_batches, late_watermarks
from harness.check.checkpoint import Batch, for_source
from harness.check.result import CheckResult
from workloads.pipelines.order_payment_join import COLUMNS, ORDER, PAYMENT

KEY = ["order_id", "payment_id"]
UNPAID = -1                # the payment columns of an unpaid order (null in the sink)


def _read(truth: pd.DataFrame, batches: list[Batch], kind: str,
          source: int) -> tuple[pd.DataFrame, np.ndarray]:
    """The side's rows (the harness's control events are rows of both sides) that a committed
    batch read, each with `batch`, and whether Spark dropped each as late."""
    mine = truth[(truth["event_type"] == kind) | truth["control"]]
    own = for_source(batches, source)
    batch = assign_batches(mine, own).to_numpy()
    marks = late_watermarks(own)
    mark = np.array([marks.get(b, -1) for b in batch], dtype=np.int64)
    late = (batch >= 0) & (mine["event_time_ms"].to_numpy() <= mark)
    return mine.assign(batch=batch)[batch >= 0], late[batch >= 0]


def _side(truth: pd.DataFrame, batches: list[Batch], kind: str, source: int) -> tuple[pd.DataFrame, int, int]:
    """The side's real rows read by a committed batch and not late; how many of its rows
    were late (Spark counts the control events' too), and how many of those were real events."""
    read, late = _read(truth, batches, kind, source)
    real = ~read["control"].to_numpy()
    return read[~late & real], int(late.sum()), int((late & real).sum())


# the join's state, as the state data source reads each side's keyWithIndexToValue store
# (harness/check/state_check.py): the rows each side buffers, per join key
SIDES = {"left": (ORDER, 0, "o"), "right": (PAYMENT, 1, "p")}
# each side's row is named as the output names it, so that a divergence's key finds its sink rows
NAMED = {"left": {"id": "order_id", "time_ms": "order_time_ms"},
         "right": {"id": "payment_id", "time_ms": "payment_time_ms"}}


def state_after(truth: pd.DataFrame, batches: list[Batch], bound_ms: int,
                batch_id: int) -> dict[str, pd.DataFrame]:
    """Each side's buffered rows after committed batch `batch_id`, by Spark's rules
    (StreamingSymmetricHashJoinExec, StreamingJoinHelper.getStateValueWatermark): side ->
    one row per (user_id, order_id, order_time_ms) or (user_id, payment_id, payment_time_ms), with
    `copies` (a re-sent record is buffered again) and `matched`, whether a row of the other side
    has joined it yet.

    A side buffers every row a batch up to N read and did not drop as late (the control events
    too: their user is -1), until batch N's watermark W evicts it. The condition `p_time >=
    o_time AND p_time <= o_time + bound` solves to a state watermark per side, and Spark
    removes a row whose time <= it: the orders' is W - bound - 1 (a payment after W can still
    pay an order from W - bound on), the payments' W - 1 (an order after W pays no earlier
    payment). A row already behind it when read is joined, never buffered: the same rows."""
    water = {b.batch_id: b.watermark_ms for b in batches}.get(batch_id, -1)
    keep_from = {"left": water - bound_ms, "right": water}
    read = {}
    for side, (kind, source, _prefix) in SIDES.items():
        rows_, late = _read(truth, batches, kind, source)
        rows_ = rows_[~late & (rows_["batch"].to_numpy() <= batch_id)]
        user = rows_["user"].fillna(-1).astype("int64")
        read[side] = pd.DataFrame({"user_id": np.where(rows_["control"], -1, user),
                                   "id": rows_["event_id"].astype("int64").to_numpy(),
                                   "time_ms": rows_["event_time_ms"].astype("int64").to_numpy()})
    out = {}
    for side, rows_ in read.items():
        kept = rows_[rows_["time_ms"] >= keep_from[side]]
        out[side] = kept.groupby(["user_id", "id", "time_ms"]).size().rename("copies").reset_index()
    # a pair sets `matched` on both rows, whichever came first (the other was still buffered)
    pairs = read["left"].merge(read["right"], on="user_id", suffixes=("_o", "_p"))
    gap = pairs["time_ms_p"] - pairs["time_ms_o"]
    pairs = pairs[(gap >= 0) & (gap <= bound_ms)]
    for side, suffix in (("left", "_o"), ("right", "_p")):   # a control event pays its own copy too
        matched = out[side]["id"].isin(pairs[f"id{suffix}"])
        out[side] = out[side].assign(matched=matched).rename(columns=NAMED[side])
    return out


def expected(truth: pd.DataFrame, batches: list[Batch], bound_ms: int) -> tuple[pd.DataFrame, int, int]:
    """The output rows; the late rows of both sides, as Spark counts them, and the late events."""
    orders, rows_o, late_o = _side(truth, batches, ORDER, 0)
    payments, rows_p, late_p = _side(truth, batches, PAYMENT, 1)
    # every record joins, a re-sent copy too: its pairs come out once more
    fields = ["event_id", "user", "event_time_ms"]
    o = orders[fields].set_axis(["order_id", "user_id", "order_time_ms"], axis=1)
    p = payments[fields].set_axis(["payment_id", "user_id", "payment_time_ms"], axis=1)
    pairs = o.merge(p, on="user_id")
    pairs = pairs[(pairs["payment_time_ms"] >= pairs["order_time_ms"])
                  & (pairs["payment_time_ms"] <= pairs["order_time_ms"] + bound_ms)]
    unpaid = o[~o["order_id"].isin(pairs["order_id"])].assign(payment_id=UNPAID, payment_time_ms=UNPAID)
    out = pd.concat([pairs, unpaid], ignore_index=True)[list(COLUMNS)]
    return out.astype("int64"), rows_o + rows_p, late_o + late_p


def check(truth: pd.DataFrame, sink: pd.DataFrame, batches: list[Batch], params: dict) -> CheckResult:
    want, late_rows, late_events = expected(truth, batches, params["bound_ms"])
    control_ids = truth.loc[truth["control"], "event_id"]
    got = sink[~sink["order_id"].isin(control_ids)]
    got = got.assign(**{c: got[c].fillna(UNPAID).astype("int64") for c in COLUMNS})
    produced = int((~truth["control"]).sum())
    result = rows.check(want, got, KEY, produced, late_events, time_col=None)
    result.counts["dropped_late_spark"] = late_rows
    return result


def final_watermark_ms(max_event_time_ms: int, params: dict) -> int:
    """Every unpaid order comes out once the watermark passes its time + bound."""
    return max_event_time_ms + params["bound_ms"] + 1
