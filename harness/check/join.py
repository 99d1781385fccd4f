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


def _side(truth: pd.DataFrame, batches: list[Batch], kind: str, source: int) -> tuple[pd.DataFrame, int, int]:
    """The side's real rows read by a committed batch and not late; how many of its rows
    were late (the harness's control events are rows of both sides: Spark counts them),
    and how many of those were real events."""
    mine = truth[(truth["event_type"] == kind) | truth["control"]]
    own = for_source(batches, source)
    batch = assign_batches(mine, own).to_numpy()
    marks = late_watermarks(own)
    mark = np.array([marks.get(b, -1) for b in batch], dtype=np.int64)
    late = (batch >= 0) & (mine["event_time_ms"].to_numpy() <= mark)
    real = ~mine["control"].to_numpy()
    return mine[(batch >= 0) & ~late & real], int(late.sum()), int((late & real).sum())


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
