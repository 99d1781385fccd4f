"""The batch oracle's Spark run: `python -m workloads.pipelines.job_batch REQUEST.json`.

The harness never runs Spark itself; after a case, for `[pipeline] kind = "job"` with
`oracle = "batch"`, it writes a request and starts this program, which runs the job's own
function as a Spark *batch* query over exactly the records the stream read:

  {"driver": "../driver.json",                  the case's DriverConfig: jars, imports, params
   "records": "records.parquet",                the records the committed batches read, each once,
                                                from its recording (harness/check/batch_oracle/spark_run.py)
   "ranges": [[partition, from, until], ...],   offsets the committed batches read (until exclusive)
   "runs": [{"name": "all", "drop": null},      one batch query per run, over the records less
            {"name": "kept", "drop": "late.parquet"},    those (partition, offset) in `drop`
            {"name": "late-fields", "only": "...", "parse": "DDL"}],   or those records, parsed
   "imports": [...], "jars": [...],             where the user's code is; the jars that exist here
   "out": "."}

Every path is relative to the request's own directory. It writes `<out>/<name>.parquet` per
run (the job's output, conformed to the declared columns) and `<out>/batch.json` (how long each
step took). The records are the bytes the broker served the recorder while the case ran
(workloads/recorder.py), as a DataFrame of exactly the columns and types of Spark's Kafka source
with headers (workloads/records.py SPARK_DDL), so `from_kafka(df)` sees what the stream saw, and
no record is read from Kafka again (kafka-retention may have deleted it by now). Two operators
Spark refuses in a batch are given their batch meaning (`batch_meanings`). Spark runs on
`local[2]`: a batch of a few hundred thousand records does not need the case's cluster.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from workloads import plugins, records
from workloads.pipelines import job
from workloads.pipelines.config import DriverConfig

MASTER = "local[2]"
# the case driver's settings that do not belong to a batch run on local[2]...
_NOT_HERE = ("spark.master", "spark.executor.", "spark.local.dir", "spark.jars", "spark.sql.streaming.",
             "spark.driver.host", "spark.driver.port", "spark.driver.memory")
# ...but the state store's (transformWithState runs on RocksDB, in a batch too)
_STATE_STORE = "spark.sql.streaming.stateStore."


def main(argv: list[str]) -> int:
    answer(Path(argv[1]))
    return 0


def read_request(path: Path) -> tuple[Path, dict, DriverConfig]:
    at = path.resolve().parent   # the request's paths are relative to its directory
    request = json.loads(path.read_text())
    config = DriverConfig.read(at / request["driver"])
    config = replace(config, import_paths=list(request.get("imports", config.import_paths)),
                     jars=list(request.get("jars", config.jars)))
    return at, request, config


def answer(path: Path, spark=None, request_read: tuple[Path, dict, DriverConfig] | None = None) -> dict:
    """Run the request at `path`: each run's output and batch.json in its `out`. In a session
    of its own, stopped at the end; or in `spark`, the batch oracle server's (oracle_server.py),
    left running, which passes the request it has read already (`request_read`: read_request's)."""
    at, request, config = request_read if request_read is not None else read_request(path)
    out = at / request["out"]
    out.mkdir(parents=True, exist_ok=True)
    times: dict[str, float] = {}
    began = time.perf_counter()
    plugins.add_import_paths(config.import_paths)
    batch_meanings()
    own = spark is None
    if own:
        spark = session(config)
    times["session_s"] = time.perf_counter() - began
    records_df = read(spark, at / request["records"])
    import pyarrow.parquet as pq

    for run in request["runs"]:
        t = time.perf_counter()
        if run.get("only"):   # records themselves, parsed: the late records' own fields
            only = keys(spark, at / run["only"])
            frame = records_df.join(only, on=["partition", "offset"], how="left_semi")
            result = job.parse(frame, run["parse"])
        else:
            frame = records_df if not run.get("drop") else records_df.join(
                keys(spark, at / run["drop"]), on=["partition", "offset"], how="left_anti")
            result = job.build(frame, {**config.params, "workdir": str(out)})
        pq.write_table(result.toArrow(), out / f"{run['name']}.parquet")
        times[f"{run['name']}_s"] = time.perf_counter() - t
    if own:
        spark.stop()
    times["total_s"] = time.perf_counter() - began
    (out / "batch.json").write_text(json.dumps(times, indent=2) + "\n")
    return times


def settings(config: DriverConfig) -> dict[str, Any]:
    """The case driver's settings a batch run takes (session() passes the same)."""
    kept = {k: v for k, v in config.spark_conf.items()
            if not k.startswith(_NOT_HERE) or k.startswith(_STATE_STORE)}
    return {"spark.sql.session.timeZone": "UTC", **kept}


def session(config: DriverConfig):
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.appName(f"{config.app_name}-batch-oracle").master(MASTER)
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.jars", ",".join(config.jars)))
    for key, value in settings(config).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    # transformWithState runs in a batch on a state store of its own, which asks the driver's
    # StateStoreCoordinator where it lives: the streams' manager starts that endpoint, and a
    # session that never touched it fails every task (CANNOT_LOAD_STATE_STORE, "Cannot find
    # endpoint: spark://StateStoreCoordinator")
    spark.streams  # noqa: B018 - the access is the point
    return spark


def read(spark, path: Path):
    """The recorded records (the committed batches' ranges, each record once) as one batch
    DataFrame of Kafka's columns, named and typed as Spark's Kafka source gives them."""
    frame = spark.read.schema(records.SPARK_DDL).parquet(str(path))
    if frame.isEmpty():
        raise ValueError("no committed batch read any record: nothing to run the job on")
    return frame


def batch_meanings() -> None:
    """Give the two streaming operators Spark refuses in a batch query their batch meaning,
    for this process's batch DataFrames only (a streaming one is left as it is):
      dropDuplicatesWithinWatermark(cols)  dropDuplicates(cols): every record is within reach;
      applyInPandasWithState(func, ...)    func called once per key with all its rows and an
                                           empty state, no timeout firing: Spark's own batch
                                           meaning of flatMapGroupsWithState, through applyInPandas."""
    from pyspark.sql.classic.dataframe import DataFrame
    from pyspark.sql.group import GroupedData

    if getattr(DataFrame.dropDuplicatesWithinWatermark, "_batch_meaning", False):
        return   # given already (a server's session runs many requests: oracle_server.py)
    within = DataFrame.dropDuplicatesWithinWatermark

    def drop_within(self, subset=None):
        return within(self, subset) if self.isStreaming else self.dropDuplicates(subset)

    with_state = GroupedData.applyInPandasWithState

    def apply_with_state(self, func, outputStructType, stateStructType, outputMode, timeoutConf):
        if self._df.isStreaming:
            return with_state(self, func, outputStructType, stateStructType, outputMode, timeoutConf)
        return self.applyInPandas(_once(func, stateStructType, timeoutConf), outputStructType)

    drop_within._batch_meaning = True   # type: ignore[attr-defined]
    DataFrame.dropDuplicatesWithinWatermark = drop_within   # type: ignore[method-assign]
    GroupedData.applyInPandasWithState = apply_with_state   # type: ignore[method-assign]


def _once(func, state_schema, timeout: str):
    """applyInPandasWithState's `func` as applyInPandas calls a function: once per key. The
    state's schema is parsed here, in the driver (a Python worker has no session to parse it)."""
    from pyspark.sql.types import StructType

    schema = state_schema if isinstance(state_schema, StructType) else StructType.fromDDL(state_schema)

    def call(key, frame):
        import pandas as pd
        from pyspark.sql.streaming.state import GroupState

        state = GroupState(None, 0, -1, timeout, False, False, False, False, False, -1, b"", schema)
        out = list(func(key, iter([frame]), state))
        if fires_at_the_end(timeout, state):   # the stream's drain passes every event-time timer
            timed_out = GroupState(state._value, 0, -1, timeout, True, False, True, False, False, -1, b"",
                                   schema)
            out += list(func(key, iter([]), timed_out))
        return pd.concat(out, ignore_index=True) if out else pd.DataFrame()

    return call


def fires_at_the_end(timeout: str, state) -> bool:
    """Whether the key's event-time timeout fires once its input has ended, as it does in the
    stream: the harness's drain takes the watermark an hour past the last record (and Spark runs a
    batch for an EventTimeTimeout operator whenever the watermark moves), so a timeout the
    function set for a key it kept fires there, and the function is called once more with
    `hasTimedOut` and no rows. A batch run's own meaning never fires one: a function that
    writes a session when it times out would write nothing."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    return (timeout == GroupStateTimeout.EventTimeTimeout and state.exists
            and state._timeout_timestamp != state.NO_TIMESTAMP)


def keys(spark, path: Path):
    """The (partition, offset) pairs of a Parquet file, as a DataFrame."""
    import pyarrow.parquet as pq

    return spark.createDataFrame(pq.read_table(path).to_pandas(), "partition INT, offset LONG")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
