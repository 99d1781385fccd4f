"""A query's state, read offline from a copy of its checkpoint:
`python -m workloads.pipelines.state_read REQUEST.json`, or in the case's own driver at its end
(`serve`).

The harness never runs Spark itself; after a case whose query keeps state, the state check
(harness/check/state_check.py) copies the case's checkpoint, writes a request and starts this
program, which reads every stateful operator's state with Spark's own state data source:

    spark.read.format("state-metadata").load(CHECKPOINT)         the operators and their stores
    spark.read.format("statestore").option("batchId", N)          an operator's state after batch N
         .option("operatorId", op).option("storeName", store).load(CHECKPOINT)

(Spark 4.2, StateDataSource.scala: `batchId` N reads the store's version N + 1, the state batch N
committed; without it, the last committed batch.) The request:

  {"checkpoint": "checkpoint",     the copy, relative to the request's directory
   "batches": [3, 9],              the committed batches to read the state after
   "driver": "../driver.json",     optional: a job's DriverConfig, for `aggregates`
   "jars": [...], "out": "."}

It writes `<out>/metadata.parquet` (the state-metadata rows: operatorId, operatorName,
stateStoreName, numPartitions, minBatchId, maxBatchId), one
`<out>/state-<operator>-<store>-<batch>.parquet` per operator, store and batch (for a
transformWithState operator, one `...-<batch>-<variable>.parquet` per state variable, and
`...-registered-timers.parquet` for its registered timers: see `state_variables`), the key and
value structs flattened into columns named by their path (`key.window.start`, `value.count`;
a timestamp as epoch milliseconds), with `partition_id`, and `<out>/state.json`: each file
written, each read that failed and why, and how long each step took; with "driver", also
`aggregates`: the job built on an empty stream (as workloads/pipelines/job_check.py builds it),
each output column that is straight one aggregate function of a streaming groupBy().agg()
(`{"output", "function", "buffer"}`: the function's name and its buffer's field names in the
state's value), so that the check knows which state field holds which output. A read that fails (a
version the store no longer keeps, an operator the source cannot read) is listed, never fatal:
the check says what it could not see.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
import traceback
from pathlib import Path

MASTER = "local[1]"


# the state-metadata names of transformWithState's operators (Spark 4.2, StatefulOperatorsUtils):
# the Scala API's, applyInPandas's, and PySpark's Row API's (groupBy().transformWithState)
TRANSFORM_WITH_STATE = ("transformWithStateExec", "transformWithStateInPandasExec",
                        "transformWithStateInPySparkExec")
TIMERS = "registered-timers"   # the `var` of an operator's registered timers (readRegisteredTimers)
REQUEST = "state-read.json"   # in the driver's control directory: the harness's ask at a case's end
ANSWER = "state.json"
CHECK_DIR = "state-check"      # in the case's directory: where the reads and the state check's files go
# in CHECK_DIR: a copy of the checkpoint made as each fault came due, before it acted, one
# directory per fault (`snapshot`), each read after its last committed batch (`read_before`)
BEFORE = "before"
FAULT = "fault.json"           # in a copy's directory: the fault, when it was made, its last batch
# the checkpoint's parts a state read needs: the offset and commit logs, the query's id, the state
PARTS = ("offsets", "commits", "metadata", "state")


def main(argv: list[str]) -> int:
    at = Path(argv[1]).resolve().parent
    request = json.loads(Path(argv[1]).read_text())
    out = at / request.get("out", ".")
    began = time.perf_counter()
    spark = session(request.get("jars", []))
    session_s = round(time.perf_counter() - began, 3)
    answer = read_into(spark, str(at / request["checkpoint"]), request["batches"], out,
                       at / request["driver"] if request.get("driver") else None)
    read_before(spark, out)
    spark.stop()
    answer.update(session_s=session_s, total_s=round(time.perf_counter() - began, 3))
    (out / ANSWER).write_text(json.dumps(answer, indent=2) + "\n")
    return 0


def read_into(spark, checkpoint: str, batches: list[int], out: Path, driver: Path | None) -> dict:
    """Every stateful operator's state after each of `batches`, into `out` (see the module's
    docstring); the answer without its times."""
    out.mkdir(parents=True, exist_ok=True)
    answer: dict = {"files": [], "failed": []}
    metadata = spark.read.format("state-metadata").load(checkpoint).toPandas()
    metadata.to_parquet(out / "metadata.parquet", index=False)
    for op in metadata.itertuples(index=False):
        for batch in batches:
            if batch < op.minBatchId or batch > op.maxBatchId:
                answer["failed"].append({"operator": int(op.operatorId), "store": op.stateStoreName,
                                         "batch": batch, "why": f"the operator kept batches {op.minBatchId} "
                                                                f"to {op.maxBatchId}"})
                continue
            variables = state_variables(op)
            if not variables:   # a transformWithState operator whose properties name none
                answer["failed"].append({"operator": int(op.operatorId), "store": op.stateStoreName,
                                         "batch": batch, "why": "its state-metadata properties name no "
                                                                "state variable to read"})
            for var in variables:
                answer["files"].append(read_one(spark, checkpoint, op, batch, out, answer["failed"], var))
    answer["files"] = [f for f in answer["files"] if f is not None]
    if driver is not None:
        answer["aggregates"] = aggregates(spark, driver, out)
    return answer


def serve(spark, control_dir: Path) -> None:
    """In a case's driver, once its query has stopped: the harness's ask (REQUEST, written just
    before it asked the driver to stop), read with the driver's own session, so that a state
    check costs no JVM of its own (a start of 13-32 s, docs/state.md) but the reads. The request:

      {"checkpoint": "/abs/checkpoint",   the query's own: copied to <out>/checkpoint and read there
       "after_ms": [t, ...],              the first batch committed after each (its commit file's
                                          mtime), and the last committed batch, are read
       "last_only": false,                only the last (a job's: see harness/check/state_check.py)
       "driver": "/abs/driver.json" | null, "out": "/abs/state-check"}

    The answer is `<out>/state.json` with "in_driver": true; a read that fails leaves
    `<out>/in-driver-error.txt` and no answer (the check then starts its own reader): the driver's
    end never fails for it."""
    path = Path(control_dir) / REQUEST
    if not path.exists():
        return
    began = time.perf_counter()
    copy: Path | None = None
    out = Path(control_dir)
    try:
        request = json.loads(path.read_text())
        out = Path(request["out"])
        out.mkdir(parents=True, exist_ok=True)
        live = Path(request["checkpoint"])
        batches = batches_after(live, [] if request.get("last_only") else request.get("after_ms", []))
        if not batches:
            return
        copy = copy_checkpoint(live, out / "checkpoint")
        driver = Path(request["driver"]) if request.get("driver") else None
        answer = read_into(spark, str(copy), batches, out, driver)
        answer.update(in_driver=True, batches=batches, session_s=0.0,
                      total_s=round(time.perf_counter() - began, 3))
        (out / ANSWER).write_text(json.dumps(answer, indent=2) + "\n")
        read_before(spark, out)
    except Exception:  # noqa: BLE001 - the harness's own reader then reads it; the driver ends as it would
        out.mkdir(parents=True, exist_ok=True)
        (out / "in-driver-error.txt").write_text(traceback.format_exc())
    finally:
        if copy is not None:
            shutil.rmtree(copy, ignore_errors=True)


def snapshot(checkpoint: Path, to: Path) -> int | None:
    """A copy of a running query's checkpoint (its PARTS) in `to`, made as a fault came due and
    before it acted: the state the fault found. The query goes on writing meanwhile; a version
    it commits is written to a temporary file and renamed (HDFSBackedStateStore, RocksDB's
    uploads, the logs' CheckpointFileManager), so the versions of the batches committed are whole
    and a temporary file that vanishes mid-copy is left out. Returns the last batch committed in
    the copy (its commit file), the one to read; None (and no copy) when none was. The state is
    copied after the commit log, so every batch committed in the copy has its state there."""
    if not (checkpoint / "commits").is_dir() or not (checkpoint / "state").is_dir():
        return None
    shutil.rmtree(to, ignore_errors=True)
    try:
        for part in PARTS:
            if (checkpoint / part).exists():
                _copy_live(checkpoint / part, to / part)
    except BaseException:
        shutil.rmtree(to, ignore_errors=True)
        raise
    commits = [int(p.name) for p in (to / "commits").iterdir() if p.name.isdigit()]
    if not commits:
        shutil.rmtree(to, ignore_errors=True)
        return None
    return max(commits)


def _copy_live(src: Path, dst: Path) -> None:
    """copytree (a file: copied), leaving out the temporary files and any file gone before it was
    copied."""
    if src.is_file():
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
        return
    try:
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.tmp", "*.tmp.crc"), dirs_exist_ok=True)
    except shutil.Error as exc:   # each entry: (src, dst, why); a file renamed or deleted under us
        gone = [e for e in exc.args[0] if "No such file" not in str(e[2])]
        if gone:
            raise


def read_before(spark, out: Path) -> None:
    """The copies made before each fault (`snapshot`, in `out`/BEFORE/<n>/) not yet read: the
    state after each copy's last committed batch, into its own directory (its ANSWER, its
    metadata.parquet, its files, as `read_into` writes them); the copy is deleted once read. A
    read that fails leaves `error.txt` there, never fatal."""
    for where in sorted((Path(out) / BEFORE).glob("*/")):
        copy = where / "checkpoint"
        if (where / ANSWER).exists() or not copy.is_dir():
            continue
        if not (where / FAULT).exists():   # a copy abandoned or failed: its error.txt says why
            shutil.rmtree(copy, ignore_errors=True)
            continue
        began = time.perf_counter()
        try:
            batch = int(json.loads((where / FAULT).read_text())["batch"])
            answer = read_into(spark, str(copy), [batch], where, None)
            answer.update(batches=[batch], total_s=round(time.perf_counter() - began, 3))
            (where / ANSWER).write_text(json.dumps(answer, indent=2) + "\n")
        except Exception:  # noqa: BLE001 - said where it was to be read; the other reads go on
            (where / "error.txt").write_text(traceback.format_exc())
        finally:
            shutil.rmtree(copy, ignore_errors=True)


def before_batches(where: Path) -> list[int]:
    """The batches read from the copies made before each fault (`read_before`'s answers under
    `where`/BEFORE), in order."""
    found = set()
    for answer in (Path(where) / BEFORE).glob(f"*/{ANSWER}"):
        try:
            found |= {int(b) for b in json.loads(answer.read_text()).get("batches", [])}
        except (OSError, ValueError):
            continue
    return sorted(found)


def driver_batches(where: Path) -> list[int]:
    """The batches the case's driver read the state after at its end (`serve`'s answer in
    `where`, with "in_driver"), in order; [] when it read none there."""
    try:
        answer = json.loads((Path(where) / ANSWER).read_text())
    except (OSError, ValueError):
        return []
    return sorted({int(b) for b in answer.get("batches", [])}) if answer.get("in_driver") else []


def copy_checkpoint(checkpoint: Path, to: Path) -> Path:
    """A copy of the case's checkpoint for Spark's state data source to read (Spark's temporary
    files left out): the reader opens the stores as a query would, and never the case's own."""
    shutil.rmtree(to, ignore_errors=True)
    shutil.copytree(checkpoint, to, ignore=shutil.ignore_patterns("*.tmp"))
    return to


