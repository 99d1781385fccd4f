"""The source every pipeline reads: Kafka records parsed from the wire format."""

from __future__ import annotations

from workloads.wire import SPARK_SCHEMA


def read_kafka(spark, bootstrap_servers: str, topic: str, options: dict[str, str] | None = None):
    """The topic as a stream, from its earliest offsets unless `options` say otherwise
    (startingOffsets = latest), failing on data loss."""
    reader = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap_servers)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest")
              .option("failOnDataLoss", "true"))
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    return reader.load()


def parse_events(kafka_df):
    """Kafka records -> the events: every wire field, `event_time` as a timestamp, and Kafka's
    `partition`, `offset` and `kafka_timestamp` (the broker's append time)."""
    from pyspark.sql import functions as F

    parsed = kafka_df.select(F.from_json(F.col("value").cast("string"), SPARK_SCHEMA).alias("e"),
                             "partition", "offset", F.col("timestamp").alias("kafka_timestamp"))
    return (parsed.select("e.*", "partition", "offset", "kafka_timestamp")
            .withColumn("event_time", F.timestamp_millis("event_time_ms")))
