"""fail-task, inside the sink's own tasks: when the harness asks, tasks of the next batch with
rows throw on their first attempt after the sink took part of their partition's rows, so
that Spark retries them (spark.task.maxFailures).

Where the failure comes depends on how the sink reads the batch, and the record says which
(`consumer`):

  iterator   the sink's own code reads the rows in its tasks (foreachPartition, foreach, the
             RDD API): the iterator it reads fails after it has taken `rows` rows, so those rows
             are really in its hands (a sink that writes per row has written them)
  writer     Spark's writer reads them in the same task (batch_df.write, writeTo, mergeInto): a
             pass-through stage before it fails after `rows` rows went to it
  driver     the sink collects the batch on the driver (collect, toPandas...): the stage fails a
             task of that job; the driver takes a task's rows only when it succeeds, so the sink
             took none of the failed attempt's
  spark-sink Spark's own streaming sink (Kafka, files, Delta) reads them in the same task
  job        a job of the sink's write the harness did not see how it reads

With `after = "state-commit"` the task fails only once its input is exhausted, that is once the
stateful operator before the stage has committed its state store's version for the batch (a
state store commits when its iterator ends, in the same task): any task of the batch, with
rows or without, and its record lists the version files it had published (`state_files`), so
that Spark's retry must commit the same version again.

The commit gate (pipelines/control.py) tells which, while the sink writes the batch that takes
the request (`watching`); the pass-through stage is in the query only for a case whose
scenario has a fail-task fault: it costs a trip of every row through a Python worker. The
request and the records are files in the case's control directory, which the executors of a
cluster on this machine (local-cluster, the harness's standalone cluster) read and write as
the driver does:

  fail-tasks               request: {"tasks": k, "rows": r or null, "after": "rows" or
                           "state-commit", "checkpoint": the query's checkpoint}
  fail-task-batch          the batch that took the request (created once, O_EXCL)
  fail-task-slot-<i>       one per task that failed (created once each, O_EXCL)
  fail-task-small-<batch>-<partition>     a task of a batch with rows that had one row only
  task-failed-<stage>-<partition>.json    what a failing task did: batch, attempt, rows out,
                                          consumer
  task-retried-<stage>-<partition>.json   the retry of a failed task, once it went through
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

REQUEST = "fail-tasks"
SMALL = "fail-task-small-"
BATCH = "fail-task-batch"
BATCH_KEY = "streaming.sql.batchId"   # the local property Spark sets on a micro-batch's jobs
SINK_READS = "harness.sink-reads"     # a local property: how the sink read the batch (watching)
WATCHED = "harness.fail-task-watched"   # a local property: the gate watched this batch's write
ITERATOR, WRITER, DRIVER, SPARK_SINK, JOB = "iterator", "writer", "driver", "spark-sink", "job"
AFTER_ROWS, AFTER_STATE_COMMIT = "rows", "state-commit"   # fail-task's `after`
_DRIVER_READS = ("collect", "toPandas", "toArrow", "toLocalIterator", "take", "tail")
_WRITER_READS = ("writeTo", "mergeInto")


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


def with_task_faults(df, control_dir: str, consumer: str = JOB):
    """`df` with the stage: the same rows and schema. `consumer`: who reads its output when the
    commit gate does not say (SPARK_SINK: Spark's own streaming sink, with no gate)."""
    return df.mapInPandas(_stage(control_dir, consumer), schema=df.schema)


def pending(control_dir) -> bool:
    """Whether a fail-task request waits for a batch."""
    return (Path(control_dir) / REQUEST).exists()


@contextlib.contextmanager
def watching(spark_context, control_dir) -> Iterator[None]:
    """While the sink writes a batch a fail-task request waits for: the batch's rows reach the
    sink's own code through an iterator that fails after it took `rows` of them (the RDD API:
    foreachPartition, foreach, rdd), and each job of the sink's write carries how the sink reads
    (the local property SINK_READS), for the stage and the record. What it patches it restores."""
    from pyspark.sql.classic.dataframe import DataFrame

    control = str(control_dir)
    saved = {name: DataFrame.__dict__[name] for name in (*_DRIVER_READS, *_WRITER_READS, "write", "rdd")}

    def mark(how: str) -> None:
        spark_context.setLocalProperty(SINK_READS, how)

    def reading(original, how):
        def read(self, *args, **kwargs):
            mark(how)
            return original(self, *args, **kwargs)
        return read

    def rdd(self):
        mark(ITERATOR)
        # rdd is a cached_property and write a property: each read through its own descriptor
        plain = saved["rdd"].__get__(self, type(self))
        return plain.mapPartitions(_taking(control), preservesPartitioning=True)

    def write(self):
        mark(WRITER)
        return saved["write"].__get__(self, type(self))

    for name in _DRIVER_READS:
        setattr(DataFrame, name, reading(saved[name], DRIVER))
    for name in _WRITER_READS:
        setattr(DataFrame, name, reading(saved[name], WRITER))
    DataFrame.rdd, DataFrame.write = property(rdd), property(write)   # type: ignore[method-assign,assignment]
    spark_context.setLocalProperty(WATCHED, "1")
    try:
        yield
    finally:
        for name, original in saved.items():
            setattr(DataFrame, name, original)
        spark_context.setLocalProperty(SINK_READS, None)
        spark_context.setLocalProperty(WATCHED, None)


def _where():
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx, {"stage": ctx.stageId(), "partition": ctx.partitionId(), "attempt": ctx.attemptNumber(),
                 "task_id": ctx.taskAttemptId(), "batch": ctx.getLocalProperty(BATCH_KEY)}


def _again(control: Path, where: dict) -> bool:
    """Whether this task runs again after one of ours failed: a retry of the task, or the task
    in a new attempt of its stage (after an executor holding its shuffle input died), whose
    own attempt number starts at 0 again (another task attempt id than the failed one's)."""
    if where["attempt"] > 0:
        return True
    try:
        failed = json.loads(_failed_path(control, where).read_text())
    except (OSError, ValueError):
        return False
    return failed.get("task_id") not in (None, where["task_id"])


def _failed_path(control: Path, where: dict) -> Path:
    return control / f"task-failed-{where['stage']}-{where['partition']}.json"


def _retried(control: Path, where: dict) -> None:
    """A retry of a failed task went through: its record."""
    if _again(control, where):
        _write(control / f"task-retried-{where['stage']}-{where['partition']}.json",
               {**where, "at_ms": _now_ms()})


def _request(control: Path) -> dict:
    try:
        return json.loads((control / REQUEST).read_text() or "{}")
    except (OSError, ValueError):
        return {}


def _rows_out(control: Path, total: int) -> int:
    """How many of a partition's `total` rows go out before its task fails: the request's
    `rows`, at most all but one; by default half."""
    if total < 2:
        return 0
    asked = _request(control).get("rows")
    return min(total - 1, int(asked)) if asked is not None else total // 2


def _after_commit(control: Path) -> str | None:
    """The checkpoint whose state store commit a task must fail after, when the request asks."""
    request = _request(control)
    return request.get("checkpoint") if request.get("after") == AFTER_STATE_COMMIT else None


def _fail(control: Path, where: dict, out: int, total: int, consumer: str, checkpoint: str | None = None):
    from workloads.pipelines import state_files

    record = {**where, "rows_out": out, "rows": total, "consumer": consumer, "at_ms": _now_ms()}
    if checkpoint is not None:
        record["after"] = AFTER_STATE_COMMIT
        version = int(where["batch"]) + 1 if where["batch"] is not None else None
        record["state_version"] = version
        record["state_files"] = ([] if version is None
                                 else state_files.of_version(checkpoint, where["partition"], version))
    _write(_failed_path(control, where), record)
    return InjectedTaskFailure(f"harness fail-task: task {where['partition']} of stage {where['stage']} "
                               f"(batch {where['batch']}) failed on purpose after {out} of its {total} rows "
                               f"({consumer})")


def _taking(control_dir: str):
    """The iterator the sink's own code reads in its tasks: on the first attempt of a task the
    request takes, it hands out `rows` rows, and fails when the sink asks for one more."""
    def run(rows):
        control = Path(control_dir)
        _, where = _where()
        if not (control / REQUEST).exists() or _again(control, where):
            yield from rows
            _retried(control, where)
            return
        rows = list(rows)   # the input is exhausted: a stateful operator before has committed
        checkpoint = _after_commit(control)
        # a task with one row could only fail before it: nothing would be written twice (after
        # a state store commit, any task will do)
        if (checkpoint is None and len(rows) < 2) or not _take(control, where):
            _too_small(control, where, len(rows))
            yield from rows
            return
        out = _rows_out(control, len(rows))
        yield from rows[:out]
        raise _fail(control, where, out, len(rows), ITERATOR, checkpoint)
    return run


def _stage(control_dir: str, consumer: str):
    def run(frames):
        import pandas as pd

        ctx, where = _where()
        control = Path(control_dir)
        reads = ctx.getLocalProperty(SINK_READS) or consumer
        # a foreachBatch sink's batch the gate did not watch: the request came after the gate
        # looked, while the sink wrote it (the sink's reading unknown); the next batch takes it
        unwatched = consumer == JOB and ctx.getLocalProperty(WATCHED) != "1"
        # the sink's own code reads this job's rows: its iterator fails the task (_taking)
        if (unwatched or reads == ITERATOR or not (control / REQUEST).exists()
                or _again(control, where)):
            yield from frames
            _retried(control, where)
            return
        rows = [f for f in frames if len(f)]   # the input is exhausted: a stateful operator has committed
        whole = pd.concat(rows, ignore_index=True) if rows else None
        size = 0 if whole is None else len(whole)
        checkpoint = _after_commit(control)
        # a task with one row could only fail before it: nothing would be written twice (after
        # a state store commit, any task will do)
        if (checkpoint is None and size < 2) or not _take(control, where):
            _too_small(control, where, size)
            if whole is not None:
                yield whole
            return
        out = _rows_out(control, size)
        if out:
            yield whole.iloc[:out]
        raise _fail(control, where, out, size, reads, checkpoint)
    return run


def _too_small(control: Path, where: dict, rows: int) -> None:
    """A batch with rows passed while a request waited, but this task of it had one row: the
    fault's wait says so when no task could be failed (fail-task-small-<batch>-<partition>)."""
    if rows == 1:
        _create(control / f"{SMALL}{where['batch']}-{where['partition']}", json.dumps(where))


def small_batches(control_dir: Path) -> set[str]:
    """The batches whose tasks had one row each while a request waited."""
    return {p.name[len(SMALL):].rsplit("-", 1)[0] for p in Path(control_dir).glob(f"{SMALL}*")}


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
