"""fail-task: tasks of the next batch with rows throw on their first attempt, after part of
their partition's rows went to the sink, and Spark retries them (workloads/pipelines/taskfault.py)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from faults.base import Details, Fault, Missed, Observation
from faults.kinds import BatchView, FaultKind, Key, Preparation, RecordView
from faults.spec import FaultSpec
from workloads.pipelines import state_files
from workloads.pipelines.taskfault import (
    AFTER_ROWS,
    AFTER_STATE_COMMIT,
    BATCH,
    DRIVER,
    ITERATOR,
    JOB,
    REQUEST,
    SPARK_SINK,
    WRITER,
    failed_tasks,
    pending,
    retried_tasks,
    small_batches,
)
from workloads.wait import WaitTimeout

_LOST_TASK = re.compile(r"InjectedTaskFailure: harness fail-task")


@dataclass
class TaskFailures(Details):
    """Each failed task: its stage, partition, batch, and the rows that went out before it failed."""

    tasks: list[dict] = field(default_factory=list)


def _stage(spec: FaultSpec) -> Preparation:
    return Preparation(task_stage=True)


def _requires(spec: FaultSpec) -> tuple[str, ...]:
    # the stage and the harness share the control directory: executors on this machine
    return ("local-executors", *(("state-store",) if spec.get("after") == AFTER_STATE_COMMIT else ()))


class FailTask(Fault):
    tasks = 1
    seen_failed = seen_retried = 0
    failed: list[dict] = []

    def _inject(self) -> None:
        control = self.targets.control_dir
        self.tasks = int(self.spec.get("tasks", 1))
        self.seen_failed, self.seen_retried = len(failed_tasks(control)), len(retried_tasks(control))
        small_before = small_batches(control)
        after = self.spec.get("after") or AFTER_ROWS
        (control / REQUEST).write_text(json.dumps({"tasks": self.tasks, "rows": self.spec.get("rows"),
                                                   "after": after,
                                                   "checkpoint": str(self.targets.checkpoint())}))
        self.target = ("the tasks of the next batch, after their state store commit"
                       if after == AFTER_STATE_COMMIT else "the tasks of the next batch with rows")
        try:
            self.targets.wait(lambda: len(failed_tasks(control)) >= self.seen_failed + self.tasks, "batch",
                              f"no {self.tasks} task(s) of a batch with rows failed (is the stage in the "
                              "query? the driver adds it for a scenario with fail-task)")
        except WaitTimeout as exc:
            small = sorted(small_batches(control) - small_before, key=lambda b: (len(b), b))   # 9 before 18
            if not small or failed_tasks(control)[self.seen_failed:]:
                raise WaitTimeout(f"{exc}; {self._meanwhile(control)}") from None
            raise Missed(f"the batches with rows that came ({', '.join(small)}) wrote one row to each "
                         "sink partition: a task fails after the sink took some of its rows, so it needs "
                         "two; fail-task fits a query that writes more rows a batch (or fewer shuffle "
                         f"partitions) ({exc})") from None
        self.failed = failed_tasks(control)[self.seen_failed:]

    def _heal(self) -> None:
        (self.targets.control_dir / REQUEST).unlink(missing_ok=True)

    def _meanwhile(self, control) -> str:
        """What the query did while the request waited, so that a wait that ran out says why: the
        batches that ended, those with input, and which batch (if any) took the request."""
        ended = self.targets.batches_after(self.injected_at or 0.0)
        fed = [p["batchId"] for p in ended if p.get("numInputRows", 0) > 0]
        try:
            took = f"batch {(control / BATCH).read_text()} took the request, and no task of it failed"
        except OSError:
            took = "no batch took the request"
        span = f" ({fed[0]}-{fed[-1]})" if fed else ""
        return (f"meanwhile {len(ended)} batch(es) ended, {len(fed)} with input{span}; {took}"
                + ("" if pending(control) else "; the request was gone"))

    def observe(self) -> Observation:
        control = self.targets.control_dir
        try:
            retried = self.targets.wait(lambda: retried_tasks(control)[self.seen_retried:]
                                        if len(retried_tasks(control)) >= self.seen_retried + len(self.failed)
                                        else None, "batch", "no retry of the failed tasks went through", 0.5)
        except WaitTimeout:
            retried = []
        first = self.failed[0]
        where = ", ".join(f"partition {f['partition']} of stage {f['stage']} after {f['rows_out']} of "
                          f"{f['rows']} rows" for f in self.failed)
        lost = _spark_lost(self.targets.driver_now().log_path)
        if not retried:
            return Observation(False, f"tasks of batch {first['batch']} failed ({where}), but no retry went "
                                      f"through within {self.targets.pace.wait_s('batch'):g} s")
        again = (f"attempt {retried[0]['attempt']}" if retried[0]["attempt"]
                 else "the task in a new attempt of its stage")
        proof = (f"batch {first['batch']}: " + "; ".join(taken(f) for f in self.failed)
                 + f"; {again} went through")
        landed = all(f["rows_out"] > 0 for f in self.failed)
        if self.spec.get("after") == AFTER_STATE_COMMIT:
            since_ms = (self.injected_at or 0) * 1000
            landed, proof = _after_commit(self.failed, self.targets.checkpoint(), since_ms)
        return Observation(True, f"{len(self.failed)} task(s) of batch {first['batch']} failed on their "
                                 f"first attempt and Spark retried them (Spark logged {lost} lost task(s) "
                                 "of ours)",
                           {"tasks_failed": len(self.failed), "tasks_retried": len(retried),
                            "spark_lost_tasks": lost},
                           landed=landed, proof=proof, details=TaskFailures(self.failed))


def _after_commit(failed: list[dict], checkpoint, since_ms: float) -> tuple[bool, str]:
    """Whether each failed task had published its state version when it failed (the stage
    listed the files, written since the fault asked: not a version an earlier run of the batch
    left), and what Spark's retry did with that version: the proof of the landing."""
    parts, landed = [], True
    for f in failed:
        files, version = f.get("state_files") or [], f.get("state_version") or 0
        task = f"partition {f['partition']} (stage {f['stage']}) of batch {f['batch']}"
        if not files:
            landed = False
            parts.append(f"{task} failed, but no state store file of version {version} was there: no "
                         "stateful operator committed in that task")
            continue
        if all(g["mtime_ms"] < since_ms - 1000 for g in files):
            landed = False
            parts.append(f"{task} failed, but the files of version {version} there were older than the "
                         "request: the task's own commit did not write them")
            continue
        now = {g["file"]: g for g in state_files.of_version(checkpoint, f["partition"], version)}
        again = [g for g in files if g["file"] in now and now[g["file"]]["mtime_ms"] > g["mtime_ms"]]
        new = sorted(set(now) - {g["file"] for g in files})
        retry = ("the retry wrote " + ", ".join(sorted({g["file"] for g in again} | set(new)))
                 if again or new else "the retry left them as they were")
        parts.append(f"{task} failed after its state store committed version {version} ("
                     + ", ".join(g["file"] for g in files) + f"); {retry}")
    return landed, "; ".join(parts)


