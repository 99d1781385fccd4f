"""The Spark driver program: `python -m workloads.pipelines.driver CONFIG.json`.

Runs in its own process (the harness starts it as a service), so a fault can kill it
and a restart resumes from the same checkpoint. It reads a JSON config written by the
harness, starts the query, and writes to the case directory:
  status.json     {"state": "running"|"stopped"|"failed", "query_id", "error"}
  progress.jsonl  one StreamingQueryProgress JSON per micro-batch
It stops gracefully when the file named by `stop_path` appears.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    # 200 shuffle partitions on 2 cores spends most of each batch scheduling state-store tasks
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
}


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[1]).read_text())
    status = Path(config["status_path"])
    try:
        return run(config, status)
    except Exception as exc:  # noqa: BLE001 - the harness reads the failure from status.json
        _write_status(status, state="failed", error=f"{type(exc).__name__}: {exc}",
                      traceback=traceback.format_exc())
        traceback.print_exc()
        return 1


def run(config: dict, status: Path) -> int:
    spark = _session(config)
    sink = _sink(config)
    query = _start_query(spark, config, sink)
    _write_status(status, state="running", query_id=str(query.id), run_id=str(query.runId))
    stop_path = Path(config["stop_path"])
    while query.isActive and not stop_path.exists():
        query.awaitTermination(0.5)
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    query.stop()
    sink.close()
    spark.stop()
    _write_status(status, state="stopped", query_id=str(query.id))
    return 0


def _session(config: dict):
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(config["app_name"]).master(config["master"])
    conf = {**DEFAULT_CONF, "spark.jars": ",".join(config["jars"]), **config.get("spark_conf", {})}
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.streams.addListener(_progress_listener(Path(config["progress_path"])))
    return spark


def _progress_listener(path: Path):
    from pyspark.sql.streaming import StreamingQueryListener

    class ProgressToFile(StreamingQueryListener):
        def onQueryStarted(self, event):
            pass

        def onQueryProgress(self, event):
            with open(path, "a") as out:
                out.write(event.progress.json.replace("\n", " ") + "\n")

        def onQueryIdle(self, event):
            pass

        def onQueryTerminated(self, event):
            pass

    return ProgressToFile()


def _sink(config: dict):
    from workloads.pipelines.postgres_sink import PostgresSink

    spec = config["sink"]
    if spec["kind"] != "postgres":
        raise ValueError(f"unknown sink kind {spec['kind']!r}")
    sink = PostgresSink(spec["url"], spec["table"], spec["mode"])
    sink.setup()
    return sink


def _start_query(spark, config: dict, sink):
    from workloads.pipelines import windowed_count

    p = config["pipeline"]
    raw = (spark.readStream.format("kafka")
           .option("kafka.bootstrap.servers", config["bootstrap_servers"])
           .option("subscribe", config["topic"])
           .option("startingOffsets", "earliest")
           .option("failOnDataLoss", "true")
           .load())
    events = windowed_count.parse_events(raw)
    out = windowed_count.build(events, p["window_ms"], p["slide_ms"], p["watermark_ms"])
    return (out.writeStream.outputMode("append")
            .queryName(config["app_name"])
            .trigger(processingTime=f"{p['trigger_ms']} milliseconds")
            .option("checkpointLocation", config["checkpoint"])
            .foreachBatch(sink)
            .start())


def _write_status(path: Path, **fields) -> None:
    fields.update(pid=os.getpid(), at_ms=time.time_ns() // 1_000_000)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(fields))
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
