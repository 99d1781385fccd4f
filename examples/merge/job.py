"""The foreach_batch example: clicks read from Kafka, and each micro-batch written by the job's own
`write_batch` into two Delta tables, as teams end a job:

  clicks        every click, appended with Delta's idempotent write (txnAppId, txnVersion):
                a batch Spark runs again is skipped by Delta;
  user_totals   each user's running count of clicks, a MERGE keyed on the user, guarded by the
                batch id it keeps (last_batch): a batch Spark runs again matches no row to update.

The harness checks both tables against the same write_batch run once over the batch answer
(docs/your-job.md, "Your own foreachBatch sink"). In production the tables' paths are the
defaults below; under the harness each comes from the session's conf.
"""

from pyspark.sql import functions as F

SCHEMA = "user STRING, page STRING, ts BIGINT"   # ts: epoch milliseconds


def transform(clicks):
    return clicks.select("user", "page", "ts")


def from_kafka(kafka):
    clicks = kafka.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("c")).select("c.*")
    return transform(clicks)


def table(spark, name):
    """Where a table is: the harness's place for it, else production's."""
    return spark.conf.get(f"spark.harness.table.{name}", f"/data/delta/{name}")


def write_batch(df, batch_id):
    from delta.tables import DeltaTable

    spark = df.sparkSession
    clicks, totals = table(spark, "clicks"), table(spark, "user_totals")
    df.persist()   # two writes of one batch: its plan runs once
    try:
        (df.write.format("delta").mode("append")
         .option("txnAppId", "clicks-job").option("txnVersion", batch_id).save(clicks))
        counts = (df.groupBy("user").agg(F.count("*").alias("n"))
                  .withColumn("batch_id", F.lit(batch_id).cast("long")))
        (DeltaTable.createIfNotExists(spark).location(totals).addColumn("user", "string")
         .addColumn("total", "bigint").addColumn("last_batch", "bigint").execute())
        (DeltaTable.forPath(spark, totals).alias("t").merge(counts.alias("s"), "t.user = s.user")
         .whenMatchedUpdate(condition="t.last_batch < s.batch_id",
                            set={"total": "t.total + s.n", "last_batch": "s.batch_id"})
         .whenNotMatchedInsert(values={"user": "s.user", "total": "s.n", "last_batch": "s.batch_id"})
         .execute())
    finally:
        df.unpersist()
