"""The recorder: every record of a case's topic saved to the case's directory while the case
runs, so that the batch oracle reads what the stream read from there, not from Kafka again
(where kafka-retention, or retention itself, may have deleted it by the end of the case).

    python -m workloads.recorder BOOTSTRAP TOPIC OUT_DIR

It tails every partition of TOPIC from its first offset (confluent-kafka, assigned, no consumer
group: nothing is committed, the query's reads are not touched), and takes up partitions added
while it runs (kafka-partitions) from their first offset too. What it read goes to
OUT_DIR/chunk-<n>.parquet (workloads/records.py's SCHEMA: Spark's Kafka columns), a chunk every
FLUSH_S or FLUSH_ROWS records or FLUSH_BYTES, each written under a temporary name and renamed
into place, so memory stays bounded and a chunk is whole or absent. OUT_DIR/recorder.json says
what it has recorded, per partition, after every chunk.

A broker that restarts or pauses is librdkafka's to reconnect to; the recorder goes on where
it was. On SIGTERM it reads on to the end offsets the broker has then (for up to CATCH_UP_S),
writes its last chunk and recorder.json (`caught_up`: whether it reached them), and exits 0.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from workloads.records import CHUNK, SCHEMA, STATE

FLUSH_S = 2.0
FLUSH_ROWS = 50_000
FLUSH_BYTES = 32 * 2**20
CATCH_UP_S = 30.0
# how often it asks for the topic's partitions while it records (HARNESS_RECORDER_METADATA_S: a
# test sets it long, so that only the stop's own asking can find a partition added at the end)
METADATA_EVERY_S = float(os.environ.get("HARNESS_RECORDER_METADATA_S", "1.0"))
# librdkafka's prefetch queue per partition (its default is 64 MiB): the recorder's memory is
# this times the partitions, plus one chunk
QUEUE_KBYTES = 4096


class Chunks:
    """The columns of the records read since the last chunk, and the chunks written."""

    def __init__(self, out: Path, topic: str):
        self.out, self.topic = Path(out), topic
        self.out.mkdir(parents=True, exist_ok=True)
        self.written = len(list(self.out.glob("chunk-*.parquet")))
        self.columns: dict[str, list] = {f.name: [] for f in SCHEMA}
        self.bytes = 0
        self.next: dict[int, int] = {}      # partition -> the offset after the last one read
        self.first: dict[int, int] = {}     # partition -> the first offset read
        self.counts: dict[int, int] = {}
        self.flushed_at = time.monotonic()

    def add(self, message) -> None:
        c, p, o = self.columns, message.partition(), message.offset()
        kind, ms = message.timestamp()
        key, value = message.key(), message.value()
        c["key"].append(key)
        c["value"].append(value)
        c["topic"].append(message.topic())
        c["partition"].append(p)
        c["offset"].append(o)
        c["timestamp"].append(ms * 1000)
        c["timestampType"].append(kind - 1)   # librdkafka's 0/1/2 are Kafka's -1/0/1 (Spark's column)
        c["headers"].append(None if not message.headers() else
                            [{"key": k, "value": v} for k, v in message.headers()])
        self.bytes += len(key or b"") + len(value or b"") + 64
        self.next[p] = max(self.next.get(p, 0), o + 1)
        self.first.setdefault(p, o)
        self.counts[p] = self.counts.get(p, 0) + 1

    def due(self) -> bool:
        rows = len(self.columns["offset"])
        return bool(rows) and (rows >= FLUSH_ROWS or self.bytes >= FLUSH_BYTES
                               or time.monotonic() - self.flushed_at >= FLUSH_S)

    def flush(self) -> None:
        """The records held, as the next chunk (whole or absent: written, then renamed)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.flushed_at = time.monotonic()
        if not self.columns["offset"]:
            return
        table = pa.table({f.name: pa.array(self.columns[f.name], f.type) for f in SCHEMA}, schema=SCHEMA)
        final = self.out / CHUNK.format(self.written)
        tmp = self.out / f".{final.name}.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, final)
        self.written += 1
        self.columns = {f.name: [] for f in SCHEMA}
        self.bytes = 0

    def account(self, status: str, **more) -> None:
        """recorder.json: what is recorded so far, per partition (written, then renamed)."""
        parts = {str(p): {"first": self.first.get(p), "next": n, "records": self.counts.get(p, 0)}
                 for p, n in sorted(self.next.items())}
        body = {"topic": self.topic, "status": status, "chunks": self.written,
                "records": sum(self.counts.values()), "partitions": parts, **more}
        tmp = self.out / f".{STATE}.tmp"
        tmp.write_text(json.dumps(body, indent=2) + "\n")
        os.replace(tmp, self.out / STATE)


