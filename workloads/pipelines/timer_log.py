"""Each firing of a transformWithState processor's timer, written where the harness reads it
(issue 49, part 2: timers under faults).

The harness gives the driver a directory in the case's directory (DriverConfig.timers_path);
the driver hands it to the query's build in its params (`PARAM`, with the query's batch base),
and a processor that keeps a `TimerLog` calls `fired(key, expiry_ms, timer_values)` in its
handleExpiredTimer. The Python worker that runs the task appends one JSON line per firing to
`firings-<pid>.jsonl` there (executors run on this machine in local-cluster mode): the key,
the timer's expiry, the micro-batch's id (`streaming.sql.batchId`, the local property Spark
sets on every job of a batch, which reaches the worker in its TaskContext), the task's
attempt and the watermark it fired at. A batch run again after a failure writes its firings
again with the same batch id; the harness counts those of committed batches once
(harness/check/timers.py).

`TimerLog.opened(params)` also records the query's start (`starts.jsonl`), which tells the
harness that the case's processor records its firings, and a processor whether it runs after
a restart (`generation`; tests/scenarios/timer_rearm.py).

A job's functions are given no params (`transform(df)`): its processor takes
`TimerLog.current()`, the log of the query the driver is building (`offer`), or None where no
harness driver builds it (the batch oracle, the plan check, a run of the job's own).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

PARAM, BASE_PARAM = "timer_log", "timer_batch_base"   # the build's params that carry it
FIRINGS = "firings-*.jsonl"
STARTS = "starts.jsonl"
BATCH_ID = "streaming.sql.batchId"


def params_for(directory: str, batch_base: int) -> dict:
    """The params the driver adds to a build's for the log in `directory` ({} without one)."""
    return {PARAM: directory, BASE_PARAM: batch_base} if directory else {}


@dataclass(frozen=True)
class TimerLog:
    """Where a processor records its timers' firings (pickled to the executors with it)."""

    directory: str
    batch_base: int = 0     # the case's k-th query numbers its batches from k * QUERY_ID_STRIDE
    generation: int = 0     # how many of the case's drivers started its query before this one

    @classmethod
    def opened(cls, params: dict) -> TimerLog | None:
        """The log a build's params name, its query's start recorded (a build calls it, in the
        driver); None without one (the build runs without a harness)."""
        directory = params.get(PARAM)
        if not directory:
            return None
        return cls(directory, int(params.get(BASE_PARAM) or 0), start(directory))

    @classmethod
    def current(cls) -> TimerLog | None:
        """The log of the query this driver is building, opened (its start recorded) at the first
        call; None outside a harness's driver. For a job's processor, built in the driver and
        pickled to the executors with it."""
        global _OPENED
        if _OPENED is None and _OFFERED:
            _OPENED = cls.opened(_OFFERED)
        return _OPENED

    def fired(self, key, expiry_ms: int, timer_values=None) -> None:
        """Append this firing, with the task's batch and attempt, to the worker's own file."""
        from pyspark.taskcontext import TaskContext

        task = TaskContext.get()
        batch = task.getLocalProperty(BATCH_ID) if task is not None else None
        watermark = timer_values.getCurrentWatermarkInMs() if timer_values is not None else None
        record = {"key": [_plain(k) for k in key], "timer_ms": int(expiry_ms),
                  "spark_batch": int(batch) if batch is not None else None,
                  "batch": int(batch) + self.batch_base if batch is not None else None,
                  "task_attempt": task.taskAttemptId() if task is not None else None,
                  "attempt": task.attemptNumber() if task is not None else None,
                  "partition": task.partitionId() if task is not None else None,
                  "watermark_ms": watermark, "pid": os.getpid(), "at_ms": time.time_ns() // 1_000_000}
        path = Path(self.directory) / f"firings-{os.getpid()}.jsonl"
        with open(path, "a") as out:   # one line a write: a killed worker tears its last line at most
            out.write(json.dumps(record) + "\n")


# the params of the build the driver is making (offer), and the log current() opened from them
_OFFERED: dict = {}
_OPENED: TimerLog | None = None


def offer(params: dict) -> None:
    """The driver, before it builds its query: `TimerLog.current()` opens the log these params
    name (params_for's) for a build that is given no params, a job's."""
    global _OFFERED, _OPENED
    _OFFERED, _OPENED = {k: params[k] for k in (PARAM, BASE_PARAM) if k in params}, None


def start(directory: str) -> int:
    """Record a query's start in `directory` (from the driver); how many started before it."""
    path = Path(directory) / STARTS
    path.parent.mkdir(parents=True, exist_ok=True)
    before = len(path.read_text().splitlines()) if path.exists() else 0
    with open(path, "a") as out:
        out.write(json.dumps({"pid": os.getpid(), "at_ms": time.time_ns() // 1_000_000}) + "\n")
    return before


def _plain(value):
    """A grouping key's part as JSON takes it (numpy's and Spark's ints are plain ints)."""
    return value.item() if hasattr(value, "item") else value
