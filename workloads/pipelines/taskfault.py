"""fail-task, inside the query: a pass-through stage before the sink whose tasks, when the
harness asks, throw on their first attempt after part of their partition's rows went out,
so that Spark retries them (spark.task.maxFailures).

The driver adds the stage only for a case whose scenario has a fail-task fault: it costs a
trip of every row through a Python worker. The request and the records are files in the
case's control directory, which the executors of a cluster on this machine (local-cluster,
the harness's standalone cluster) read and write as the driver does:

  fail-tasks               request: {"tasks": k, "rows": r or null}
  fail-task-batch          the batch that took the request (created once, O_EXCL)
  fail-task-slot-<i>       one per task that failed (created once each, O_EXCL)
  task-failed-<stage>-<partition>.json    what a failing task did: batch, attempt, rows out
  task-retried-<stage>-<partition>.json   the retry of a failed task, once it went through

A sink that writes while it iterates (Spark's Kafka and file sinks, a custom sink that writes
per partition) has written part of the partition when the task fails: its retry writes it
again. A sink that collects on the driver sees only the retry's rows.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

PROBE = "harness.probe"   # pipelines/control.py marks its own jobs with it
REQUEST = "fail-tasks"
BATCH = "fail-task-batch"
BATCH_KEY = "streaming.sql.batchId"   # the local property Spark sets on a micro-batch's jobs


class InjectedTaskFailure(RuntimeError):
    """What a failing task raises: Spark records it as the task's failure and retries."""


def failed_tasks(control_dir: Path) -> list[dict]:
    return _records(Path(control_dir), "task-failed-*.json")


def retried_tasks(control_dir: Path) -> list[dict]:
    return _records(Path(control_dir), "task-retried-*.json")


def _records(control_dir: Path, pattern: str) -> list[dict]:
    out = []
    for path in sorted(control_dir.glob(pattern)):
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return sorted(out, key=lambda r: r["at_ms"])


def with_task_faults(df, control_dir: str):
    """`df` with the stage: the same rows and schema."""
    return df.mapInPandas(_stage(control_dir), schema=df.schema)


def _stage(control_dir: str):
    def run(frames):
        import pandas as pd
        from pyspark import TaskContext

        ctx = TaskContext.get()
        control = Path(control_dir)
        where = {"stage": ctx.stageId(), "partition": ctx.partitionId(), "attempt": ctx.attemptNumber(),
                 "batch": ctx.getLocalProperty(BATCH_KEY)}
        failed = control / f"task-failed-{where['stage']}-{where['partition']}.json"
        probe = ctx.getLocalProperty(PROBE) == "1"   # the commit gate's own look at the batch
        if probe or where["attempt"] > 0 or not (control / REQUEST).exists():
            yield from frames
            if where["attempt"] > 0 and failed.exists():
                _write(control / f"task-retried-{where['stage']}-{where['partition']}.json",
                       {**where, "at_ms": _now_ms()})
            return
        rows = [f for f in frames if len(f)]
        whole = pd.concat(rows, ignore_index=True) if rows else None
        # a task with one row could only fail before it: nothing would be written twice
        if whole is None or len(whole) < 2 or not _take(control, where):
            if whole is not None:
                yield whole
            return
        asked = json.loads((control / REQUEST).read_text() or "{}").get("rows")
        out = min(len(whole) - 1, int(asked)) if asked is not None else len(whole) // 2
        yield whole.iloc[:out]
        _write(failed, {**where, "rows_out": out, "rows": len(whole), "at_ms": _now_ms()})
        raise InjectedTaskFailure(f"harness fail-task: task {where['partition']} of stage {where['stage']} "
                                  f"(batch {where['batch']}) failed on purpose after {out} of its "
                                  f"{len(whole)} rows")
    return run


def _take(control: Path, where: dict) -> bool:
    """Whether this task is one of the `tasks` of the batch that took the request."""
    try:
        request = json.loads((control / REQUEST).read_text() or "{}")
    except (OSError, ValueError):
        return False
    if not _create(control / BATCH, str(where["batch"])):
        try:
            if (control / BATCH).read_text() != str(where["batch"]):
                return False   # another batch took the request
        except OSError:
            return False
    return any(_create(control / f"fail-task-slot-{i}", json.dumps(where))
               for i in range(int(request.get("tasks", 1))))


def _create(path: Path, text: str) -> bool:
    """Create `path` with `text` unless it exists (atomically, across processes)."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return True


def _write(path: Path, value: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