class Recorder:
    """A consumer of every partition of the topic, from its first offset, into Chunks."""

    def __init__(self, bootstrap: str, topic: str, out: Path):
        from confluent_kafka import Consumer

        self.topic = topic
        self.chunks = Chunks(out, topic)
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"harness-recorder-{os.getpid()}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "enable.partition.eof": False,
            "fetch.wait.max.ms": 100, "queued.max.messages.kbytes": QUEUE_KBYTES,
            "allow.auto.create.topics": False})
        self.assigned: set[int] = set()
        self.looked_at = 0.0
        self.errors: list[str] = []

    def assign_new(self, force: bool = False) -> bool:
        """Take up partitions the topic has gained (all of them, the first time). True when the
        broker answered (asked now: at most every METADATA_EVERY_S unless forced)."""
        from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

        if not force and time.monotonic() - self.looked_at < METADATA_EVERY_S:
            return False
        self.looked_at = time.monotonic()
        try:
            found = self.consumer.list_topics(self.topic, timeout=2).topics.get(self.topic)
        except KafkaException as exc:   # the broker is restarting: ask again next time
            self._error(f"metadata: {exc}")
            return False
        if found is None or found.error is not None:
            return False
        new = sorted(set(found.partitions) - self.assigned)
        if new:
            self.consumer.incremental_assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in new])
            self.assigned.update(new)
        return True

    def poll(self, timeout_s: float = 0.2) -> None:
        for message in self.consumer.consume(num_messages=10_000, timeout=timeout_s):
            if message.error():
                self._error(str(message.error()))
            else:
                self.chunks.add(message)
        if self.chunks.due():
            self.chunks.flush()
            self.chunks.account("recording", assigned=sorted(self.assigned), errors=self.errors[-5:])

    def ends(self) -> dict[int, int] | None:
        """Every assigned partition's end offset on the broker now (None: it did not answer)."""
        from confluent_kafka import KafkaException, TopicPartition

        out = {}
        try:
            for p in sorted(self.assigned):
                low, high = self.consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=2)
                out[p] = high
        except KafkaException as exc:
            self._error(f"end offsets: {exc}")
            return None
        return out

    def catch_up(self, deadline_s: float = CATCH_UP_S) -> dict:
        """Read on to the end offsets the broker has now: what a stop owes the oracle. The
        topic's partitions are asked for again first (a partition added within the last
        METADATA_EVERY_S would be missed otherwise), and the ends are taken only once the broker
        answered that."""
        until = time.monotonic() + deadline_s
        ends, looked = None, False
        while time.monotonic() < until:
            looked = looked or self.assign_new(force=True)
            ends = self.ends() if ends is None and looked else ends
            if ends is not None and all(self.chunks.next.get(p, 0) >= e for p, e in ends.items()):
                return {"caught_up": True, "ends": {str(p): e for p, e in ends.items()}}
            self.poll(0.1)
        behind = {str(p): e - self.chunks.next.get(p, 0) for p, e in (ends or {}).items()
                  if self.chunks.next.get(p, 0) < e}
        return {"caught_up": False, "behind": behind, "ends": {str(p): e for p, e in (ends or {}).items()}}

    def _error(self, text: str) -> None:
        if not self.errors or self.errors[-1] != text:
            self.errors.append(text)
            print(f"recorder: {text}", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    bootstrap, topic, out = argv[1], argv[2], Path(argv[3])
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    recorder = Recorder(bootstrap, topic, out)
    while not recorder.assigned and not stopping:   # the topic exists before the recorder starts
        recorder.assign_new()
        time.sleep(0.05)
    recorder.chunks.account("recording", assigned=sorted(recorder.assigned), errors=[])
    print(f"recording {topic} (partitions {sorted(recorder.assigned)}) to {out}", flush=True)
    while not stopping:
        recorder.assign_new()
        recorder.poll()
    end = recorder.catch_up()
    recorder.chunks.flush()
    recorder.chunks.account("stopped", assigned=sorted(recorder.assigned), errors=recorder.errors[-5:], **end)
    recorder.consumer.close()
    print(f"stopped: {recorder.chunks.written} chunks, {sum(recorder.chunks.counts.values()):,} records, "
          f"caught up: {end['caught_up']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
