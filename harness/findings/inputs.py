"""What a finished case leaves behind, as the findings read it."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pandas as pd

from harness.check.checkpoint import Batch
from harness.check.result import CheckResult
from harness.results.model import FaultRecord, Incident
from harness.scenario.model import Pipeline


@dataclass(frozen=True, eq=False)
class Inputs:
    """Everything `build` explains a case's anomalies from; nothing else is read, apart from
    the mtimes of the checkpoint's offsets/N and commits/N files.

    truth        ground truth, as workloads.generator.truth.read returns it (control rows included:
                 they are set aside here)
    sink         the sink's rows as a reader saw them: the output columns, committed_ms and, for
                 most sinks, batch_id
    batches      every query's planned batches (harness.check.checkpoint.read_queries)
    checked      what the pipeline's oracle returned
    pipeline     the case's pipeline (its kind tells the unit: events, windows or keyed rows)
    faults       the schedule's faults as carried out; `more` may hold outcome, outcome_detail
                 and deleted ([{"partition", "from", "to"}], `to` exclusive)
    incidents    what nobody scheduled (and what a fault explains, marked scheduled)
    checkpoints  the case's checkpoint directories, query by query (checkpoint/, checkpoint-1/...)
    progress     the driver's StreamingQueryProgress records
    t0_s         epoch seconds of the first event sent: every time in a story counts from it
    spark_dropped_by_watermark  Spark's own count of late rows (None: not known)
    """

    truth: pd.DataFrame
    sink: pd.DataFrame
    batches: list[Batch]
    checked: CheckResult
    pipeline: Pipeline
    faults: list[FaultRecord] = field(default_factory=list)
    incidents: list[Incident] = field(default_factory=list)
    checkpoints: list[Path] = field(default_factory=list)
    progress: list[dict] = field(default_factory=list)
    t0_s: float = 0.0
    spark_dropped_by_watermark: int | None = None

    def rel_s(self, epoch_ms: float | None) -> float | None:
        """Epoch milliseconds as seconds from the first event sent (None stays None)."""
        return None if epoch_ms is None else round(epoch_ms / 1000.0 - self.t0_s, 3)

    @cached_property
    def real(self) -> pd.DataFrame:
        """The workload's own events: ground truth without the harness's control events."""
        if "control" not in self.truth.columns:
            return self.truth
        return self.truth[~self.truth["control"].to_numpy(bool)]
