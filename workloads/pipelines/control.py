"""The driver's control channel: files in the case's control directory, switched at run time.

The harness (faults/) writes a request file; the driver acts on it between a sink's write
and the return from `foreachBatch`, that is, after a batch's output is in the sink and
before Spark writes the batch to its commit log (checkpoint/commits/N). That is Spark's
commit window, the equivalent of a held checkpoint barrier: a crash inside it leaves a
batch that the sink has but the checkpoint does not, and a restart re-executes it.

  delay-the-commit request: milliseconds to hold the next batch that wrote rows
  hold-commit      request: the point (before-write, after-write, after-commit) at which to
                   hold the next batch with rows until the driver dies (after-commit: mark
                   it, armed-<N>-<ms>.json, and let it through to its commit)
  fail-the-batch   request: {"point", "times"}: raise InjectedFailure at the point of the
                   next `times` batches with rows; failed-<N>-<ms>.json says each
  pause-batch      request: hold the next batch with rows before the sink is called (its
                   offsets logged, its input not yet read) until the request is withdrawn
  held-<N>-<ms>.json  the driver's answer: batch N wrote `rows` rows and is held from `at_ms`
                   until `until_ms` (for hold-commit, HOLD_CEILING_MS: the driver should
                   be killed long before)
  kill-an-executor request: the index of an executor (in Spark's id order) to kill through
                   SparkContext.killAndReplaceExecutor (what Spark itself calls for a lost
                   executor; Scala-private, public to py4j), or where that is missing,
                   killExecutor and then requestExecutors(1)
  killed.json      the driver's answer: the executor id, and what Spark answered
The gate wraps any sink's `write`, the user's own included. A sink that sets
`last_rows` after each write says how many rows it wrote; without it, the rows the sink's own
reading of the batch counted while a request waits (_observe), else every batch counts as one
that wrote rows. The gate never runs a Spark job of its own on the batch: a second action would
run the batch's plan again, stateful operators included, and double Spark's metrics.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from workloads.pipelines import taskfault
from workloads.wire import CONTROL_KEY

# the request files: each names what it asks of the driver (the fault kinds that write them
# are another vocabulary: faults/registry.py)
DELAY_COMMIT = "delay-the-commit"
HOLD_COMMIT = "hold-commit"
FAIL_BATCH = "fail-the-batch"
PAUSE_BATCH = "pause-batch"
KILL_EXECUTOR = "kill-an-executor"
KILLED = "killed.json"


def held_path(control_dir: Path, batch_id: int, at_ms: int) -> Path:
    """One file per hold: a batch run again after a restart keeps its id, and may be held again."""
    return Path(control_dir) / f"held-{batch_id}-{at_ms}.json"


def held_batches(control_dir: Path) -> list[dict]:
    """Every batch the gate has held so far, oldest first; each record names its file ("file")
    and the request that held it ("request")."""
    found = []
    for path in sorted(Path(control_dir).glob("held-*.json")):
        try:
            found.append({**json.loads(path.read_text()), "file": path.name})
        except (OSError, ValueError):
            continue   # being written
    return sorted(found, key=lambda h: h["at_ms"])


def held_files(control_dir: Path) -> frozenset[str]:
    """The holds on record now: a mark to tell later holds by (`held_since`)."""
    return frozenset(p.name for p in Path(control_dir).glob("held-*.json"))


def held_since(control_dir: Path, request_name: str, mark: frozenset[str]) -> list[dict]:
    """The holds that `request_name` made since `mark`, oldest first. Another fault's hold
    placed meanwhile (a delay-commit's, a hold-commit's) is not this request's: under load
    faults overlap, and a kafka-retention that took a stall-sink's hold after the write for its
    own would delete input the batch had already read. Told apart by file, not by time: the
    driver's clock may be a clock fault's."""
    return [h for h in held_batches(control_dir)
            if h["file"] not in mark and h.get("request", request_name) == request_name]


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


def _observe(batch_df) -> tuple[object, Callable[[], dict | None]]:
    """The batch as the sink gets it while a request waits, and what the sink's own reading of it
    showed: {"rows", "workload_rows"} (rows whose key is not the harness's CONTROL_KEY; every row
    of an output with no `key` column), or None when the sink ran no Dataset action over it
    (the RDD API, foreachPartition, a replayed batch it skipped) or the batch is no DataFrame.

    The gate runs no job of its own. A second action on a foreachBatch DataFrame runs the batch's
    plan again, stateful operators included: Spark's foreachBatch hands the sink a LogicalRDD over
    the micro-batch's executed plan (ForeachBatchSink.addBatch), every action recomputes it, the
    plan's SQL metrics add up over both runs, and the query's progress reports their sum: a late
    row counted twice in numRowsDroppedByWatermark (measured: 3 dropped became 6, numRowsUpdated
    1 became 2, with the gate's old `limit(1).count()` after the write). An Observation counts
    the rows inside the sink's own action, as a CollectMetrics node of the batch's plan: no
    second run, nothing added to the streaming query's metrics."""
    if batch_df is None or not hasattr(batch_df, "observe"):
        return batch_df, lambda: None
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    seen = Observation()
    workload = (F.col("key") != CONTROL_KEY) if "key" in batch_df.columns else F.lit(True)
    observed = batch_df.observe(seen, F.count(F.lit(1)).alias("rows"),
                                F.count(F.when(workload, 1)).alias("workload_rows"))

    def counts() -> dict | None:
        # the future completes when the first Dataset action over `observed` ends; get would
        # block forever for a sink that never ran one
        return dict(seen.get) if seen._jo is not None and seen._jo.future().isCompleted() else None
    return observed, counts


def read_input(checkpoint: str | Path | None, batch_id: int) -> bool | None:
    """Whether micro-batch `batch_id` read anything, from its checkpoint's offset log alone
    (offsets/N is written before the sink is called): its sources' offsets against the previous
    batch's. False for a batch that only moves the watermark (a stateful query's no-data batch);
    None when the log cannot say (batch 0, no checkpoint given, a file not written yet under
    async progress tracking)."""
    if checkpoint is None or batch_id < 1:
        return None
    logs = Path(checkpoint) / "offsets"
    try:
        now, before = ((logs / str(n)).read_text().splitlines() for n in (batch_id, batch_id - 1))
    except OSError:
        return None
    # line 0 the log's version, line 1 the batch's metadata (watermark, time), then one per source
    if len(now) < 3 or len(before) < 3:
        return None
    return now[2:] != before[2:]


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
BEFORE_WRITE, AFTER_WRITE, AFTER_COMMIT = "before-write", "after-write", "after-commit"
POINTS = (BEFORE_WRITE, AFTER_WRITE, AFTER_COMMIT)


class InjectedFailure(RuntimeError):
    """What a fail-batch request raises inside foreachBatch: the query fails with it, as a
    user's code would make it fail."""


def failed_batches(control_dir: Path) -> list[dict]:
    """Every batch a fail-batch request failed so far, oldest first."""
    return _records(control_dir, "failed-*.json")


def armed_batches(control_dir: Path) -> list[dict]:
    """Batches written and let through to their commit while a kill after the commit waits."""
    return _records(control_dir, "armed-*.json")


def _records(control_dir: Path, pattern: str) -> list[dict]:
    found = []
    for path in sorted(Path(control_dir).glob(pattern)):
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue   # being written
    return sorted(found, key=lambda h: h["at_ms"])


class CommitGate:
    """`foreachBatch` callable: the sink's write, and around it whatever the control
    directory asks, at its point of the batch:

      before-write   after Spark logged offsets/N, before the sink is called
      after-write    after the sink's write returned, before Spark writes commits/N
      after-commit   the batch is let through and marked (armed-N-ms.json); the harness kills the
                     driver as soon as commits/N appears

    Requests: delay-the-commit (hold after the write for a time), hold-commit (hold at a point
    until the driver is killed), fail-batch (raise at a point, `times` batches). Each acts on
    the next batch with workload rows, and leaves a record of what it did. The gate runs no
    Spark job of its own to tell (see _observe): before the write, a batch that read input by
    its offset log (read_input: not a no-data batch); after it, a batch the sink's own reading
    found a workload row in (not only the harness's control rows), or one the sink says it wrote
    rows of when its reading was not seen.

    The sink gets `batch_base + batch_id`: a query restarted on a fresh checkpoint numbers
    its batches from 0 again, and the base (QUERY_ID_STRIDE times the query's index) keeps
    its ids apart from the earlier query's in the sink, as the checker numbers them."""

    def __init__(self, write: Callable, control_dir: Path, rows: Callable[[], int | None],
                 batch_base: int = 0, checkpoint: str | Path | None = None):
        self.write, self.control_dir, self.rows = write, Path(control_dir), rows
        self.batch_base, self.checkpoint = batch_base, checkpoint
        self.control_dir.mkdir(parents=True, exist_ok=True)

    def __call__(self, batch_df, batch_id: int) -> None:
        asked = self._asked()
        if not asked:
            self._write(batch_df, batch_id)
            return
        if asked.pop(PAUSE_BATCH, None):
            # before anything runs the batch's plan: a look at its rows would read its input,
            # and run its stateful operators, once before the sink does
            self._hold(PAUSE_BATCH, batch_id, None, BEFORE_WRITE, HOLD_CEILING_MS, forever=False,
                       until=lambda: not (self.control_dir / PAUSE_BATCH).exists())
        if BEFORE_WRITE in asked.values() and read_input(self.checkpoint, batch_id) is not False:
            self._act(asked, BEFORE_WRITE, batch_id, None)
        observed, seen = _observe(batch_df)
        self._write(observed, batch_id)
        if not asked:
            return
        rows, counts = self.rows(), seen()
        if rows == 0 or (counts is not None and counts["workload_rows"] == 0):
            return   # nothing of the workload's to replay: wait for a batch that wrote some
        rows = counts["rows"] if rows is None and counts is not None else rows
        self._act(asked, AFTER_WRITE, batch_id, rows)
        if asked.get(HOLD_COMMIT) == AFTER_COMMIT:
            (self.control_dir / HOLD_COMMIT).unlink(missing_ok=True)
            _write_json(self.control_dir / f"armed-{batch_id}-{_now_ms()}.json",
                        {"batch_id": batch_id, "rows": rows, "at_ms": _now_ms(), "point": AFTER_COMMIT})

    def _write(self, batch_df, batch_id: int) -> None:
        """The sink's write; while a fail-task request waits, its tasks fail inside the sink's own
        reading of the batch (workloads/pipelines/taskfault.py)."""
        if not taskfault.pending(self.control_dir):
            self.write(batch_df, self.batch_base + batch_id)
            return
        with taskfault.watching(batch_df.sparkSession.sparkContext, self.control_dir):
            self.write(batch_df, self.batch_base + batch_id)

    def _asked(self) -> dict[str, str]:
        """Pending requests -> the point each acts at."""
        asked = {}
        if (self.control_dir / DELAY_COMMIT).exists():
            asked[DELAY_COMMIT] = AFTER_WRITE
        if (self.control_dir / PAUSE_BATCH).exists():
            asked[PAUSE_BATCH] = BEFORE_WRITE
        for name in (HOLD_COMMIT, FAIL_BATCH):
            point = _read(self.control_dir / name)
            if point is not None:
                chosen = json.loads(point).get("point") if point.startswith("{") else point
                asked[name] = chosen or AFTER_WRITE
        return asked

    def _act(self, asked: dict[str, str], point: str, batch_id: int, rows: int | None) -> None:
        """Carry out the requests that act at `point`: fail, hold until killed, or delay."""
        if asked.get(FAIL_BATCH) == point:
            self._fail(point, batch_id, rows)
        if asked.get(HOLD_COMMIT) == point:
            (self.control_dir / HOLD_COMMIT).unlink(missing_ok=True)
            self._hold(HOLD_COMMIT, batch_id, rows, point, HOLD_CEILING_MS, forever=True)
        if asked.get(DELAY_COMMIT) == point:
            delay = _read(self.control_dir / DELAY_COMMIT)
            (self.control_dir / DELAY_COMMIT).unlink(missing_ok=True)   # one batch per request
            if delay is not None:
                self._hold(DELAY_COMMIT, batch_id, rows, point, int(delay or 0), forever=False)

    def _hold(self, request_name: str, batch_id: int, rows: int | None, point: str, for_ms: int,
              forever: bool, until: Callable[[], bool] = lambda: False) -> None:
        at_ms = _now_ms()
        until_ms = at_ms + for_ms
        record = {"batch_id": batch_id, "rows": rows, "at_ms": at_ms, "forever": forever, "point": point,
                  "request": request_name}
        path = held_path(self.control_dir, batch_id, at_ms)
        path.write_text(json.dumps({**record, "until_ms": until_ms}))
        while _now_ms() < until_ms and not until():
            time.sleep(0.05)        # held: until the time is up, released, or the driver is killed
        if _now_ms() < until_ms:    # released early: the record says so, so nobody thinks it still held
            path.write_text(json.dumps({**record, "until_ms": _now_ms()}))

    def _fail(self, point: str, batch_id: int, rows: int | None) -> None:
        """Raise InjectedFailure, and count it: the request ends after its `times`."""
        path = self.control_dir / FAIL_BATCH
        text = _read(path)
        if text is None:
            return
        request = json.loads(text) if text.startswith("{") else {"point": text}
        left = int(request.get("times", 1)) - 1
        if left > 0:
            _write_json(path, {**request, "times": left})
        else:
            path.unlink(missing_ok=True)
        message = (f"harness fail-batch: batch {batch_id} failed on purpose "
                   f"{'before the sink was called' if point == BEFORE_WRITE else 'after the sink wrote it'}")
        _write_json(self.control_dir / f"failed-{batch_id}-{_now_ms()}.json",
                    {"batch_id": batch_id, "rows": rows, "at_ms": _now_ms(), "point": point,
                     "times_left": left, "message": message})
        raise InjectedFailure(message)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _write_json(path: Path, value: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
