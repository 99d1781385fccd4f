"""What one small append into Delta costs on this machine, and which setting changes it.

    python benchmarks/delta_append.py [MASTER] [spark.conf.key=value ...]

Appends 8 batches of 300 rows (the size of a micro-batch at 300 events/s) into a fresh
Delta table with `txnAppId`/`txnVersion`, as DeltaBatchSink does, and prints each
append's seconds. The first two pay for a cold JVM; the rest are the steady cost. The
sinks' `spark.databricks.delta.snapshotPartitions = 2` came from this script (docs/performance.md,
"Delta snapshot partitions"). Needs the Delta jars (`python -m harness fetch`).
"""

from __future__ import annotations

import sys
import tempfile
import time

from harness import jvm
from workloads.sinks import SINKS

BATCHES, ROWS = 8, 300


def main(argv: list[str]) -> None:
    from pyspark.sql import SparkSession

    master = argv[0] if argv and "=" not in argv[0] else "local-cluster[2,1,1024]"
    conf = {**SINKS["delta_batch"].spark_conf,
            **dict(kv.split("=", 1) for kv in argv if "=" in kv)}
    builder = (SparkSession.builder.master(master).appName("delta-append")
               .config("spark.jars", ",".join(str(j) for j in jvm.spark_extra_jars("delta")))
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false"))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    print(f"master {master}; {', '.join(f'{k}={v}' for k, v in conf.items() if 'delta' in k)}")
    with tempfile.TemporaryDirectory() as table:
        for i in range(BATCHES):
            started = time.perf_counter()
            (spark.range(i * ROWS, (i + 1) * ROWS).selectExpr("id AS event_id", "CAST(id AS STRING) AS key")
             .write.format("delta").mode("append")
             .option("txnAppId", "bench").option("txnVersion", i).save(table))
            print(f"append {i}: {time.perf_counter() - started:.2f} s", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
