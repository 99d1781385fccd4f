"""The case's query with nothing of the harness around it, for `spark-submit`: the restart
floor (benchmarks/test_restart_floor.py).

    spark-submit --master M --jars J [--conf k=v ...] benchmarks/plain_query.py DRIVER_JSON CHECKPOINT

It reads the case's driver.json for what the query is (topic, pipeline, sink) and builds
it as the driver program does, on CHECKPOINT, then writes each batch straight into the
sink: no commit gate, no progress listener, no control channel, no status file. It runs
until it is killed.
"""

from __future__ import annotations

import sys
from pathlib import Path

from workloads import plugins
from workloads.pipelines.config import DriverConfig
from workloads.pipelines.source import parse_events, read_kafka
from workloads.sinks import sink_target


def main(driver_json: str, checkpoint: str) -> None:
    from pyspark.sql import SparkSession

    config = DriverConfig.read(Path(driver_json))
    plugins.add_import_paths(config.import_paths)
    spark = SparkSession.builder.appName("plain-query").getOrCreate()
    sink_class = plugins.load(config.sink_class or sink_target(config.sink, None), "sink_class")
    sink = sink_class(config.sink_context)
    sink.setup()
    events = parse_events(read_kafka(spark, config.bootstrap_servers, config.topic,
                                     {"startingOffsets": "earliest", **config.source_options}))
    out = plugins.load(config.build, "pipeline.build")(events, dict(config.params))
    out = out.select(*config.sink_context.columns)
    (out.writeStream.outputMode("append").queryName("plain-query")
     .trigger(processingTime=f"{config.trigger_ms} milliseconds")
     .option("checkpointLocation", checkpoint)
     .foreachBatch(sink.write).start().awaitTermination())


if __name__ == "__main__":
    main(*sys.argv[1:3])
