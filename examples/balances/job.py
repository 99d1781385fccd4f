"""Running balances: each account's balance and number of transactions, kept up to date.

A plain PySpark job in update mode, as teams write it: a watermark before the aggregation
(to bound state, though a grouping without the event time keeps every account), each batch
writing the accounts it changed, upserted by account. The harness imports `from_kafka`; on its
own it runs against a real topic of JSON transactions:

    spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0 \\
        examples/balances/job.py BOOTSTRAP_SERVERS TOPIC CHECKPOINT_DIR
"""

from __future__ import annotations

import sys

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

SCHEMA = "txn_id STRING, account STRING, amount_cents BIGINT, ts BIGINT"


def from_kafka(kafka: DataFrame) -> DataFrame:
    """Kafka's raw columns in, one row per account changed in the batch out."""
    txns = kafka.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("t")).select("t.*")
    timed = txns.withColumn("at", F.timestamp_millis("ts")).withWatermark("at", "20 seconds")
    return timed.groupBy("account").agg(F.sum("amount_cents").alias("balance_cents"),
                                        F.count("*").alias("transactions"),
                                        F.max("ts").alias("last_ts"))


def main(argv: list[str]) -> int:
    from pyspark.sql import SparkSession

    bootstrap, topic, checkpoint = argv[1:4]
    spark = SparkSession.builder.appName("balances").config("spark.sql.session.timeZone", "UTC").getOrCreate()
    kafka = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest").load())
    query = (from_kafka(kafka).writeStream.outputMode("update").format("console")
             .option("checkpointLocation", checkpoint).start())
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
