"""`oracle = "batch"`: the job's own function, run by Spark as a batch over exactly the records
the stream read, is the expected output. Nobody writes an oracle.

Structured Streaming's promise is that a query's result equals the same query run as a batch
over the same input, apart from what the watermark lets it drop (Spark's own StreamTest
checks it so). After the case, the harness:
  1. takes the records the committed batches read, each once (job_input.py), and which of
     them came later than their batch's watermark;
  2. runs the job's function as a batch over them, in a Spark process of its own
     (spark_run.py -> workloads/pipelines/job_batch.py): over all of them, or without the
     late ones when the plan's operators drop a late record whole; with and without them when
     a late record's fate depends on the operator's state (windows, sessions, joins, state);
  3. compares the result with the sink as multisets (multiset.py): for an update-mode job,
     the sink's final table against the batch's result per key; where late records' fate is
     unknown, only the outputs no late record could touch (`untouched`), the rest left out
     and counted (`left_out`, said in the verdict).
What it cannot see: a bug in the job's own logic is in the batch run too (docs/your-job.md).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from harness.check import multiset, upserts
from harness.check.batch_oracle import foreach_tables, job_result, spark_run
from harness.check.batch_oracle.job_input import EXACT, PARTIAL, WHOLE, Input
from harness.check.checkpoint import Batch
from harness.check.result import CheckResult
from workloads.pipelines.job import read_plan
from workloads.sinks.upsert import history_of

ROWS = "rows"
BACKWARDS = "backwards.parquet"   # in <case>/oracle/: upsert writes that went back (findings/backwards.py)
# in <case>/oracle/: the job's answer over the records batches 0 to N read, one per batch N the
# case's driver read the state after mid-run (harness/check/state_check.py checks the state there)
STATE_AFTER = "state-after-"
UNKNOWN_REACH_MS = 3_600_000   # how far the drain waits past the last record, for a stateful query


@dataclass(frozen=True)
class JobPipeline:
    """The registry's entry for `kind = "job"` (harness/check/registry.py `of`): bound to its case's
    directory (`in_case`) to read the driver's plan and to run the batch oracle there."""

    pipeline: object
    case_dir: Path | None = None
    name: str = "job"
    delivered_weight: str | None = None
    extra_truth_columns: tuple[str, ...] = ()
    watermark_oracle: bool = False     # the job's watermark is its own; the plan says it
    unit: str = ROWS

    def in_case(self, case_dir: Path) -> JobPipeline:
        return replace(self, case_dir=Path(case_dir))

    def check_files(self):
        return None

    def final_watermark_ms(self, max_event_time_ms: int, pipeline) -> int | None:
        """The watermark at which every output is final, for a query whose output waits for the
        watermark (`waits_for`): an hour past the last record; None when none of its outputs
        waits for the watermark (it has drained once a committed batch has read every offset)."""
        plan = read_plan(self.case_dir) if self.case_dir else None
        if plan is None or waits_for(plan) is None:
            return None
        return max_event_time_ms + reach_ms(plan) + 1

    def drain_wait(self) -> str | None:
        """What the drain waits for, in a sentence (None: every offset read by a committed batch)."""
        return waits_for(read_plan(self.case_dir) if self.case_dir else None)

    def check(self, truth: pd.DataFrame, sink: pd.DataFrame, batches: list[Batch], pipeline) -> CheckResult:
        if self.case_dir is None:
            raise RuntimeError("the batch oracle runs in its case's directory: "
                               "JobPipeline.in_case(dir) first")
        oracle = getattr(pipeline, "oracle", "batch")
        if oracle in ("reference", "none"):   # the case against its run without faults, or that run
            from harness.check.batch_oracle import reference

            if oracle == "none":
                return reference.unjudged(sink)
            return reference.check(self.case_dir, truth, sink, batches, pipeline)
        return check(self.case_dir, truth, sink, batches, pipeline)


def reach_ms(plan: dict) -> int:
    """How far past the last record the watermark must go for every output to close. The
    flush's record is the only one after the last, so the watermark jumps past every window
    at once; an hour is what the drain waits for, for a query that keeps state."""
    return UNKNOWN_REACH_MS if plan.get("operators") else 0