def explain(fault: RecordView, batch: BatchView) -> str | None:
    """The tasks of a batch this fault failed, and that Spark ran them again."""
    mine = [t for t in getattr(fault.details, "tasks", []) if str(t.get("batch")) == str(batch.local)]
    if not mine:
        return None
    return ("fail-task failed " + "; ".join(taken(t) for t in mine)
            + ", and Spark ran the task again, which read every row of it")


def taken(failure: dict) -> str:
    """What a failed task verifiably did with its rows, by who read them (taskfault.py)."""
    task = f"partition {failure['partition']} (stage {failure['stage']})"
    out, total = failure["rows_out"], failure["rows"]
    consumer = failure.get("consumer", JOB)
    if consumer == ITERATOR:
        return (f"the sink's own code took {out} of the {total} rows of {task} (foreachPartition, foreach or "
                "the RDD API), then the task failed on attempt 0")
    if consumer == WRITER:
        return f"{out} of the {total} rows of {task} went to Spark's writer in the task, then it failed"
    if consumer == SPARK_SINK:
        return f"{out} of the {total} rows of {task} went to Spark's own sink in the task, then it failed"
    if consumer == DRIVER:
        return (f"the sink reads the batch on the driver (collect, toPandas): the task of {task} failed "
                f"after {out} of {total} rows, and the driver takes a task's rows only when it succeeds, so "
                "the sink took none of them")
    return (f"{out} of the {total} rows of {task} left the stage before the sink, which read them in a job "
            "the harness did not see, then the task failed")


def _spark_lost(log) -> int:
    """The failures of ours Spark reported in the driver's log: each lost task's Python traceback
    ends with our exception's line."""
    try:
        return sum(1 for line in log.read_text(errors="replace").splitlines() if _LOST_TASK.search(line))
    except OSError:
        return 0


FAIL_TASK_FAULT = FaultKind(
    "fail-task", FailTask,
    about="tasks of the next batch with rows throw on their first attempt, after the sink took `rows` rows "
          "of the task's partition (default: half), and Spark retries them (`spark.task.maxFailures`). The "
          "failure comes inside the sink's own reading: the iterator its code reads in its tasks "
          "(foreachPartition), or, for Spark's writers and sinks, a stage before them in the same task; the "
          "record says which. Spark's failed-task count and the retry must be seen. A sink that writes "
          "while it iterates has then written part of the partition twice",
    models="a task lost mid-write: an executor hiccup, a fetch failure, a speculative duplicate",
    keys=(Key("tasks", "integer", "how many tasks fail", default=1, ge=1),
          Key("rows", "integer", "rows of the partition that go out before the task fails (default: half)",
              default=None, ge=1, cover=(None, 1)),
          Key("after", "choice", "`rows` (or absent): fail after the sink took `rows` rows; `state-commit`: "
              "fail once the task's stateful operator has committed its state store version for the batch "
              "(any task of the next batch, with or without rows), so that the retry commits that version "
              "again", default=None, choices=(AFTER_ROWS, AFTER_STATE_COMMIT))),
    targets=("tasks",), default_target="tasks", recovery_keys=("tasks_failed", "tasks_retried"),
    details=TaskFailures, prepare=_stage, explain=explain, requires=_requires)