def batches_after(checkpoint: Path, after_ms: list[float]) -> list[int]:
    """The first committed batch whose commit file was written after each of `after_ms`, and the
    last committed batch, in order (as harness/check/state_check.py's `chosen` picks them)."""
    commits = sorted((int(p.name), p.stat().st_mtime * 1000) for p in (checkpoint / "commits").iterdir()
                     if p.name.isdigit())
    if not commits:
        return []
    picked = {commits[-1][0]}
    for t in after_ms:
        later = [b for b, mtime in commits if mtime > t]
        if later:
            picked.add(later[0])
    return sorted(picked)


def session(jars: list[str]):
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.appName("harness-state-read").master(MASTER)
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "1"))
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    # the state data source opens the stores as a query would, and a store asks the driver's
    # StateStoreCoordinator where it lives: the streams' manager starts that endpoint (without
    # it every read fails: "Cannot find endpoint: spark://StateStoreCoordinator")
    spark.streams  # noqa: B018 - the access is the point
    return spark


def state_variables(op) -> list[str | None]:
    """What to read of one operator's store: the store itself (None), or for a transformWithState
    operator each of its state variables by name, and TIMERS (its registered timers) when its
    time mode has timers. Spark reads such an operator's state one variable at a time
    (`stateVarName`; `readRegisteredTimers` for the timers), its variables named in the
    operator's properties (state-metadata's operatorProperties, JSON)."""
    if str(op.operatorName) not in TRANSFORM_WITH_STATE:
        return [None]
    try:
        props = json.loads(getattr(op, "operatorProperties", None) or "{}")
    except ValueError:
        props = {}
    names = [v["stateName"] for v in props.get("stateVariables", [])
             if v.get("stateVariableType") != "TimerState" and v.get("stateName")]
    timers = str(props.get("timeMode", "NoTime")).lower() not in ("notime", "none")
    return [*names, *([TIMERS] if timers else [])]


