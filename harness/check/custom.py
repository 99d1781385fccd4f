"""A scenario's own pipeline: its oracle's rows matched by its key, or, without an oracle,
every event checked one by one by its event_id.

The oracle is called as oracle(truth_df, batches, params) and returns the expected rows as
a pandas DataFrame with the pipeline's columns:
  truth_df   every record the generator sent: event_id, key, event_time_ms, amount, user,
             item, event_type, partition, offset, append_ms, ..., `control` (True for the
             harness's own control events) and `batch` (the committed batch that read it,
             -1 for none)
  batches    the checkpoint's batches in order (harness.check.checkpoint.Batch: batch_id,
             watermark_ms, end_offsets, committed, start_offsets, query)
  params     the pipeline's keys in milliseconds and counts
"""

from __future__ import annotations

import pandas as pd

from harness.check import events, rows
from harness.check.batch_reads import assign_batches
from harness.check.checkpoint import Batch
from harness.check.result import CheckResult
from harness.errors import ScenarioError
from workloads import plugins


def check(pipeline, truth: pd.DataFrame, sink: pd.DataFrame, batches: list[Batch]) -> CheckResult:
    truth = truth.assign(batch=assign_batches(truth, batches))
    real = truth[~truth["control"]]
    columns = list(pipeline.columns)
    if pipeline.oracle is None:
        ours = sink["event_id"].isin(truth.loc[truth["control"], "event_id"])
        return events.check(real, sink[~ours], [], len(real))
    fn = plugins.function(pipeline.oracle, "pipeline.oracle", ("truth_df", "batches", "params"))
    expected = fn(truth.copy(), list(batches), pipeline.params())
    if not isinstance(expected, pd.DataFrame):
        raise ScenarioError(f"pipeline.oracle {pipeline.oracle} returned {type(expected).__name__}",
                            f"return a pandas DataFrame with the columns {columns}")
    missing = [c for c in columns if c not in expected.columns]
    if missing:
        raise ScenarioError(f"pipeline.oracle {pipeline.oracle} returned columns {list(expected.columns)}, "
                            f"without {missing}", f"return the pipeline's columns {columns}")
    return rows.check(expected[columns], sink, list(pipeline.key), len(real))
