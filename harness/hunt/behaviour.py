"""What a hunt's run did after each of its faults: the behaviours that steer the search (issue 43).

Mallory (CCS 2023) steers Jepsen's nemesis by what the system did, abstracted into summaries,
and rewards fault sequences that reach new ones. Here a behaviour is a tuple, one per fault
that landed and per reaction that followed it:

  (the fault's choice, what Spark did next, what the sink saw)

  what Spark did next   re-ran a batch with the same offsets, re-planned a batch (its id again
                        over other offsets), retried a task, reloaded a state version, found a
                        new partition, refused to start, or nothing
  what the sink saw     a batch id again (a batch run again after the sink held its rows), the
                        same rows again, or nothing

Built from the records the findings already read (harness/findings/timeline.py): the driver's
progress records (a batch id under two runs of the driver, with the same end offsets or not; a
partition new to a batch; a new run of a stateful query), the faults' records (a fail-task's
retried tasks, a refused restart), the unscheduled incidents (an executor lost: its tasks
retried) and the sink's rows (a batch id written after its batch ran again; rows the checker
counted duplicated, at the later copy's time). A reaction goes to the fault that landed last
before it. Each run's set is a few dozen tuples at most; the search keeps the plans that gave
a tuple it had not seen (harness/hunt/feedback.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

NOTHING = "nothing"
RERAN = "re-ran a batch with the same offsets"
REPLANNED = "re-planned a batch"
RETRIED = "retried a task"
RELOADED = "reloaded a state version"
NEW_PARTITION = "found a new partition"
REFUSED = "refused to start"
SPARK = (RERAN, REPLANNED, RETRIED, RELOADED, NEW_PARTITION, REFUSED)
BATCH_AGAIN = "a batch id again"
ROWS_AGAIN = "the same rows again"
SINK = (BATCH_AGAIN, ROWS_AGAIN)

SLACK_S = 0.5   # a reaction this close before a fault's landing is still its (clocks, mtimes)


@dataclass(frozen=True, order=True)
class Behaviour:
    """One fault, what Spark did next, what the sink saw."""

    fault: str    # the fault's choice: "kill-driver at after-write", "kafka-partitions"
    spark: str
    sink: str

    def text(self) -> str:
        return f"{self.fault}: Spark {self.spark}; the sink saw {self.sink}"

    def to_json(self) -> list[str]:
        return [self.fault, self.spark, self.sink]

    @classmethod
    def from_json(cls, d: list[str]) -> Behaviour:
        return cls(*d)


@dataclass(frozen=True)
class Reaction:
    at_s: float   # seconds from the first event sent
    what: str     # one of SPARK or SINK


@dataclass(frozen=True)
class Landed:
    """A fault of the run that landed: its choice's label and when it took effect."""

    label: str
    at_s: float


def behaviours(faults: list[Landed], reactions: Iterable[Reaction]) -> set[Behaviour]:
    """The run's behaviours: each reaction goes to the fault that landed last before it (none
    before the first fault: what a run does unharmed is no fault's); a fault followed by
    nothing on one side says "nothing" there."""
    faults = sorted(faults, key=lambda f: f.at_s)
    spark: list[set[str]] = [set() for _ in faults]
    sink: list[set[str]] = [set() for _ in faults]
    for r in reactions:
        owner = max((i for i, f in enumerate(faults) if f.at_s - SLACK_S <= r.at_s), default=None)
        if owner is not None:
            (sink if r.what in SINK else spark)[owner].add(r.what)
    return {Behaviour(f.label, s, k) for f, ss, ks in zip(faults, spark, sink, strict=True)
            for s in (ss or {NOTHING}) for k in (ks or {NOTHING})}


# -- reactions from the records --------------------------------------------------------------------
Planned = Callable[[int, int], float | None]   # (query index, batch id) -> offsets/N's mtime, epoch ms


def spark_reactions(progress: list[dict], t0_s: float, planned: Planned | None = None) -> list[Reaction]:
    """What Spark did, from its progress records (one per batch a driver completed): a later run
    of the driver whose first batch an earlier one had planned (`planned`: when its offsets/N was
    written; a batch killed before its commit leaves no record of its first run), or a batch id
    two runs completed, its offsets the same or not (re-planned); a partition new to a batch; a
    stateful query's later run (it reloads its state from the checkpoint)."""
    from harness.findings.timeline import _end_offsets
    from workloads.pipelines import progress_log

    out: list[Reaction] = []
    first: dict[tuple[str, int], tuple[str, dict]] = {}   # (query id, batch id) -> (run id, offsets)
    runs: dict[str, set[str]] = {}                         # query id -> its run ids so far
    parts: dict[str, set[int]] = {}                        # query id -> partitions read so far
    for p in progress:
        start_ms = progress_log.start_ms(p)
        at = round(start_ms / 1000 - t0_s, 3)
        query, run, ends = str(p.get("id")), str(p.get("runId")), _end_offsets(p)
        batch = int(p.get("batchId", -1))
        seen = first.setdefault((query, batch), (run, ends))
        known = runs.setdefault(query, set())
        if seen[0] != run:
            out.append(Reaction(at, RERAN if seen[1] == ends else REPLANNED))
        elif run not in known and known and planned is not None:   # a later driver's first batch
            when = planned(list(runs).index(query), batch)   # ... planned by an earlier one?
            if when is not None and when < start_ms - SLACK_S * 1000:
                out.append(Reaction(at, RERAN))
        if run not in known and known and p.get("stateOperators"):
            out.append(Reaction(at, RELOADED))
        known.add(run)
        had = parts.get(query)
        if had is not None and set(ends) - had:
            out.append(Reaction(at, NEW_PARTITION))
        parts[query] = (had or set()) | set(ends)
    return out


