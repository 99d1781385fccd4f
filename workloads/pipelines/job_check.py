"""A job's plan checked before anything starts: `python -m workloads.pipelines.job_check REQUEST.json`.

The harness never runs Spark itself; before a run starts any service, for each distinct
`[pipeline] kind = "job"` of the scenario it writes a request and starts this program, which
builds the job exactly as the driver will (job.parse, then the job's own function) on an
empty stream of Kafka's raw columns, in a local Spark session, and reads the analysed plan:

  {"import_paths": [...], "jars": [...], "conf": {...},
   "jobs": [{"job": "my_job:transform", "reads": "parsed"|"kafka", "schema": "DDL",
             "columns": {...}, "oracle": "batch"|"reference", "event_time": "ts"}, ...],
   "out": "<dir>/check.json"}

and writes, per job: `refusals` (what a batch run cannot mirror, job.reasons over
job.plan_facts: the driver's own check; only for oracle = "batch"), `watermark` (a watermark
not on the event-time column, event_time.py), `facts`, and `error` when the job did not
build on an empty stream (then the driver's check, when it starts, is the one left), or
`invalid` and `fix` when its function is not one to call (a module the harness could not
import without a Spark session is checked here).

The empty stream is a file source over an empty directory: a streaming DataFrame, so the
streaming-only operators (withWatermark, dropDuplicatesWithinWatermark,
applyInPandasWithState, transformWithState) analyse as they do in the stream.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
import traceback
from pathlib import Path

from workloads import plugins
from workloads.errors import SpecError
from workloads.pipelines import event_time, job

MASTER = "local[1]"
# Kafka's source columns, headers included (a job's source options ask for them)
KAFKA_COLUMNS = ("key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP, "
                 "timestampType INT, headers ARRAY<STRUCT<key: STRING, value: BINARY>>")


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[1]).read_text())
    began = time.perf_counter()
    plugins.add_import_paths(request.get("import_paths", []))
    spark = session(request.get("jars", []), request.get("conf", {}))
    started = time.perf_counter() - began
    with tempfile.TemporaryDirectory(prefix="job-check-") as empty:
        kafka = spark.readStream.schema(KAFKA_COLUMNS).format("json").load(empty)
        checked = [check(kafka, spec) for spec in request["jobs"]]
    spark.stop()
    Path(request["out"]).write_text(json.dumps({"jobs": checked, "session_s": round(started, 3),
                                                "total_s": round(time.perf_counter() - began, 3)}, indent=2))
    return 0


def session(jars: list[str], conf: dict[str, str]):
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.appName("harness-job-check").master(MASTER)
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "1"))
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def check(kafka, spec: dict) -> dict:
    """One job's findings (see the module's docstring)."""
    began = time.perf_counter()
    raw = spec["reads"] == "kafka"
    try:   # the loader could not import a module that needs a Spark session: checked here
        fn = plugins.function(spec["job"], spec.get("field") or "pipeline.build", ("df",))
    except SpecError as exc:
        return {"job": spec["job"], "invalid": exc.problem, "fix": exc.fix}
    try:
        out = fn(kafka if raw else job.parse(kafka, spec["schema"]))
        facts = job.plan_facts(out) if out.isStreaming else None
        marks = event_time.watermark_problems(out, spec["event_time"]) if spec.get("event_time") else []
    except Exception as exc:   # noqa: BLE001 - the job's own error: the driver meets it too
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return {"job": spec["job"], "error": last[:2000], "seconds": round(time.perf_counter() - began, 3)}
    refusals = job.reasons(facts) if facts is not None and spec.get("oracle") == "batch" else []
    return {"job": spec["job"], "refusals": refusals, "watermark": marks, "facts": facts,
            "seconds": round(time.perf_counter() - began, 3)}


if __name__ == "__main__":
    sys.exit(main(sys.argv))
