"""Sessionization: each user's clicks grouped into sessions that a 30 s silence closes.

A plain PySpark job. The harness imports `transform` (or `from_kafka`); on its own it runs
against a real topic of JSON clicks:

    spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0 \\
        examples/my-job/job.py BOOTSTRAP_SERVERS TOPIC CHECKPOINT_DIR

and prints each closed session to the console.
"""

from __future__ import annotations

import sys

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

SCHEMA = "user STRING, page STRING, ts BIGINT"   # ts: epoch milliseconds
GAP = "30 seconds"
DELAY = "10 seconds"   # a click comes up to 4 s after a newer one (replay-preview: max 4.0 s)


def transform(clicks: DataFrame) -> DataFrame:
    """Closed sessions: user, start and end (epoch ms), clicks and distinct pages."""
    timed = clicks.withColumn("at", F.timestamp_millis("ts")).withWatermark("at", DELAY)
    sessions = timed.groupBy("user", F.session_window("at", GAP).alias("session")).agg(
        F.count("*").alias("clicks"), F.max("ts").alias("last_click_ms"))
    return sessions.select("user", F.unix_millis("session.start").alias("session_start"),
                           F.unix_millis("session.end").alias("session_end"), "clicks", "last_click_ms")


def from_kafka(kafka: DataFrame) -> DataFrame:
    """The same job from Kafka's raw columns: the value is one JSON click."""
    clicks = kafka.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("c")).select("c.*")
    return transform(clicks)


def main(argv: list[str]) -> int:
    from pyspark.sql import SparkSession

    bootstrap, topic, checkpoint = argv[1:4]
    spark = SparkSession.builder.appName("sessions").config("spark.sql.session.timeZone", "UTC").getOrCreate()
    kafka = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest").load())
    query = (from_kafka(kafka).writeStream.outputMode("append").format("console")
             .option("checkpointLocation", checkpoint).start())
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