def waits_for(plan: dict | None) -> str | None:
    """Which of the plan's operators hold output back until the watermark passes, in a sentence
    for the drain's messages; None when none does, and the query has drained once a committed
    batch has read every offset. By Spark's rules for when a stateful operator emits:
      - an aggregate (windows, sessions) in append mode emits a group once the watermark passes
        its end; in update mode it emits every changed group in the batch that changed it;
      - a stream-stream join emits an outer join's unmatched rows when the watermark passes;
      - flatMapGroupsWithState and applyInPandasWithState with EventTimeTimeout, and
        transformWithState in EventTime mode, emit when a timer fires, as the watermark passes
        it; with NoTimeout (NoTime) they emit only in the batch that read the key's rows;
      - a dedup drops, and emits a record in the batch that read it.
    Spark runs no further batch once the input has stopped when no operator waits (a
    NoTimeout state operator's shouldRunAnotherBatch is false), so the watermark stays where it
    was: a drain waiting for it there would wait in vain."""
    if not plan or not plan.get("watermarks"):
        return None
    append = plan.get("output_mode", "append") == "append"
    waiting = []
    for op in plan.get("stateful") or [{"operator": o} for o in plan.get("operators") or []]:
        name = op["operator"]
        if name == "aggregate" and append:
            waiting.append("an aggregate in append mode")
        elif name == "join":
            waiting.append("a stream-stream join")
        elif name in ("flatMapGroupsWithState", "applyInPandasWithState") and (
                op.get("timeout", "EventTimeTimeout") == "EventTimeTimeout"):
            waiting.append(f"{name} with EventTimeTimeout")
        elif name == "transformWithState" and op.get("time_mode", "EventTime") == "EventTime":
            waiting.append("transformWithState's event-time timers")
    if not waiting:
        return None
    return ", ".join(dict.fromkeys(waiting)) + " (its output waits for the watermark)"


def check(case_dir: Path, truth: pd.DataFrame, sink: pd.DataFrame, batches: list[Batch],
          pipeline) -> CheckResult:
    """The batch oracle's verdict on one case (see the module's docstring)."""
    began = time.perf_counter()
    history = history_of(sink) if getattr(pipeline, "upsert", False) else None
    plan = read_plan(case_dir)
    given = Input.of(truth, batches, plan)
    late, flush = given.late_records, given.flush_records
    dropped = pd.concat([flush, late]) if given.mode == EXACT else flush
    # "with-flush": the same with the flush's records, whose own outputs (still open in the
    # stream, or written by a query that keeps no state) are set aside in the sink
    runs: dict[str, pd.DataFrame | None] = {"expected": dropped,
                                             "with-flush": late if given.mode == EXACT else None}
    if given.mode == PARTIAL:
        runs["without-late"] = pd.concat([flush, late])
    for n in state_batches(case_dir, given, plan):   # the state check's answers mid-run
        runs[f"{STATE_AFTER}{n}"] = given.read[given.read["batch"].to_numpy() > n]
    fields = (late, pipeline.schema) if given.mode == PARTIAL and pipeline.schema else None
    outputs, times = spark_run.run(case_dir, given.ranges, runs, fields)
    columns = dict(pipeline.columns)
    key = list(pipeline.key)
    expected = outputs["expected"]
    if foreach_tables.applies(sink):   # the user's write_batch: its tables against their twins
        return foreach_tables.check(case_dir, sink, given, outputs, columns)
    sink = sink[~flush_output(outputs["with-flush"], expected, sink, columns)]
    left_out = 0
    if given.mode == PARTIAL:
        keep_e, keep_s = untouched(expected, outputs["without-late"], sink, columns, key,
                                   outputs.get(spark_run.FIELDS))
        left_out = int((~keep_e).sum())
        expected, sink = expected[keep_e], sink[keep_s]
    found = multiset.compare(expected, sink, columns)
    result: CheckResult = job_result.of(found, given, columns, key, left_out)
    back = upserts.went_backwards(history, key) if history is not None else pd.DataFrame()
    if len(back):
        back.to_parquet(spark_run.oracle_dir(case_dir) / BACKWARDS, index=False)
        result.counts["went_backwards"] = int(len(back))
        result = result.with_problems([upserts.problem(back, key)])
    _write(case_dir, given, found, times, left_out, time.perf_counter() - began)
    return result


