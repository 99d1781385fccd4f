"""The case's history as a story needs it: each batch's offsets and when its offsets/N,
its rows in the sink and its commits/N appeared; each run of the driver; each death of
the driver; the faults in effect over a span of time.

Every time is seconds from the first event sent. A time that cannot be known (a sink
without batch_id, a checkpoint file that is gone) is None, and the story says less.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from faults.kinds import BatchView
from faults.registry import KINDS
from harness import metrics
from harness.check.batch_reads import assign_batches
from harness.check.checkpoint import Batch, earlier_plans, journal_of
from harness.findings import text
from harness.findings.inputs import Inputs
from harness.results.model import FaultRecord
from workloads.pipelines import progress_log
from workloads.pipelines.config import QUERY_ID_STRIDE


def kills_driver(f: FaultRecord) -> bool:
    """Whether the fault killed (or failed) the driver and started a new one: its FaultKind says,
    or, for a kind whose target may be the driver and that may end the query (lose-unsynced),
    its record's target."""
    kind = KINDS.get(f.kind)
    if kind is None:
        return False
    return kind.kills_driver or (kind.may_end_query and "driver" in kind.targets
                                 and (f.target or "").startswith("driver"))

Span = tuple[float | None, float | None]
REMOVED_BATCH = "removed-batch"   # a fault's change: a batch's log entries removed (faults.base.Change)


@dataclass
class Run:
    """One driver's life as its progress records show it (one runId)."""

    run_id: str
    query: int
    start_s: float
    end_s: float
    batch_ids: list[int] = field(default_factory=list)


@dataclass
class BatchFacts:
    """One planned batch and the times its traces appeared."""

    batch: Batch
    checkpoint: str               # the directory's name: checkpoint, checkpoint-1...
    planned_s: float | None       # offsets/N's mtime
    committed_s: float | None     # commits/N's mtime (None: never committed)
    sink_rows: int = 0            # rows with its batch_id in the sink
    sink_s: float | None = None   # when the first of them became visible
    runs: list[tuple[str, float, float]] = field(default_factory=list)   # (runId, start_s, end_s)
    dropped: int = 0              # Spark's numRowsDroppedByWatermark, its last run's
    updated: int = 0              # Spark's numRowsUpdated (state rows written), the same run's
    # the plans of its id Spark replaced (a fault removed offsets/N, the query planned N again over
    # other offsets): (offsets/N's time, its end offsets, its commits/N's time), in seconds
    earlier: list[tuple[float | None, dict[int, int], float | None]] = field(default_factory=list)

    @property
    def id(self) -> int:
        return self.batch.batch_id

    @property
    def local(self) -> int:
        """Its number in its own checkpoint (offsets/N)."""
        return self.batch.batch_id % QUERY_ID_STRIDE

    def file(self, log: str) -> str:
        return f"{self.checkpoint}/{log}/{self.local}"

    def read_text(self) -> str:
        return text.offset_ranges(self.batch.start_offsets or {}, self.batch.end_offsets)

    def view(self) -> BatchView:
        """What a fault kind's `explain` reads of the batch."""
        return BatchView(self.local, self.planned_s, self.sink_s, self.committed_s)


