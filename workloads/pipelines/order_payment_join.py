"""Orders joined with their payments: a stream-stream left outer join with watermarks
and a time bound (the seeds' "unpaid order after 15 minutes").

An order (type "order") is paid by a payment (type "payment") of the same user whose
event time is within `bound` after the order's. Each (order, payment) pair comes out as
soon as both have arrived; an order still unpaid when the watermark passes its time +
`bound` comes out once, with nulls for the payment.

Both sides read the one topic: Spark runs the self-join as two sources (two lines per
batch in the offset log) and two watermarks, and takes their minimum. The harness's
control events pass both filters, so that its flush moves both watermarks.
"""

from __future__ import annotations

from workloads.pipelines.params import BOUND, WATERMARK
from workloads.wire import CONTROL_KEY

NAME = "order_payment_join"
PARAMS = (BOUND, WATERMARK)
COLUMNS = {"order_id": "LONG", "user_id": "LONG", "order_time_ms": "LONG", "payment_id": "LONG",
           "payment_time_ms": "LONG"}
SOURCES = 2          # the offset log holds one line per side: orders first, then payments
ORDER, PAYMENT = "order", "payment"


def _side(events, kind: str, prefix: str, watermark_ms: int):
    from pyspark.sql import functions as F

    mine = events.where((F.col("type") == kind) | (F.col("key") == CONTROL_KEY))
    return mine.withWatermark("event_time", f"{watermark_ms} milliseconds").select(
        F.col("event_id").alias(f"{prefix}_id"),
        # a control event has no user: -1, not null, or Spark infers `user IS NOT NULL` from the
        # join key and pushes it below the payments' watermark, which then never sees the flush
        F.coalesce(F.expr("cast(substring(user, 2) as long)"), F.lit(-1)).alias(f"{prefix}_user"),
        F.col("event_time").alias(f"{prefix}_time"),
        F.col("event_time_ms").alias(f"{prefix}_time_ms"))


def build(events, params: dict):
    from pyspark.sql import functions as F

    orders = _side(events, ORDER, "o", params["watermark_ms"])
    payments = _side(events, PAYMENT, "p", params["watermark_ms"])
    bound = f"interval {params['bound_ms']} milliseconds"
    paid = F.expr(f"o_user = p_user AND p_time >= o_time AND p_time <= o_time + {bound}")
    joined = orders.join(payments, paid, "leftOuter")
    return joined.select(F.col("o_id").alias("order_id"), F.col("o_user").alias("user_id"),
                         F.col("o_time_ms").alias("order_time_ms"), F.col("p_id").alias("payment_id"),
                         F.col("p_time_ms").alias("payment_time_ms"))