def planned_in(checkpoints: list[Path]) -> Planned:
    """When each batch's offsets/N was written, query by query (its checkpoint, else the journal's
    copy of a purged one, which keeps its mtime)."""
    from harness.check.checkpoint import journal_of

    def planned(query: int, batch: int) -> float | None:
        if query >= len(checkpoints):
            return None
        for root in (checkpoints[query], journal_of(checkpoints[query])):
            try:
                return (Path(root) / "offsets" / str(batch)).stat().st_mtime_ns / 1e6
            except OSError:
                continue
        return None
    return planned


def fault_reactions(faults: list, incidents: list) -> list[Reaction]:
    """What Spark did that the faults' and incidents' records say: tasks retried after a
    fail-task or a lost executor, a restart refused."""
    out = []
    for f in faults:
        at = _when(f)
        if at is None:
            continue
        if int((f.recovery or {}).get("tasks_retried") or 0) > 0:
            out.append(Reaction(at, RETRIED))
        if f.outcome == "refused":
            out.append(Reaction(at, REFUSED))
    out += [Reaction(i.at_s, RETRIED) for i in incidents if i.kind == "executor-lost" and i.at_s is not None]
    return out


def sink_reactions(sink, progress: list[dict], t0_s: float, duplicated: int) -> list[Reaction]:
    """What the sink saw: a batch id handed to it again (a run of a batch that started after the
    sink already held rows of its id: a batch killed after the sink's write, run again), and rows
    the checker counted duplicated (`duplicated` > 0), at the later copy's time."""
    from workloads.pipelines import progress_log
    from workloads.pipelines.config import QUERY_ID_STRIDE

    if sink is None or not len(sink) or "committed_ms" not in sink.columns:
        return []
    out = []
    if "batch_id" in sink.columns:
        held = sink.groupby("batch_id")["committed_ms"].min().to_dict()
        queries: list[str] = []   # the query ids in the order they ran: a fresh checkpoint numbers anew
        for p in progress:
            query = str(p.get("id"))
            if query not in queries:
                queries.append(query)
            bid = queries.index(query) * QUERY_ID_STRIDE + int(p.get("batchId", -1))
            start_ms = progress_log.start_ms(p)
            if bid in held and held[bid] < start_ms - SLACK_S * 1000:
                out.append(Reaction(round(start_ms / 1000 - t0_s, 3), BATCH_AGAIN))
    if duplicated > 0:
        columns = [c for c in sink.columns if c not in ("committed_ms", "batch_id")]
        again = sink[sink.duplicated(subset=columns, keep="first")]
        out += [Reaction(round(ms / 1000 - t0_s, 3), ROWS_AGAIN) for ms in sorted(set(again["committed_ms"]))]
    return out


def of_case(case_dir: Path, result, labels: list[str], checkpoints: list[Path]) -> set[Behaviour]:
    """The behaviours of a finished case from its directory, its CaseResult and its checkpoints
    (one per query); `labels`: the choice of each of its faults, in the order of their `at` (the
    records' order). Faults that did not land have none."""
    import pandas as pd

    from harness.hunt.outcome import fault_landed
    from harness.metrics import read_progress
    from harness.results.rundir import CaseDir

    files = CaseDir(Path(case_dir))
    try:
        t0_s = json.loads(files.generator.read_text())["start_ms"] / 1000
    except (OSError, ValueError, KeyError):
        return set()   # nothing was sent: no fault's time can be placed
    progress = read_progress(files.progress) if files.progress.exists() else []
    sink = pd.read_parquet(files.sink) if files.sink.exists() else None
    landed = [Landed(label, at) for label, f in zip(labels, result.faults, strict=False)
              if fault_landed(f) and (at := _when(f)) is not None]
    planned = planned_in(checkpoints)
    reactions = (spark_reactions(progress, t0_s, planned) + fault_reactions(result.faults, result.incidents)
                 + sink_reactions(sink, progress, t0_s, int(result.events.get("duplicated") or 0)))
    return behaviours(landed, reactions)


def _when(fault) -> float | None:
    """When a fault took effect (the kill, the hold), else when it was injected."""
    return fault.landed_s if fault.landed_s is not None else fault.started_s
