"""A query's state, read offline from a copy of its checkpoint: `python -m workloads.state_read REQUEST.json`.

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
`<out>/state-<operator>-<store>-<batch>.parquet` per operator, store and batch, the key and
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
import sys
import time
import traceback
from pathlib import Path

MASTER = "local[1]"


def main(argv: list[str]) -> int:
    at = Path(argv[1]).resolve().parent
    request = json.loads(Path(argv[1]).read_text())
    out = at / request.get("out", ".")
    out.mkdir(parents=True, exist_ok=True)
    checkpoint = str(at / request["checkpoint"])
    began = time.perf_counter()
    spark = session(request.get("jars", []))
    answer: dict = {"session_s": round(time.perf_counter() - began, 3), "files": [], "failed": []}
    metadata = spark.read.format("state-metadata").load(checkpoint).toPandas()
    metadata.to_parquet(out / "metadata.parquet", index=False)
    for op in metadata.itertuples(index=False):
        for batch in request["batches"]:
            if batch < op.minBatchId or batch > op.maxBatchId:
                answer["failed"].append({"operator": int(op.operatorId), "store": op.stateStoreName,
                                         "batch": batch, "why": f"the operator kept batches {op.minBatchId} "
                                                                f"to {op.maxBatchId}"})
                continue
            answer["files"].append(read_one(spark, checkpoint, op, batch, out, answer["failed"]))
    answer["files"] = [f for f in answer["files"] if f is not None]
    if request.get("driver"):
        answer["aggregates"] = aggregates(spark, at / request["driver"], out)
    spark.stop()
    answer["total_s"] = round(time.perf_counter() - began, 3)
    (out / "state.json").write_text(json.dumps(answer, indent=2) + "\n")
    return 0


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


def read_one(spark, checkpoint: str, op, batch: int, out: Path, failed: list) -> dict | None:
    """One operator's store after `batch`, flattened, to its parquet file; None (and a line in
    `failed`) when Spark could not read it."""
    t = time.perf_counter()
    where = {"operator": int(op.operatorId), "store": str(op.stateStoreName), "batch": int(batch)}
    try:
        frame = (spark.read.format("statestore").option("batchId", batch)
                 .option("operatorId", int(op.operatorId)).option("storeName", str(op.stateStoreName))
                 .load(checkpoint))
        flat = frame.select(*flatten(frame.schema))
        name = f"state-{where['operator']}-{where['store']}-{batch}.parquet"
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


def flatten(schema, prefix: str = "", path=None) -> list:
    """Spark columns for every leaf of `schema`, named by their dotted path; a timestamp as
    epoch milliseconds (a LONG), so that pandas sees what the harness's frames hold."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType, TimestampNTZType, TimestampType

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
