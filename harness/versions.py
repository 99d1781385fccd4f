"""Pinned versions of every external component, in one place.

The Spark connector must match the pyspark version exactly; the Kafka broker is
independent of the client library Spark bundles (Spark stays on kafka-clients 3.9).

Spark is 4.2.0, not 4.3.x: pyspark 4.3.0 is on PyPI but Maven Central (metadata of
2026-10-19, read with `mvn dependency:get ...:RELEASE`) has no spark-sql-kafka-0-10 newer
than 4.2.0, and the connector must match Spark exactly. Raise both together here.
"""

SPARK_VERSION = "4.2.0"
SCALA_BINARY = "2.13"
KAFKA_VERSION = "4.3.1"
# Delta Lake: the PyPI package delta-spark (pyproject.toml) and its jar, pinned together.
# 4.4.0 requires pyspark 4.0.1 to 4.2.0; its jar for Spark 4.2 is delta-spark_4.2_2.13
# (4.4.1 was not on Maven when this was pinned). Raise both together, here and in pyproject.
DELTA_VERSION = "4.4.0"
SPARK_MINOR = ".".join(SPARK_VERSION.split(".")[:2])

# The network fault's TCP proxy, built with `go install` by `python -m harness fetch`.
TOXIPROXY_MODULE = "github.com/Shopify/toxiproxy/v2/cmd/server"
TOXIPROXY_VERSION = "v2.12.0"

# Maven coordinates fetched by `python -m harness fetch-jvm`, one folder each.
JVM_ARTIFACTS = {
    "kafka": f"org.apache.kafka:kafka_{SCALA_BINARY}:{KAFKA_VERSION}",
    # the broker logs through SLF4J 1.7; this binding routes it to Log4j2 (as the Kafka tarball does)
    "kafka-log": "org.apache.logging.log4j:log4j-slf4j-impl:2.25.4",
    "spark-kafka": f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY}:{SPARK_VERSION}",
    "delta": f"io.delta:delta-spark_{SPARK_MINOR}_{SCALA_BINARY}:{DELTA_VERSION}",
}
