"""Enrichment: each order line joined with the product catalogue, a static table.

A plain PySpark job: a stream-static left join, stateless, written to Delta. The harness
imports `transform`; on its own it runs against a real topic of JSON orders:

    spark-submit \\
        --packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0,io.delta:delta-spark_4.2_2.13:4.4.0 \\
        examples/enrichment/job.py BOOTSTRAP_SERVERS TOPIC CHECKPOINT_DIR OUTPUT_TABLE

The catalogue is products.parquet beside this file (make_data.py writes it).
"""

from __future__ import annotations

import sys
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

SCHEMA = "order_id STRING, customer STRING, product_id INT, quantity INT, ts BIGINT"
CATALOGUE = Path(__file__).with_name("products.parquet")


def transform(orders: DataFrame) -> DataFrame:
    """Each order line with its product's name, category and the line's amount; a product the
    catalogue lacks keeps the order, with nulls."""
    products = orders.sparkSession.read.parquet(str(CATALOGUE))
    lines = orders.join(F.broadcast(products), "product_id", "left")
    return lines.select("order_id", "customer", "product_id", "quantity", "ts", "name", "category",
                        (F.col("quantity") * F.col("unit_price_cents")).alias("amount_cents"))


def main(argv: list[str]) -> int:
    from pyspark.sql import SparkSession

    bootstrap, topic, checkpoint, table = argv[1:5]
    spark = (SparkSession.builder.appName("enrichment")
             .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
             .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
             .getOrCreate())
    kafka = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest").load())
    orders = kafka.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("o")).select("o.*")
    query = (transform(orders).writeStream.format("delta").outputMode("append")
             .option("checkpointLocation", checkpoint).start(table))
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
