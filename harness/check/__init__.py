"""The checker: what the sink holds against ground truth, through each pipeline's oracle.

  checkpoint.py   Spark's offset and commit logs: which batch read which offsets, and its watermark
  batch_reads.py  Spark's rules on ground truth: each event's batch, late watermarks
  watermark.py    the independent watermark oracle: what each batch's watermark must be
  events.py       event-by-event accounting (Jepsen's total queue): lost, duplicated, unexpected
  rows.py         row-by-row accounting of a keyed output (sessions, rankings, a custom oracle)
  windows.py passthrough.py ...   one oracle per built-in pipeline kind
  custom.py       a scenario's own oracle, or event-by-event accounting without one
  large.py large_windows.py sweep.py   a large run's check from its files, in slices

An oracle module has `check(truth, sink, batches, params)` returning a CheckResult (a
pipeline's `sliced`, in harness/check/registry.py, names its check of a large run from its files), and
`final_watermark_ms(max_event_time_ms, params)`: the watermark at which all of a run's
output is final (None for a pipeline without a watermark: its output is final once its
batches have read every offset), so the runner knows when the pipeline has drained.
Each built-in pipeline names its oracle in harness/check/registry.py, its one registration.
"""

from __future__ import annotations

import pandas as pd

from harness.check import large, registry, watermark
from harness.check.checkpoint import Batch
from harness.check.large import RunFiles
from harness.check.result import CheckResult

# the ground-truth columns the built-in oracles and the run's metrics read; a pipeline whose
# oracle needs more declares them (harness/check/registry.py extra_truth_columns)
TRUTH_COLUMNS = ("event_id", "key", "event_time_ms", "sent_ms", "partition", "offset", "append_ms",
                 "amount", "control")


def truth_columns(pipeline) -> list[str] | None:
    """The columns of ground truth the case's check needs (None: all of them, for a custom oracle)."""
    entry = registry.of(pipeline)
    if isinstance(entry, registry.CustomPipeline):
        return None
    return list(dict.fromkeys([*TRUTH_COLUMNS, *entry.extra_truth_columns]))   # each once


def check(pipeline, truth: pd.DataFrame, sink: pd.DataFrame, batches: list[Batch],
          files: RunFiles | None = None) -> CheckResult:
    """The case's output against ground truth, and its watermark against the declared one.
    With the run's `files`, a large run (large.LARGE_ROWS truth rows or more) of a pipeline
    with a sliced oracle is checked from them instead, in bounded memory."""
    entry = _in_case(registry.of(pipeline), None if files is None else files.truth_dir.parent)
    scaled = _from_files(entry, pipeline, files, batches)
    if scaled is not None:
        return scaled
    result = entry.check(truth, sink, batches, pipeline)
    if pipeline.values.get("watermark_ms") is not None and entry.watermark_oracle:
        result = result.with_problems(watermark.check(truth, batches, pipeline.watermark_ms))
    return result


def checks_from_files(pipeline, files: RunFiles) -> bool:
    """Whether check() will read this run from its files (large, with a sliced oracle): then
    the truth held in memory serves only the measurements and findings, and is read lean."""
    return registry.of(pipeline).check_files() is not None and files.is_large()


def _from_files(entry, pipeline, files: RunFiles | None, batches: list[Batch]) -> CheckResult | None:
    """The check from the run's files, or None: not large, no sliced oracle, or re-sent copies."""
    sliced = entry.check_files()
    if files is None or sliced is None or not files.is_large():
        return None
    try:
        result = sliced(files, batches, pipeline.params())
    except large.Resent:
        return None
    if pipeline.values.get("watermark_ms") is not None and entry.watermark_oracle:
        result = result.with_problems(watermark.check_files(files, batches, pipeline.watermark_ms))
    return result


def final_watermark_ms(pipeline, max_event_time_ms: int, case_dir=None) -> int | None:
    """The watermark at which the pipeline's output is final, None without a watermark
    (`case_dir`: where a job's driver wrote its plan)."""
    return _in_case(registry.of(pipeline), case_dir).final_watermark_ms(max_event_time_ms, pipeline)


def drain_wait(pipeline, case_dir=None) -> str:
    """What the end-of-run drain waits for, in words, for the messages of a drain that ran out."""
    said = _in_case(registry.of(pipeline), case_dir).drain_wait()
    if said:   # a job's plan says which operator's output waits for the watermark
        return f"the watermark past every output of {said}"
    if final_watermark_ms(pipeline, 0, case_dir) is None:
        return "every record read by a committed batch (no operator's output waits for the watermark)"
    return "the watermark past the last window end"


def _in_case(entry, case_dir):
    """The entry bound to its case's directory (a job reads its plan and runs its batch oracle there)."""
    return entry.in_case(case_dir) if case_dir is not None else entry
