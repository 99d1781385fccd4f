"""Spark's own Kafka sink (at-least-once), and a reader that sees what a consumer would.

Each output row becomes one record, its value the row as JSON, in a topic of its own
(created with broker append times, so a record's timestamp is when it became visible).
The sink is not transactional: a batch Spark runs again after a restart is sent again,
so it is at-least-once, and exactly-once is refused. The reader consumes the whole topic
with `isolation_level=read_committed`, as a careful consumer would.
"""

from __future__ import annotations

import json
import time

from workloads.sinks import SinkContext

READ_TIMEOUT_S = 120.0


class KafkaTopicSink:
    streaming_format = True      # the driver starts it with start(df, configured), not foreachBatch

    def __init__(self, ctx: SinkContext):
        if ctx.guarantee != "at-least-once":
            raise ValueError(f"Spark's Kafka sink is at-least-once, not {ctx.guarantee!r}")
        if ctx.bootstrap_servers is None:
            raise ValueError("the Kafka sink needs ctx.bootstrap_servers")
        self.ctx, self.topic = ctx, ctx.name

    def setup(self) -> None:
        from workloads.generator.run import create_topic

        create_topic(self.ctx.bootstrap_servers or "", self.topic, partitions=1, exist_ok=True)

    def start(self, df, configured):
        from pyspark.sql import functions as F

        records = df.select(F.to_json(F.struct(*self.ctx.columns)).alias("value"))
        return (configured(records).format("kafka")
                .option("kafka.bootstrap.servers", self.ctx.bootstrap_servers)
                .option("topic", self.topic).start())

    def write(self, batch_df, batch_id: int) -> None:
        raise NotImplementedError("the Kafka sink is Spark's own: the driver calls start()")

    def read(self):
        """Every committed record of the topic, parsed, with its append time as committed_ms."""
        import pandas as pd
        from kafka import TopicPartition

        from workloads.kafka_admin import client

        with client("consumer", self.ctx.bootstrap_servers or "", enable_auto_commit=False,
                    isolation_level="read_committed", consumer_timeout_ms=5000) as consumer:
            consumer.topics()   # a metadata request, so that the topic's partitions are known
            known = consumer.partitions_for_topic(self.topic) or set()
            parts = [TopicPartition(self.topic, p) for p in sorted(known)]
            consumer.assign(parts)
            consumer.seek_to_beginning(*parts)
            ends = consumer.end_offsets(parts)
            rows = []
            deadline = time.monotonic() + READ_TIMEOUT_S
            while any(consumer.position(tp) < ends[tp] for tp in parts):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"reading topic {self.topic} did not reach its end offsets {ends} "
                                       f"within {READ_TIMEOUT_S:.0f}s")
                for records in consumer.poll(timeout_ms=1000).values():
                    rows.extend({**json.loads(r.value), "committed_ms": r.timestamp} for r in records)
        columns = [*self.ctx.columns, "committed_ms"]
        out = pd.DataFrame(rows, columns=columns)
        ints = {c: "int64" for c, t in self.ctx.columns.items() if t.upper() in ("LONG", "INT")}
        return out.astype({**ints, "committed_ms": "int64"}) if len(out) else out

    def close(self) -> None:
        pass
