"""The exits scenario's plug-ins: a query that keeps amounts of 90 or more, and an oracle that
expects 80 or more, so that every run's verdict fails with events lost (exit 1)."""

from __future__ import annotations


def big_spenders(events_df, params):
    from pyspark.sql import functions as F

    return events_df.where(F.col("amount") >= 90).select("partition", "offset", "event_id", "key", "amount")


def too_many_expected(truth_df, batches, params):
    real = truth_df[~truth_df["control"] & (truth_df["amount"] >= 80)]
    return real[["partition", "offset", "event_id", "key", "amount"]]
