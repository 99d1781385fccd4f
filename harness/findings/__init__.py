"""Findings: each anomaly class in a case's output, with the fewest records that prove it
and the story of how it came about, in time order (as Elle and Jepsen's Kafka checker
report an anomaly).

    build(Inputs(...)) -> list[harness.results.model.Finding]

A pure function over what a finished case leaves behind (ground truth, the sink, the
checkpoint, the progress records, the faults and incidents, the oracle's result); it reads
nothing else but the mtimes of the checkpoint's offsets/N and commits/N files.

Classes, one finding each when present:
  went-backwards                                an upsert wrote an older batch's row over a newer one
  table-differs                                 a table of the user's write_batch is not its batch twin
  mismatch                                      lost and unexpected rows that pair up: a wrong value
  lost, duplicated, unexpected, wrong-value     the output against ground truth
  dropped-late-wrongly                          Spark dropped rows the oracle says were on time
  deleted-before-read                           offsets Kafka deleted before the query read them
  refused-restart                               a restart Spark refused
  commit-without-offsets                        a commits/N with no offsets/N in the checkpoint
  state-diverged                                an operator's state, read after a batch, is not the oracle's
  timer-fired-twice, timer-never-fired          a transformWithState timer fired in two batches, or never
  expired-early                                 a value with a state TTL was gone before its TTL ran out

The unit follows the pipeline: event by event when rows carry event_id (per_event.py), per
(event, window) pair for windowed counts (per_window.py), by key columns otherwise (per_row.py).

  inputs.py      Inputs: what build() reads
  timeline.py    the case's batches, runs, driver deaths and faults, in seconds from t0
  witness.py     witness records and how the fewest are picked
  lost.py duplicated.py extra.py spark.py   one story per class
  per_event.py per_window.py per_row.py     the records of each unit
"""

from __future__ import annotations

from harness.check import registry as pipeline_registry
from harness.findings import backwards, duplicated, extra, lost, mismatch, spark, state, tables, timers
from harness.findings.inputs import Inputs
from harness.findings.per_event import Events
from harness.findings.per_row import Rows
from harness.findings.per_window import Windows
from harness.findings.timeline import History
from harness.results.model import Finding

__all__ = ["Inputs", "build", "CLASSES"]

CLASSES = ("mismatch", "lost", "duplicated", "unexpected", "wrong-value", "dropped-late-wrongly",
           "went-backwards", "table-differs", "deleted-before-read",
           "refused-restart", "commit-without-offsets", "state-diverged", "timer-fired-twice",
           "timer-never-fired", "expired-early")


def build(inputs: Inputs) -> list[Finding]:
    """One Finding per anomaly class present in the case, in the order of CLASSES; [] for a
    case with nothing to explain (then no unit is built: a clean case costs nothing)."""
    history = History(inputs)
    found = [backwards.build(inputs), tables.build(inputs), spark.deleted_before_read(inputs, history),
             spark.refused_restart(inputs, history),
             spark.commit_without_offsets(inputs, history), state.build(inputs),
             timers.fired_twice(inputs), timers.never_fired(inputs), state.expired_early(inputs)]
    # a foreach_batch sink's output is its tables: table-differs explains them, not the row units
    if _output_anomalies(inputs, history) and not tables.applies(inputs):
        unit = unit_of(inputs, history)
        found = [mismatch.build(inputs), lost.build(inputs, history, unit),
                 duplicated.build(inputs, history, unit),
                 extra.unexpected(inputs, history, unit), extra.wrong_value(inputs, history, unit),
                 spark.dropped_late_wrongly(inputs, history, unit), *found]
    return [f for f in found if f is not None]


def _output_anomalies(inputs: Inputs, history: History) -> bool:
    """Whether the oracle found anything in the output, or Spark dropped more than it."""
    c = inputs.checked
    counted = any(int(c.counts.get(k) or 0) > 0 for k in ("lost", "duplicated", "unexpected"))
    wrong = len(c.discrepancies) and (c.discrepancies["kind"] == "wrong").any()
    late, dropped = c.counts.get("dropped_late_spark"), spark.judged_dropped(inputs, history)
    spark_more = dropped is not None and late is not None and dropped > late
    return bool(counted or wrong or spark_more or any("wrong" in p for p in c.problems))


def unit_of(inputs: Inputs, history: History):
    """The pipeline's unit (harness/check/registry.py): Windows for windowed counts, Events for
    outputs that carry event_id, Rows for every other keyed output."""
    unit = pipeline_registry.of(inputs.pipeline).unit
    if unit == pipeline_registry.WINDOWS:
        return Windows(inputs, history)
    if unit == pipeline_registry.EVENTS and "event_id" in inputs.sink.columns:
        return Events(inputs, history)
    return Rows(inputs, history)
