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


def rate_events(spark, rows_per_batch: int, partitions: int = 2, keys: int = 1000):
    """Events without Kafka, for Spark's own ceiling: the `rate-micro-batch` source's rows
    in the parsed stream's columns. Event time advances one second a batch (the source's
    default), so windows close and state is evicted as in a real run."""
    from pyspark.sql import functions as F

    from workloads.generator.plan import EVENT_TYPES

    rows = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows_per_batch)
            .option("numPartitions", partitions).load())
    value, types = F.col("value"), F.array(*(F.lit(t) for t in EVENT_TYPES))
    return rows.select(
        value.alias("event_id"), F.concat(F.lit("k"), (value % keys).cast("string")).alias("key"),
        F.unix_millis("timestamp").alias("event_time_ms"), (value % 100).cast("string").alias("user"),
        (value % 1000).cast("string").alias("item"), (value % 100).alias("amount"),
        F.element_at(types, (value % len(EVENT_TYPES) + 1).cast("int")).alias("type"),
        (value % partitions).cast("int").alias("partition"), value.alias("offset"),
        F.col("timestamp").alias("kafka_timestamp"), F.col("timestamp").alias("event_time"))