def read_one(spark, checkpoint: str, op, batch: int, out: Path, failed: list,
             var: str | None = None) -> dict | None:
    """One operator's store (or one of its state variables, or TIMERS) after `batch`, flattened,
    to its parquet file; None (and a line in `failed`) when Spark could not read it."""
    t = time.perf_counter()
    where = {"operator": int(op.operatorId), "store": str(op.stateStoreName), "batch": int(batch)}
    if var is not None:
        where["var"] = var
    try:
        reader = (spark.read.format("statestore").option("batchId", batch)
                  .option("operatorId", int(op.operatorId)).option("storeName", str(op.stateStoreName)))
        if var == TIMERS:
            reader = reader.option("readRegisteredTimers", "true")
        elif var is not None:
            reader = reader.option("stateVarName", var)
        frame = reader.load(checkpoint)
        flat = frame.select(*flatten(frame.schema))
        name = f"state-{where['operator']}-{where['store']}-{batch}{'' if var is None else '-' + var}.parquet"
        table = flat.toArrow()
        import pyarrow.parquet as pq

        pq.write_table(table, out / name)
    except Exception as exc:  # noqa: BLE001 - Spark's reasons vary; the check names what it could not see
        failed.append({**where, "why": f"{type(exc).__name__}: {str(exc).splitlines()[0][:400]}",
                       "trace": traceback.format_exc()[-2000:]})
        return None
    return {**where, "file": name, "rows": table.num_rows, "seconds": round(time.perf_counter() - t, 3)}


