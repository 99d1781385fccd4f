"""A user's own code, as docs/pipelines-and-sinks.md, "Your own pipeline and sink", has it:
kept beside the scenario."""

from __future__ import annotations

import time

import pandas as pd


def count_per_window(events_df, params):
    """The user's implementation of tumbling_count, checked by the harness's own oracle."""
    from pyspark.sql import functions as F

    return (events_df.withWatermark("event_time", f"{params['watermark_ms']} milliseconds")
            .groupBy(F.window("event_time", f"{params['window_ms']} milliseconds"), "key")
            .agg(F.count("*").alias("count"), F.sum("amount").alias("sum_amount"))
            .select("key", F.unix_millis("window.start").alias("window_start_ms"),
                    F.unix_millis("window.end").alias("window_end_ms"), "count", "sum_amount"))


def big_spenders(events_df, params):
    """A custom pipeline: the records with an amount of 90 or more, with their key."""
    from pyspark.sql import functions as F

    return events_df.where(F.col("amount") >= 90).select("partition", "offset", "event_id", "key", "amount")


def big_spenders_expected(truth_df, batches, params):
    """Its oracle: every real record with amount >= 90 (a re-sent copy is a record too)."""
    real = truth_df[~truth_df["control"] & (truth_df["amount"] >= 90)]
    return real[["partition", "offset", "event_id", "key", "amount"]]


class JsonLinesSink:
    """A user's sink: one JSON-lines file per batch, written atomically (rename), and a
    marker per batch so that a batch run again is skipped: the author claims exactly-once."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.dir = f"{ctx.workdir}/my-sink"

    def setup(self):
        import os

        os.makedirs(self.dir, exist_ok=True)

    def write(self, batch_df, batch_id):
        import os

        path = f"{self.dir}/batch-{batch_id:09d}.jsonl"
        if os.path.exists(path):
            return
        rows = batch_df.toPandas()
        rows["committed_ms"] = time.time_ns() // 1_000_000
        rows.to_json(path + ".tmp", orient="records", lines=True)
        os.replace(path + ".tmp", path)

    def read(self):
        import glob

        parts = [pd.read_json(p, lines=True) for p in sorted(glob.glob(f"{self.dir}/batch-*.jsonl"))]
        parts = [p for p in parts if len(p)]
        if not parts:
            return pd.DataFrame(columns=[*self.ctx.columns, "committed_ms"])
        return pd.concat(parts, ignore_index=True)

    def close(self):
        pass
