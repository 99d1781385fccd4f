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


def read_delta(spark, table: str, options: dict[str, str] | None = None):
    """The Delta table the harness appends the topic's records to (workloads/delta_source.py),
    as a stream in the Kafka source's columns; `startingOffsets = latest` becomes Delta's
    `startingVersion = latest`, and Kafka-only options are left out."""
    options = dict(options or {})
    reader = spark.readStream.format("delta")
    if options.pop("startingOffsets", "earliest") == "latest":
        reader = reader.option("startingVersion", "latest")
    if "failOnDataLoss" in options:
        reader = reader.option("failOnDataLoss", options["failOnDataLoss"])
    return reader.load(table)


def parse_events(kafka_df):
    """Kafka records -> the events: every wire field, `event_time` as a timestamp, and Kafka's
    `partition`, `offset` and `kafka_timestamp` (the broker's append time)."""
    from pyspark.sql import functions as F

    parsed = kafka_df.select(F.from_json(F.col("value").cast("string"), SPARK_SCHEMA).alias("e"),
                             "partition", "offset", F.col("timestamp").alias("kafka_timestamp"))
    return (parsed.select("e.*", "partition", "offset", "kafka_timestamp")
            .withColumn("event_time", F.timestamp_millis("event_time_ms")))


def rate_events(spark, rows_per_batch: int, partitions: int = 2, keys: int = 1000, nexmark: bool = False):
    """Events without Kafka, for Spark's own ceiling: the `rate-micro-batch` source's rows
    in the parsed stream's columns. Event time advances one second a batch (the source's
    default), so windows close and state is evicted as in a real run. With `nexmark`, each
    row is also a Nexmark event (nexmark_columns): the same kinds, ids and field sizes as
    the generator's, from arithmetic on the row's number instead of its random draws."""
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
        F.col("timestamp").alias("kafka_timestamp"), F.col("timestamp").alias("event_time"),
        *(nexmark_columns(value) if nexmark else ()))


def nexmark_columns(e):
    """Nexmark's event kind and its Person, Auction or Bid for row number `e` (a Column): kinds
    1:3:46 by e mod 50, dense person and auction ids, half the bids on a hot auction, and
    strings of Nexmark's sizes; the draws of workloads/generator/nexmark.py replaced by hashes."""
    from pyspark.sql import functions as F

    rem, epoch = e % 50, F.floor(e / 50)
    kind = F.when(rem < 1, 0).when(rem < 4, 1).otherwise(2)
    person_id = epoch + 1000
    auction_id = epoch * 3 + F.greatest(F.least(rem - 1, F.lit(2)), F.lit(0)) + 1000
    h = F.abs(F.xxhash64(e))
    pad = F.repeat(F.lit("x"), 1)

    def text(n: int):
        return F.substring(F.sha2(e.cast("string"), 256), 1, n)

    person = F.struct(person_id.alias("id"), F.lit("Vicky Abrams").alias("name"),
                      F.concat(text(6), F.lit("@"), text(4), F.lit(".com")).alias("emailAddress"),
                      F.lit("1707 3275 2618 7202").alias("creditCard"), F.lit("Portland").alias("city"),
                      F.lit("OR").alias("state"), F.repeat(pad, 130).alias("extra"))
    auction = F.struct(auction_id.alias("id"), text(10).alias("itemName"), F.concat(text(64), text(8)).alias(
        "description"), (h % 1_000_000 + 100).alias("initialBid"), (h % 2_000_000 + 200).alias("reserve"),
        (F.unix_millis(F.col("timestamp")) + h % 3332).alias("expires"),
        (F.floor(epoch / 100) * 100 + 1000).alias("seller"), (h % 5 + 10).alias("category"),
        F.repeat(pad, 380).alias("extra"))
    hot = h % 2 == 0
    bid = F.struct(F.when(hot, F.floor(epoch * 3 / 100) * 100 + 1000).otherwise(epoch * 3 + h % 10 + 1000)
                   .alias("auction"), (F.floor(epoch / 100) * 100 + 1001).alias("bidder"),
                   (h % 100_000_000 + 100).alias("price"),
                   F.when(hot, F.lit("Google"))
                   .otherwise(F.concat(F.lit("channel-"), (h % 10_000).cast("string"))).alias("channel"),
                   F.concat(F.lit("https://www.nexmark.com/"), text(4), F.lit("/"), text(3), F.lit("/"),
                            text(4), F.lit("/item.htm?query=1&channel_id="),
                            (h % 10_000).cast("string")).alias("url"),
                   F.repeat(pad, 68).alias("extra"))
    return (kind.alias("event_type"), F.when(kind == 0, person).alias("person"),
            F.when(kind == 1, auction).alias("auction"), F.when(kind == 2, bid).alias("bid"))