class History:
    """Facts about batches, runs and faults, derived once from the Inputs."""

    def __init__(self, inputs: Inputs):
        self.inputs = inputs
        self._marks: dict[int, int] = {}
        self.batches = {b.batch_id: self._facts(b) for b in inputs.batches}
        self._attach_earlier()
        self._attach_sink(inputs.sink)
        self.runs = self._runs()

    # -- batches -------------------------------------------------------------------------
    def _facts(self, b: Batch) -> BatchFacts:
        cps = self.inputs.checkpoints
        cp = cps[b.query] if b.query < len(cps) else None
        name = cp.name if cp is not None else ("checkpoint" if b.query == 0 else f"checkpoint-{b.query}")
        local = b.batch_id % QUERY_ID_STRIDE
        committed_ms = b.committed_ms if b.committed_ms is not None else _mtime_ms(cp, "commits", local)
        return BatchFacts(b, name, self.inputs.rel_s(_mtime_ms(cp, "offsets", local)),
                          self.inputs.rel_s(committed_ms) if b.committed else None)

    def _attach_earlier(self) -> None:
        for query, cp in enumerate(self.inputs.checkpoints):
            for local, plans in earlier_plans(Path(cp)).items():
                f = self.batch(query * QUERY_ID_STRIDE + local)
                if f is not None:
                    rel = self.inputs.rel_s
                    f.earlier = [(rel(p.planned_ms), p.end_offsets, rel(p.committed_ms)) for p in plans]

    def batch(self, batch_id: int) -> BatchFacts | None:
        return self.batches.get(int(batch_id))

    def get(self, batch_id: int) -> BatchFacts:
        """A batch known to exist (one that assign_batches or the sink named)."""
        return self.batches[int(batch_id)]

    def in_flight(self, at_s: float | None) -> BatchFacts | None:
        """The batch planned last before `at_s` that was not yet committed then: the one a
        sink's write at `at_s` belongs to, when the sink does not record Spark's batch id."""
        if at_s is None:
            return None
        running = [f for f in self.batches.values() if f.planned_s is not None and f.planned_s <= at_s
                   and (f.committed_s is None or f.committed_s >= at_s)]
        return max(running, key=lambda f: f.planned_s or 0.0, default=None)

    def of_query(self, query: int) -> list[BatchFacts]:
        return [f for f in self.batches.values() if f.batch.query == query]

    def last_watermark(self, query: int) -> int:
        """The highest watermark a committed batch of `query` ran with (-1: none committed):
        what it had closed when it ended."""
        if query not in self._marks:
            marks = [f.batch.watermark_ms for f in self.of_query(query) if f.batch.committed]
            self._marks[query] = max(marks, default=-1)
        return self._marks[query]

    @property
    def queries(self) -> list[int]:
        return sorted({b.batch.query for b in self.batches.values()})

    def files(self, batch_ids: Iterable[int]) -> list[str]:
        """The offsets/N and commits/N files of these batches, a missing commits/N said so."""
        out = []
        for bid in sorted({int(b) for b in batch_ids if b is not None and int(b) >= 0}):
            f = self.batch(bid)
            if f is None:
                continue
            out.append(f.file("offsets"))
            out.append(f.file("commits") + ("" if f.batch.committed else " (missing: never written)"))
        return out

    # -- the sink and the progress records -------------------------------------------------
    def _attach_sink(self, sink: pd.DataFrame) -> None:
        if "batch_id" not in sink.columns or not len(sink):
            return
        per = sink.groupby("batch_id")["committed_ms"].agg(["size", "min"])
        for bid, row in per.iterrows():
            f = self.batch(int(bid))
            if f is not None:
                f.sink_rows, f.sink_s = int(row["size"]), self.inputs.rel_s(float(row["min"]))

    def _runs(self) -> list[Run]:
        query_of = self._query_of_ids()
        # a batch run twice (before and after a restart) counts its late rows once: its last run's
        counted = {id(p) for p in metrics.once_per_batch(self.inputs.progress)}
        runs: dict[str, Run] = {}
        for p in self.inputs.progress:
            start_s = round(progress_log.start_ms(p) / 1000.0 - self.inputs.t0_s, 3)
            end_s = round(start_s + p.get("batchDuration", 0) / 1000.0, 3)
            query = query_of.get(str(p.get("id")), 0)
            run_id = str(p.get("runId", ""))
            run = runs.setdefault(run_id, Run(run_id, query, start_s, end_s))
            run.end_s = max(run.end_s, end_s)
            bid = query * QUERY_ID_STRIDE + int(p["batchId"])
            run.batch_ids.append(bid)
            f = self.batch(bid)
            if f is not None:
                f.runs.append((run_id, start_s, end_s))
                if id(p) in counted:
                    f.dropped = metrics.batch_dropped(p)
                    f.updated = sum(int(op.get("numRowsUpdated", 0)) for op in p.get("stateOperators", []))
        return sorted(runs.values(), key=lambda r: r.start_s)

    def _query_of_ids(self) -> dict[str, int]:
        """Spark's query id -> the index of the case's query (its checkpoint), by the batches
        whose id and end offsets match; else in the order the ids first appear."""
        by_local: dict[tuple[int, tuple], set[int]] = {}
        for b in self.inputs.batches:
            key = (b.batch_id % QUERY_ID_STRIDE, tuple(sorted(b.end_offsets.items())))
            by_local.setdefault(key, set()).add(b.query)
        found: dict[str, set[int]] = {}
        for p in self.inputs.progress:
            key = (int(p["batchId"]), tuple(sorted(_end_offsets(p).items())))
            found.setdefault(str(p.get("id")), set()).update(by_local.get(key, set()))
        out: dict[str, int] = {}
        last = max(len(self.inputs.checkpoints) - 1, 0)
        for qid, queries in found.items():
            free = sorted(queries - set(out.values())) or sorted(queries)
            out[qid] = free[0] if free else min(len(out), last)
        return out

    # -- events ----------------------------------------------------------------------------
    @cached_property
    def read_by(self) -> pd.DataFrame:
        """For each real event: `batch` (the committed batch that read it, -1: none) and
        `planned` (any planned batch whose range holds it, committed or not; -1: none)."""
        real, batches = self.inputs.real, self.inputs.batches
        return pd.DataFrame({"batch": assign_batches(real, batches).to_numpy(),
                             "planned": assign_batches(real, batches, committed_only=False).to_numpy()},
                            index=real.index)

    # -- the driver's deaths and the faults --------------------------------------------------
    def deaths(self) -> list[tuple[float | None, str]]:
        """Each time the driver died, in order: (seconds or None, a phrase saying how it is
        known). From the process watch's driver-exit incidents; else from the faults that kill
        the driver (when each took effect: the kill, after any wait for a held batch)."""
        seen = []
        for i in self.inputs.incidents:
            if i.kind == "driver-exit" and i.at_s is not None:
                killer = self._killer(i.at_s) if i.scheduled else None
                seen.append((float(i.at_s), _died(i.target, i.at_s, i.cause, killer)))
        if seen:
            return [(at, phrase) for at, phrase in sorted(seen)]
        return sorted(((f.landed_s, _killed_by(f)) for f in self.inputs.faults
                       if kills_driver(f) and f.started_s is not None),
                      key=lambda d: (d[0] is None, d[0] or 0.0))

    def deaths_within(self, f: BatchFacts) -> list[tuple[float, str]]:
        """The driver's deaths while batch `f` was under way: after its offsets/N and before its
        commits/N (or the end of the case, when it never committed). A batch the driver died in
        ran again (same checkpoint) or was skipped (a fresh one); one no death came in ran once."""
        start = f.planned_s if f.planned_s is not None else f.sink_s
        end = f.committed_s
        out: list[tuple[float, str]] = []
        for at, phrase in self.deaths():
            if at is not None and (start is None or at >= start - 0.5) and (end is None or at <= end):
                out.append((at, phrase))
        return out

    def _killer(self, at_s: float) -> FaultRecord | None:
        """The fault that killed the driver seen gone at `at_s` (in effect then)."""
        for f in self.inputs.faults:
            if kills_driver(f) and f.started_s is not None and f.started_s - 1 <= at_s <= _ended(f):
                return f
        return None

    def deaths_between(self, after_s: float | None, before_s: float | None) -> str | None:
        """Every death of the driver between two times, told in order (a driver that came back and
        died again ended the query the second time); else as death_between."""
        seen = [phrase for at, phrase in self.deaths()
                if at is not None and _within(at, (None if after_s is None else after_s - 0.5, before_s))]
        return text.join(seen) if len(seen) > 1 else self.death_between(after_s, before_s)

    def death_between(self, after_s: float | None, before_s: float | None) -> str | None:
        """How the driver died between two times (an exact death first, else a fault that
        killed it while in effect then); None when nothing says."""
        for at, phrase in self.deaths():
            if at is not None and _within(at, (None if after_s is None else after_s - 0.5, before_s)):
                return phrase
        for f in self.inputs.faults:
            if not kills_driver(f) or f.started_s is None:
                continue
            if _overlaps(f.started_s, _ended(f), after_s, before_s):
                return _killed_by(f)
        return None

    def explained(self, f: BatchFacts) -> list[tuple[FaultRecord, str]]:
        """What each fault of the case did to the batch, as its kind tells it (FaultKind.explain):
        a delay-commit's hold between the sink's write and commits/N, a commits/N deleted."""
        out = []
        for fault in self.inputs.faults:
            kind = KINDS.get(fault.kind)
            clause = kind.explain(fault, f.view()) if kind is not None and kind.explain else None
            if clause:
                out.append((fault, clause))
        return out

    def held(self, f: BatchFacts) -> str | None:
        """How a fault held the batch between the sink's write and commits/N, if one did."""
        return next((c for fault, c in self.explained(f) if not kills_driver(fault)), None)

    def commit_deleted(self, f: BatchFacts) -> str | None:
        """The fault that changed the batch's commit after it was written (a driver-killing kind
        that explains something of it), as a clause; None when none did."""
        return next((c for fault, c in self.explained(f) if kills_driver(fault)), None)

    def replanned_by(self, f: BatchFacts) -> list[tuple[FaultRecord, str]]:
        """The faults that made Spark plan batch `f` again over other offsets, each with what its
        record says it did: those whose `changes` (faults.base.Change, any kind's, a user's
        included) removed or deleted its offsets/N; else, from the journal's evidence alone,
        those in effect between its first plan and its last (with no clause)."""
        said = []
        for fault in self.inputs.faults:
            for c in getattr(fault, "changes", None) or []:
                path = str(c.get("path") or "")
                if (c.get("batch") == f.local and c.get("action") in (REMOVED_BATCH, "deleted")
                        and (not path or path.startswith(f"{f.checkpoint}/offsets"))):
                    said.append((fault, str(c.get("detail") or f"removed offsets/{f.local}")))
        if said or not f.earlier:
            return said
        first = f.earlier[0][0]
        return [(fault, "") for fault in self.inputs.faults if fault.started_s is not None
                and _overlaps(fault.started_s, _ended(fault), first, f.planned_s)]

    def faults_during(self, spans: list[Span]) -> list[str]:
        """The faults and the unscheduled incidents in effect over any of `spans`, as short texts."""
        spans = [(a, b) for a, b in spans if a is not None or b is not None]
        out = []
        for f in self.inputs.faults:
            if f.started_s is not None and any(_overlaps(f.started_s, _ended(f), a, b) for a, b in spans):
                out.append(f"{f.kind} at {f.started_s:.1f}s ({f.target})")
        for i in self.inputs.incidents:
            if not i.scheduled and i.at_s is not None and any(_within(i.at_s, s) for s in spans):
                out.append(f"{i.kind} at {i.at_s:.1f}s ({i.target}: {i.cause})")
        return out

    def span(self, batch_id: int) -> Span:
        """From offsets/N (its first, for a batch planned again) to commits/N (or to its last
        run's end, or to the case's end)."""
        f = self.batch(batch_id)
        if f is None:
            return (None, None)
        start = min((t for t in [f.planned_s, *(e[0] for e in f.earlier)] if t is not None), default=None)
        end = f.committed_s
        if end is None:
            end = max((e for _, _, e in f.runs), default=None)
        if end is None:
            end = max((r.end_s for r in self.runs), default=None)
        return (start, end)


