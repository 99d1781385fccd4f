"""Benchmark and fault-injection harness for Spark Structured Streaming.

Importing this package is cheap: pyspark and the Kafka clients are imported inside
the functions that need them.
"""

__version__ = "0.1.0"