def aggregates(spark, driver: Path, out: Path) -> list[dict] | str:
    """The job's output columns that are one aggregate function each (see the module's
    docstring); a sentence instead when the job did not build here."""
    import tempfile

    from workloads import plugins
    from workloads.pipelines import job, plan_tree
    from workloads.pipelines.config import DriverConfig
    from workloads.pipelines.job_check import KAFKA_COLUMNS

    config = DriverConfig.read(driver)
    plugins.add_import_paths(config.import_paths)
    found = []
    try:
        with tempfile.TemporaryDirectory(prefix="state-read-", dir=out) as empty:
            kafka = spark.readStream.schema(KAFKA_COLUMNS).format("json").load(empty)
            df = job.build(kafka, {**config.params, "workdir": empty, "oracle": ""})
            for node in plan_tree.walk(df._jdf.queryExecution().analyzed()):
                if node.nodeName() == "Aggregate" and node.isStreaming():
                    found += _direct(node.aggregateExpressions())
    except Exception as exc:  # noqa: BLE001 - the check then says it could not map the state
        return f"the job did not build on an empty stream: {type(exc).__name__}: {str(exc)[:300]}"
    return found


def _direct(expressions) -> list[dict]:
    """Of an Aggregate's output expressions, those that are `aggregate(...) AS name` with no
    DISTINCT and no FILTER: their name, function and buffer field names."""
    out = []
    for i in range(expressions.size()):
        e = expressions.apply(i)
        if e.getClass().getSimpleName() != "Alias":
            continue
        agg = e.child()
        if (agg.getClass().getSimpleName() != "AggregateExpression" or agg.isDistinct()
                or agg.filter().isDefined()):
            continue
        fn = agg.aggregateFunction()
        buffer = fn.aggBufferAttributes()
        out.append({"output": str(e.name()), "function": str(fn.prettyName()),
                    "buffer": [str(buffer.apply(j).name()) for j in range(buffer.size())]})
    return out


def unique_names(names: list[str]) -> list[str]:
    """A struct's field names made unique by position: the second `count` is `count#2`. An
    aggregation's buffer repeats a name for each function that keeps one (q17's five counts:
    `count`, `count_if` three times and `avg`'s), and Spark refuses to select such a field by
    name (AMBIGUOUS_REFERENCE_TO_FIELDS). Spark resolves a field's name regardless of case, so
    `Count` repeats `count` too; a number another field already has as its name is skipped."""
    taken = {name.lower() for name in names}
    seen: set[str] = set()
    out = []
    for name in names:
        if name.lower() not in seen:
            seen.add(name.lower())
            out.append(name)
            continue
        n = 2
        while f"{name}#{n}".lower() in taken:
            n += 1
        taken.add(f"{name}#{n}".lower())
        out.append(f"{name}#{n}")
    return out


def flatten(schema, prefix: str = "", path=None) -> list:
    """Spark columns for every leaf of `schema`, named by their dotted path; a timestamp as
    epoch milliseconds (a LONG), so that pandas sees what the harness's frames hold. A struct
    whose fields share a name is cast, field by field in order, to one whose names are unique
    (`unique_names`)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructField, StructType, TimestampNTZType, TimestampType

    names = [f.name for f in schema.fields]
    if path is not None and len({n.lower() for n in names}) != len(names):
        schema = StructType([StructField(n, f.dataType, f.nullable)
                             for n, f in zip(unique_names(names), schema.fields, strict=True)])
        path = path.cast(schema)
    cols = []
    for field in schema.fields:
        name = f"{prefix}{field.name}"
        col = F.col(f"`{field.name}`") if path is None else path.getField(field.name)
        if isinstance(field.dataType, StructType):
            cols += flatten(field.dataType, f"{name}.", col)
        elif isinstance(field.dataType, (TimestampType, TimestampNTZType)):
            cols.append(F.unix_millis(col).alias(name))
        else:
            cols.append(col.alias(name))
    return cols


if __name__ == "__main__":
    sys.exit(main(sys.argv))