def _ended(f: FaultRecord) -> float:
    return float(f.ended_s if f.ended_s is not None else f.started_s or 0.0)


def _within(at: float, span: Span) -> bool:
    return _overlaps(at, at, *span)


def _overlaps(a0: float, a1: float, b0: float | None, b1: float | None) -> bool:
    lo = -np.inf if b0 is None else b0
    hi = np.inf if b1 is None else b1
    return bool(a0 <= hi and a1 >= lo)


def _mtime_ms(checkpoint: Path | None, log: str, local: int) -> float | None:
    """When Spark wrote the log file: the checkpoint's, or the journal's copy once Spark purged it."""
    if checkpoint is None:
        return None
    for root in (Path(checkpoint), journal_of(Path(checkpoint))):
        try:
            return (root / log / str(local)).stat().st_mtime_ns / 1e6
        except OSError:
            continue
    return None


def _end_offsets(record: dict) -> dict[int, int]:
    """The first source's end offsets of the first topic it names."""
    sources = record.get("sources") or [{}]
    end = sources[0].get("endOffset") or {}
    if isinstance(end, str):
        end = json.loads(end)
    topic: dict = next(iter(end.values()), {}) if isinstance(end, dict) else {}
    return {int(p): int(o) for p, o in topic.items()}


def _died(target: str, at_s: float, cause: str, killer: FaultRecord | None) -> str:
    """"kill-driver killed the driver (pid 123), gone at 12.5 s" when a fault did it, else
    "the driver (pid 123) died at 12.5 s (exited with code 1)"."""
    pid = target[target.find("(") + 1:target.rfind(")")] if "(" in target else target
    if killer is not None:
        return f"{killer.kind} killed the driver ({pid}), gone at {text.seconds(at_s)}"
    return f"the driver ({pid}) died at {text.seconds(at_s)}" + (f" ({cause})" if cause else "")


def _killed_by(f: FaultRecord) -> str:
    """A kill known from the fault's record: when it took effect, else when it was injected."""
    target = f.target if f.target.startswith("driver") else f"driver ({f.target})"
    if f.landed_s is not None:
        return f"{f.kind} killed the {target} at {text.seconds(f.landed_s)}"
    return f"then {f.kind} (injected at {text.seconds(f.started_s)}) killed the {target}"
