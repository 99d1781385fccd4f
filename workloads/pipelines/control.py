"""The driver's control channel: files in the case's control directory, switched at run time.

The harness (faults/) writes a request file; the driver acts on it between a sink's write
and the return from `foreachBatch`, that is, after a batch's output is in the sink and
before Spark writes the batch to its commit log (checkpoint/commits/N). That is Spark's
commit window, the equivalent of a held checkpoint barrier: a crash inside it leaves a
batch that the sink has but the checkpoint does not, and a restart re-executes it.

  delay-commit     request: milliseconds to hold the next batch that wrote rows
  hold-commit      request: hold the next batch that wrote rows until the driver dies
  held-<N>.json    the driver's answer: batch N wrote `rows` rows and is held from `at_ms`
                   until `until_ms` (for hold-commit, HOLD_CEILING_MS: the driver should
                   be killed long before)
  kill-executor    request: the index of an executor (in Spark's id order) to kill through
                   SparkContext.killAndReplaceExecutor (what Spark itself calls for a lost
                   executor; Scala-private, public to py4j), or where that is missing,
                   killExecutor and then requestExecutors(1)
  killed.json      the driver's answer: the executor id, and what Spark answered
The gate wraps any sink's `write`, the user's own included. A sink that sets
`last_rows` after each write says how many rows it wrote; without it every batch counts
as one that wrote rows.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from workloads.wire import CONTROL_KEY

DELAY_COMMIT = "delay-commit"
HOLD_COMMIT = "hold-commit"
KILL_EXECUTOR = "kill-executor"
KILLED = "killed.json"


def held_path(control_dir: Path, batch_id: int) -> Path:
    return Path(control_dir) / f"held-{batch_id}.json"


def held_batches(control_dir: Path) -> list[dict]:
    """Every batch the gate has held so far, oldest first."""
    found = []
    for path in sorted(Path(control_dir).glob("held-*.json")):
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue   # being written
    return sorted(found, key=lambda h: h["at_ms"])


def holding(control_dir: Path) -> dict | None:
    """The batch held in the commit window right now, if any."""
    now_ms = time.time_ns() // 1_000_000
    held = [h for h in held_batches(control_dir) if h["until_ms"] > now_ms]
    return held[-1] if held else None


def request(control_dir: Path, name: str, value: str = "") -> None:
    """Switch a request on (atomically: the driver never reads half a file)."""
    path = Path(control_dir) / name
    tmp = path.with_suffix(".tmp")
    tmp.write_text(value)
    os.replace(tmp, path)


def withdraw(control_dir: Path, name: str) -> None:
    (Path(control_dir) / name).unlink(missing_ok=True)


def _only_control_rows(batch_df) -> bool:
    """Whether every row of the batch is the harness's own (its control events' window, set
    aside by the checker): holding it would test nothing. Asked only while a hold is
    pending, and only of an output with a `key` column."""
    if "key" not in (getattr(batch_df, "columns", None) or ()):
        return False
    from pyspark.sql import functions as F

    return batch_df.where(F.col("key") != CONTROL_KEY).limit(1).count() == 0


def serve(spark, control_dir: Path) -> None:
    """Carry out a pending request that needs the SparkContext (the driver polls this)."""
    request_path = Path(control_dir) / KILL_EXECUTOR
    if not request_path.exists():
        return
    try:
        index = int(request_path.read_text() or 0)
    except (OSError, ValueError):
        return   # being written
    request_path.unlink(missing_ok=True)
    sc = spark.sparkContext._jsc.sc()
    ids = sorted((i for i in sc.getExecutorIds().mkString(",").split(",") if i), key=int)
    answer: dict = {"ids": ids, "at_ms": time.time_ns() // 1_000_000}
    if index < len(ids):
        answer.update(id=ids[index], killed=_kill_and_replace(sc, ids[index]))
    else:
        answer.update(id=None, killed=False, requested=False)
    tmp = Path(control_dir) / (KILLED + ".tmp")
    tmp.write_text(json.dumps(answer))
    os.replace(tmp, Path(control_dir) / KILLED)


def _kill_and_replace(sc, executor_id: str) -> bool:
    """Kill one executor and have the cluster manager replace it; True when Spark acknowledged."""
    try:
        return bool(sc.killAndReplaceExecutor(executor_id))
    except Exception:  # noqa: BLE001 - a Spark without it (py4j raises): the public pair
        return bool(sc.killExecutor(executor_id)) and bool(sc.requestExecutors(1))


HOLD_CEILING_MS = 120_000   # a hold "until the driver dies" ends anyway if nobody kills it


class CommitGate:
    """`foreachBatch` callable: the sink's write, then whatever the control directory asks.

    The sink gets `batch_base + batch_id`: a query restarted on a fresh checkpoint numbers
    its batches from 0 again, and the base (QUERY_ID_STRIDE times the query's index) keeps
    its ids apart from the earlier query's in the sink, as the checker numbers them."""

    def __init__(self, write: Callable, control_dir: Path, rows: Callable[[], int | None],
                 batch_base: int = 0):
        self.write, self.control_dir, self.rows = write, Path(control_dir), rows
        self.batch_base = batch_base
        self.control_dir.mkdir(parents=True, exist_ok=True)

    def __call__(self, batch_df, batch_id: int) -> None:
        self.write(batch_df, self.batch_base + batch_id)
        delay, hold = self.control_dir / DELAY_COMMIT, self.control_dir / HOLD_COMMIT
        if not (delay.exists() or hold.exists()):
            return
        rows = self.rows()
        if rows == 0 or _only_control_rows(batch_df):
            return   # nothing of the workload's to replay: wait for a batch that wrote some
        now_ms = time.time_ns() // 1_000_000
        forever = hold.exists()
        try:
            until_ms = now_ms + (HOLD_CEILING_MS if forever else int(delay.read_text() or 0))
        except (OSError, ValueError):
            return                  # withdrawn meanwhile
        hold.unlink(missing_ok=True)
        delay.unlink(missing_ok=True)   # one batch per request
        held_path(self.control_dir, batch_id).write_text(json.dumps(
            {"batch_id": batch_id, "rows": rows, "at_ms": now_ms, "until_ms": until_ms, "forever": forever}))
        while time.time_ns() // 1_000_000 < until_ms:
            time.sleep(0.05)        # held: until the time is up, or the harness kills this driver
