"""transformWithState's event-time timers under faults: each must fire once (issue 49, part 2).

A processor that records its firings (workloads/pipelines/timer_log.py: failed_logins, and a
user's build on it) leaves, in `<case>/timers/`, one line per firing with its key, its timer
and the micro-batch that ran it. Only firings of committed batches count, and a batch that ran
again after a failure (the same batch id) counts once: firings are deduplicated by
(key, timer, batch). Then:

  fired twice   a (key, timer) that fired in two committed batches or more: Spark deletes a
                timer as it fires, so a second firing is a timer registered again (a
                processor that re-arms its timers on recovery) or a state that lost the
                deletion
  never fired   a timer ground truth says was registered and whose time the watermark passed
                by the query's last committed batch, with no firing in a committed batch

Which timers were registered is known for failed_logins: one per user and failure's event
time + `within`, for each failure its query read and did not drop as late (Spark drops a row
whose event time <= the previous batch's watermark before the processor sees it; the first
copy of an event_id counts, as the processor's map state does). A timer fires in the first
batch whose watermark is at or above its time (Spark expires timers <= the batch's
eviction watermark, as harness/check/nexmark.py reads it). A query restarted on a fresh
checkpoint (at-most-once) starts with no timers: each query is judged on its own batches.
For another pipeline only "fired twice" is judged.

    check(case_dir, pipeline, truth, batches) -> Outcome | None   (None: nothing recorded)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from harness.check.batch_reads import assign_batches, late_watermarks
from harness.check.checkpoint import Batch
from workloads.pipelines import timer_log

CHECK_DIR = "timers-check"         # in the case's directory: what the findings read
TWICE, NEVER, OUTCOME = "fired-twice.parquet", "never-fired.parquet", "outcome.json"
KEEP = 200                         # rows kept in each table (all are counted)
FIRING_COLUMNS = ["key", "timer_ms", "batch", "spark_batch", "task_attempt", "attempt", "partition",
                  "watermark_ms", "pid", "at_ms"]


@dataclass
class Outcome:
    """What the timers' check found; `twice` and `never` hold one row per timer."""

    recorded: int = 0               # firing lines the workers wrote
    counted: int = 0                # distinct (key, timer, batch) firings of committed batches
    expected: int | None = None     # timers due by the last watermark (None: not known)
    twice: pd.DataFrame = field(default_factory=pd.DataFrame)
    never: pd.DataFrame = field(default_factory=pd.DataFrame)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"recorded": self.recorded, "counted": self.counted, "expected": self.expected,
                "fired_twice": len(self.twice), "never_fired": len(self.never), "notes": self.notes}

    def problem(self) -> str | None:
        """The verdict's words for what went wrong, or None."""
        said = []
        if len(self.twice):
            said.append(f"{len(self.twice):,} timer(s) fired in more than one committed batch")
        if len(self.never):
            said.append(f"{len(self.never):,} timer(s) the watermark passed never fired")
        return "transformWithState's timers: " + "; ".join(said) if said else None

    def write(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.twice.head(KEEP).to_parquet(directory / TWICE, index=False)
        self.never.head(KEEP).to_parquet(directory / NEVER, index=False)
        (directory / OUTCOME).write_text(json.dumps(self.to_json(), indent=2) + "\n")


def read_firings(directory: Path) -> tuple[pd.DataFrame, int]:
    """(every firing the workers recorded, as FIRING_COLUMNS with key as JSON text; lines torn
    by a killed worker, which are skipped)."""
    records, torn = [], 0
    for path in sorted(Path(directory).glob(timer_log.FIRINGS)):
        for line in path.read_text(errors="replace").splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                torn += 1
    frame = pd.DataFrame(records, columns=FIRING_COLUMNS)
    frame["key"] = [json.dumps(k) for k in frame["key"]]
    return frame, torn


def expected_timers(truth: pd.DataFrame, batches: list[Batch], within_ms: int) -> pd.DataFrame:
    """failed_logins' timers: key (JSON), timer_ms, query, registered (the first batch that read
    a failure of it), one row per (query, key, timer)."""
    from workloads.pipelines.failed_logins import FAILED

    control = truth["control"].to_numpy(bool) if "control" in truth.columns else False
    fails = truth[(truth["event_type"] == FAILED).to_numpy() & ~control]
    batch = assign_batches(fails, batches).to_numpy()
    late_mark = late_watermarks(batches)
    query = {b.batch_id: b.query for b in batches}
    read = fails.assign(batch=batch)[batch >= 0]
    marks = np.array([late_mark[b] for b in read["batch"]], dtype=np.int64)
    read = read[read["event_time_ms"].to_numpy() > marks]
    read = read.assign(query=[query[b] for b in read["batch"]]).sort_values("batch", kind="stable")
    read = read.drop_duplicates(["query", "event_id"])
    out = pd.DataFrame({"key": [json.dumps([int(u)]) for u in read["user"]],
                        "timer_ms": read["event_time_ms"].astype("int64") + within_ms,
                        "query": read["query"].to_numpy(), "registered": read["batch"].to_numpy()})
    return out.drop_duplicates(["query", "key", "timer_ms"]).reset_index(drop=True)


def judge(firings: pd.DataFrame, batches: list[Batch], expected: pd.DataFrame | None) -> Outcome:
    """Fired twice and never fired, from the firings and (when known) the timers registered."""
    committed = {b.batch_id: b for b in batches if b.committed}
    counted = firings[firings["batch"].isin(list(committed))]
    counted = counted.sort_values(["batch", "at_ms"], kind="stable")
    counted = counted.drop_duplicates(["key", "timer_ms", "batch"])
    outcome = Outcome(recorded=len(firings), counted=len(counted), twice=_twice(counted, committed))
    if expected is not None:
        due = _due(expected, batches)
        fired = set(zip(counted["key"], counted["timer_ms"], strict=True))
        pairs = zip(due["key"], due["timer_ms"], strict=True)
        hit = np.array([(k, t) in fired for k, t in pairs], dtype=bool)
        outcome.expected, outcome.never = len(due), due[~hit].reset_index(drop=True)
    return outcome


def _twice(counted: pd.DataFrame, committed: dict[int, Batch]) -> pd.DataFrame:
    """One row per (key, timer) fired in more than one committed batch: the batches, in order."""
    columns = ["key", "timer_ms", "batches", "watermarks", "attempts", "first", "again"]
    many = counted.groupby(["key", "timer_ms"], sort=False)["batch"].transform("nunique") > 1
    rows = []
    for (key, timer), group in counted[many.to_numpy(bool)].groupby(["key", "timer_ms"], sort=True):
        ids = [int(b) for b in group["batch"]]
        rows.append((key, int(timer), ids, [committed[b].watermark_ms for b in ids],
                     [int(a) for a in group["task_attempt"].fillna(-1)], ids[0], ids[1]))
    out = pd.DataFrame(rows, columns=columns)
    return out.sort_values(["again", "key"], kind="stable").reset_index(drop=True)


def _due(expected: pd.DataFrame, batches: list[Batch]) -> pd.DataFrame:
    """The expected timers each query's last committed batch's watermark passed, with the batch
    in which each should have fired (`due`) and that watermark (`last_watermark_ms`)."""
    parts = []
    for query, timers in expected.groupby("query", sort=True):
        ran = [b for b in batches if b.committed and b.query == query]
        if not ran:
            continue
        ran.sort(key=lambda b: b.batch_id)
        ids = np.array([b.batch_id for b in ran], dtype=np.int64)
        # a query's watermark never goes back: the first batch above a timer is a binary search
        marks = np.maximum.accumulate(np.array([b.watermark_ms for b in ran], dtype=np.int64))
        # the first batch, at or after the one that registered it, whose watermark is at or above it
        # (a timer at exactly the watermark fires: run 20261129T070119-timer-faults-b8a6, batch 5)
        at = np.maximum(np.searchsorted(marks, timers["timer_ms"].to_numpy(np.int64), side="left"),
                        np.searchsorted(ids, timers["registered"].to_numpy(np.int64)))
        passed = at < len(ids)
        parts.append(timers[passed].assign(due=ids[at[passed]], last_watermark_ms=int(marks[-1])))
    if not parts:
        empty = pd.Series(dtype="int64")
        return expected.iloc[:0].assign(due=empty, last_watermark_ms=empty)
    return pd.concat(parts, ignore_index=True).astype({"due": "int64"})


def check(case_dir: Path, pipeline, truth: pd.DataFrame | None, batches: list[Batch]) -> Outcome | None:
    """The case's timers judged and written to `<case>/timers-check/` (under a re-check, the
    re-check's case directory); None when its processor recorded nothing (its build keeps no
    timer log)."""
    directory = Path(case_dir) / "timers"
    if not (directory / timer_log.STARTS).exists():
        return None
    firings, torn = read_firings(directory)
    expected = None
    if pipeline.kind == "failed_logins" and truth is not None and "event_type" in truth.columns:
        expected = expected_timers(truth, batches, pipeline.values["within_ms"])
    outcome = judge(firings, batches, expected)
    if torn:
        outcome.notes.append(f"{torn} firing line(s) torn by a killed worker were skipped")
    if expected is None:
        outcome.notes.append("which timers must fire is not known for this pipeline: only timers fired "
                             "twice are judged")
    from harness.check.batch_oracle.spark_run import written_dir

    outcome.write(written_dir(case_dir) / CHECK_DIR)   # under a re-check, the re-check's own
    return outcome