def state_batches(case_dir: Path, given: Input, plan: dict | None) -> list[int]:
    """The batches, before the last, that the case's driver read its state after (its
    `<case>/state-check/state.json`, written at the driver's end, before any check, and the
    answers of the copies made before each fault under it), when the
    state check can judge them: one aggregation, and no late record (the answer over the records
    up to a batch is then what the state holds after it). [] otherwise."""
    from workloads.pipelines.state_read import CHECK_DIR, before_batches, driver_batches

    if given.mode != WHOLE or (plan or {}).get("operators") != ["aggregate"]:
        return []
    read = driver_batches(Path(case_dir) / CHECK_DIR)
    # and those read from the copies made before each fault (state_read.py `read_before`)
    return sorted((set(read[:-1]) | set(before_batches(Path(case_dir) / CHECK_DIR))) - set(read[-1:]))


def flush_output(with_flush: pd.DataFrame, expected: pd.DataFrame, sink: pd.DataFrame,
                 columns: dict[str, str]) -> np.ndarray:
    """Which sink rows are the end-of-run flush's own output: rows the batch gives only with the
    flush's records (a stateless job writes them; a stateful one keeps them open)."""
    names = list(columns)
    only = multiset.compare(expected, with_flush, columns).extra_rows
    if not len(only):
        return np.zeros(len(sink), dtype=bool)
    # as many copies of each as the flush gives, no more: a copy beyond them is the sink's own
    theirs = multiset.canonical(only, names, columns).value_counts()
    text = multiset.canonical(sink, names, columns)
    rank = text.groupby(text.to_numpy(), sort=False).cumcount().to_numpy()
    return (rank < text.map(theirs).fillna(0).to_numpy()).astype(bool)


def untouched(everything: pd.DataFrame, without_late: pd.DataFrame, sink: pd.DataFrame,
              columns: dict[str, str], key: list[str], late_fields: pd.DataFrame | None):
    """Which expected rows (of `everything`) and which sink rows no late record could touch.

    A row could be touched when it differs between the batch with and without the late
    records (as multisets: a row the late records only make appear more or fewer times
    differs too), or (with a key) shares its key with such a row, or when its values in the
    columns it shares with the records (the grouping, e.g. the user) are a late record's."""
    names = list(columns)
    text = {n: multiset.canonical(f, names, columns)
            for n, f in (("all", everything), ("kept", without_late))}
    differ = _differ(text["all"], text["kept"])
    touched_e = text["all"].isin(differ).to_numpy()
    touched_s = multiset.canonical(sink, names, columns).isin(differ).to_numpy()
    if key:
        changed = pd.concat([everything[text["all"].isin(differ).to_numpy()][key],
                             without_late[text["kept"].isin(differ).to_numpy()][key]])
        keys = set(multiset.canonical(changed, key, columns))
        touched_e |= multiset.canonical(everything, key, columns).isin(keys).to_numpy()
        touched_s |= multiset.canonical(sink, key, columns).isin(keys).to_numpy()
    shared = [c for c in (key or names) if late_fields is not None and c in late_fields.columns]
    if shared and late_fields is not None and len(late_fields):
        groups = set(multiset.canonical(late_fields, shared, columns))
        touched_e |= multiset.canonical(everything, shared, columns).isin(groups).to_numpy()
        touched_s |= multiset.canonical(sink, shared, columns).isin(groups).to_numpy()
    return ~touched_e, ~touched_s


def _differ(one: pd.Series, other: pd.Series) -> set[str]:
    """The canonical rows that `one` and `other` hold a different number of times."""
    diff = one.value_counts().sub(other.value_counts(), fill_value=0)
    return set(diff.index[diff.to_numpy() != 0])


def _write(case_dir: Path, given: Input, found: multiset.Comparison, times: dict, left_out: int,
           seconds: float) -> None:
    """<case>/oracle/: what was compared and how: oracle.json, and every lost and extra row."""
    out = spark_run.oracle_dir(case_dir)
    found.lost_rows.to_parquet(out / "lost.parquet", index=False)
    found.extra_rows.to_parquet(out / "extra.parquet", index=False)
    (out / "oracle.json").write_text(json.dumps({
        "mode": given.mode, "why": given.why, "records_read": int(len(given.read)),
        "late_records": int(given.late.sum()), "ranges": len(given.ranges), "left_out": left_out,
        "expected": found.expected, "lost": found.lost, "duplicated": found.duplicated,
        "unexpected": found.unexpected, "spark": times, "seconds": round(seconds, 3)}, indent=2) + "\n")
