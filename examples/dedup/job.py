"""Deduplication: each payment once, however often its client retried it.

A plain PySpark job. The harness imports `transform`; on its own it runs against a real
topic of JSON payments:

    spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0 \\
        examples/dedup/job.py BOOTSTRAP_SERVERS TOPIC CHECKPOINT_DIR

Retries come within seconds, so a 30 s watermark delay keeps every copy's twin in state
(dropDuplicatesWithinWatermark keeps a payment id until the watermark passes its event time
plus the delay).
"""

from __future__ import annotations

import sys

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

SCHEMA = "payment_id STRING, account STRING, amount_cents BIGINT, ts BIGINT"
DELAY = "30 seconds"


def transform(payments: DataFrame) -> DataFrame:
    """Each payment once: the first copy of each payment id."""
    timed = payments.withColumn("at", F.timestamp_millis("ts")).withWatermark("at", DELAY)
    return timed.dropDuplicatesWithinWatermark(["payment_id"]).drop("at")


def main(argv: list[str]) -> int:
    from pyspark.sql import SparkSession

    bootstrap, topic, checkpoint = argv[1:4]
    spark = SparkSession.builder.appName("dedup").config("spark.sql.session.timeZone", "UTC").getOrCreate()
    kafka = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest").load())
    payments = kafka.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("p")).select("p.*")
    query = (transform(payments).writeStream.outputMode("append").format("console")
             .option("checkpointLocation", checkpoint).start())
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
