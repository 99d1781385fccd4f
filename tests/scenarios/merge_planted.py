"""The foreach_batch example's write_batch with the bug teams ship most: a MERGE that adds each
batch's counts to the totals with no batch id to guard it. A batch Spark runs again after a
restart is added twice (benchmarks/test_foreach_batch.py; its correct twin is
examples/merge/job.py's write_batch)."""

from pyspark.sql import functions as F


def write_batch_adds(df, batch_id):
    from delta.tables import DeltaTable

    spark = df.sparkSession
    totals = spark.conf.get("spark.harness.table.user_totals", "/data/delta/user_totals")
    counts = df.groupBy("user").agg(F.count("*").alias("n"))
    (DeltaTable.createIfNotExists(spark).location(totals).addColumn("user", "string")
     .addColumn("total", "bigint").execute())
    (DeltaTable.forPath(spark, totals).alias("t").merge(counts.alias("s"), "t.user = s.user")
     .whenMatchedUpdate(set={"total": "t.total + s.n"})
     .whenNotMatchedInsert(values={"user": "s.user", "total": "s.n"}).execute())
