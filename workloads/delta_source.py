"""A Delta table as the query's source (`[source] kind = "delta"`): the appender that fills it,
and the map from the Delta source's offsets back to the topic's.

    python -m workloads.delta_source BOOTSTRAP TOPIC TABLE [--every 1s]

The generator sends its events to the case's topic as for every case, so ground truth, the
lag and the generator's figures are today's. The appender reads the topic from its start
(kafka-python, no consumer group) and appends what it read to the Delta table at TABLE every
`--every`, one commit per append: one Parquet file with the Kafka source's own columns (key,
value, topic, partition, offset, timestamp, timestampType), so the query parses the same rows
whichever source it reads, and a `_delta_log/<version>.json` with its `add` action, written to
a temporary name and linked into place (a version is never written twice, and a reader never
sees half of one). Version 0 holds the table's protocol and schema and no file.

`source-manifest.jsonl` beside the table maps each version to the topic's end offsets once it is
read: {"version": v, "file": "part-...parquet", "records": n, "ends": {"0": 1234, ...}}.
`kafka_offsets()` turns a Delta source offset ({"reservoirVersion", "index", ...}) into the
topic's offsets read, through it, so that the harness's lag, checker and stories read a Delta
query's progress and checkpoint as they read a Kafka query's.

The appender stops on SIGTERM after appending what it holds.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import time
import uuid
from pathlib import Path

LOG = "_delta_log"
MANIFEST = "source-manifest.jsonl"
END_INDEX = 2**63 - 1   # Delta's DeltaSourceOffset.END_INDEX: a version read to its end
# the Kafka source's columns, as Spark's schema JSON writes them (what parse_events reads)
COLUMNS = (("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "integer"),
           ("offset", "long"), ("timestamp", "timestamp"), ("timestampType", "integer"))


def manifest_path(table: Path) -> Path:
    return Path(table).parent / MANIFEST


TABLE = "source-table"   # in the case's directory, beside its checkpoints


@functools.lru_cache(maxsize=64)
def _cached(path: str, mtime_ns: int) -> Manifest:
    return Manifest(Path(path))


def manifest_in(case_dir: Path) -> Manifest:
    """The case's manifest, read again only when it changed."""
    path = Path(case_dir) / MANIFEST
    try:
        return _cached(str(path), path.stat().st_mtime_ns)
    except FileNotFoundError:
        return Manifest(path)


class Manifest:
    """The appender's record of each version: the topic's end offsets once it is read."""

    def __init__(self, path: Path):
        self.ends: dict[int, dict[int, int]] = {0: {}}
        self.files: dict[int, str] = {}
        self.records: dict[int, int] = {}
        if Path(path).exists():
            for line in Path(path).read_text().splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue   # a line cut by a kill
                v = int(entry["version"])
                self.ends[v] = {int(p): int(o) for p, o in entry["ends"].items()}
                self.files[v] = entry.get("file", "")
                self.records[v] = int(entry.get("records", 0))

    @property
    def latest(self) -> int:
        return max(self.ends)

    def through(self, version: int) -> dict[int, int]:
        """The topic's offsets read once every version up to `version` is read."""
        known = [v for v in self.ends if v <= version]
        return dict(self.ends[max(known)]) if known else {}


def is_delta_offset(offset) -> bool:
    return isinstance(offset, dict) and "reservoirVersion" in offset


def kafka_offsets(offset: dict, manifest: Manifest) -> dict[int, int]:
    """The topic's offsets a Delta source offset has read through. A version's index -1 (Delta's
    BASE_INDEX) means none of its files yet; index k, its files up to k (each version here has
    one); END_INDEX, all of it. An initial snapshot's files are the versions in order."""
    version, index = int(offset["reservoirVersion"]), int(offset.get("index", -1))
    if offset.get("isInitialSnapshot", offset.get("isStartingVersion", False)):
        files = [v for v in sorted(manifest.files) if v <= version and manifest.files[v]]
        if index >= END_INDEX or index >= len(files) - 1:
            return manifest.through(version)
        return manifest.through(files[index]) if index >= 0 else {}
    return manifest.through(version if index >= 0 else version - 1)


def topic_offsets(offset: dict, topic: str, case_dir: Path | None) -> dict[int, int]:
    """The topic's offsets in one source's offset (an offset log's line, a progress record's):
    Kafka's as they are; a Delta source's turned into the topic's it has read through, by the
    manifest in the case's directory."""
    if case_dir is not None and is_delta_offset(offset):
        return kafka_offsets(offset, manifest_in(case_dir))
    return {int(p): int(o) for p, o in offset.get(topic, {}).items()}


def translate_progress(record: dict, topic: str, manifest_file: Path) -> dict:
    """A progress record of a Delta query with each Delta source's offsets also as the topic's
    (`startOffset`, `endOffset`, `latestOffset` in the Kafka source's form); Delta's own are kept
    under `delta<Name>`."""
    manifest = None
    for source in record.get("sources", []):
        for key in ("startOffset", "endOffset", "latestOffset"):
            value = source.get(key)
            if isinstance(value, str):
                try:
                    value = json.loads(value)
                except ValueError:
                    continue
            if not is_delta_offset(value):
                continue
            manifest = manifest or Manifest(manifest_file)
            source["delta" + key[0].upper() + key[1:]] = value
            source[key] = {topic: {str(p): o for p, o in kafka_offsets(value, manifest).items()}}
    return record


def _schema() -> str:
    return json.dumps({"type": "struct", "fields": [
        {"name": name, "type": kind, "nullable": True, "metadata": {}} for name, kind in COLUMNS]})


class Appender:
    """Appends what it read of the topic to the table, one commit at a time."""

    def __init__(self, bootstrap: str, topic: str, table: Path):
        self.bootstrap, self.topic, self.table = bootstrap, topic, Path(table)
        self.log = self.table / LOG
        self.manifest = manifest_path(self.table)
        self.version = 0
        self.ends: dict[int, int] = {}
        self.pending: list = []

    def create(self) -> None:
        """Version 0: the protocol and the schema, no file (written once; a restart finds it)."""
        self.log.mkdir(parents=True, exist_ok=True)
        existing = sorted(int(p.name[:20]) for p in self.log.glob("*.json") if p.name[:20].isdigit())
        if existing:
            self.version = existing[-1]
            self.ends = Manifest(self.manifest).through(self.version)
            return
        now = int(time.time() * 1000)
        self._commit(0, [
            {"commitInfo": {"timestamp": now, "operation": "CREATE TABLE", "engineInfo": "harness appender"}},
            {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
            {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                          "schemaString": _schema(), "partitionColumns": [], "configuration": {},
                          "createdTime": now}}])
        with open(self.manifest, "a") as f:
            f.write(json.dumps({"version": 0, "file": "", "records": 0, "ends": {}}) + "\n")

    def _commit(self, version: int, actions: list[dict]) -> None:
        final = self.log / f"{version:020d}.json"
        tmp = self.log / f".{version:020d}.json.{uuid.uuid4().hex}.tmp"
        tmp.write_text("".join(json.dumps(a) + "\n" for a in actions))
        try:
            os.link(tmp, final)   # never over an existing version
        finally:
            tmp.unlink(missing_ok=True)

    def add(self, records) -> None:
        self.pending.extend(records)

    def append(self) -> int:
        """One commit of what was read since the last one: how many records it held."""
        if not self.pending:
            return 0
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = self.pending
        self.pending = []
        name = f"part-{self.version + 1:05d}-{uuid.uuid4()}.parquet"
        table = pa.table({
            "key": pa.array([r.key for r in rows], pa.binary()),
            "value": pa.array([r.value for r in rows], pa.binary()),
            "topic": pa.array([r.topic for r in rows], pa.string()),
            "partition": pa.array([r.partition for r in rows], pa.int32()),
            "offset": pa.array([r.offset for r in rows], pa.int64()),
            "timestamp": pa.array([r.timestamp * 1000 for r in rows], pa.timestamp("us", tz="UTC")),
            "timestampType": pa.array([r.timestamp_type for r in rows], pa.int32())})
        pq.write_table(table, self.table / name)
        size = (self.table / name).stat().st_size
        now = int(time.time() * 1000)
        self.version += 1
        self._commit(self.version, [
            {"commitInfo": {"timestamp": now, "operation": "WRITE", "engineInfo": "harness appender",
                            "operationParameters": {"mode": "Append"}}},
            {"add": {"path": name, "partitionValues": {}, "size": size, "modificationTime": now,
                     "dataChange": True, "stats": json.dumps({"numRecords": len(rows)})}}])
        for r in rows:
            self.ends[r.partition] = max(self.ends.get(r.partition, 0), r.offset + 1)
        with open(self.manifest, "a") as f:
            f.write(json.dumps({"version": self.version, "file": name, "records": len(rows),
                                "ends": {str(p): o for p, o in sorted(self.ends.items())}}) + "\n")
        return len(rows)


def main(argv: list[str]) -> int:
    import argparse

    from kafka import KafkaConsumer, TopicPartition

    from workloads.validate import parse_duration_ms

    parser = argparse.ArgumentParser(prog="python -m workloads.delta_source")
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("table", type=Path)
    parser.add_argument("--every", default="1s", help="how often it appends a commit")
    args = parser.parse_args(argv[1:])
    every_s = parse_duration_ms(args.every, "--every") / 1000
    appender = Appender(args.bootstrap, args.topic, args.table)
    appender.create()
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    consumer = KafkaConsumer(bootstrap_servers=args.bootstrap, enable_auto_commit=False, group_id=None,
                             auto_offset_reset="earliest")
    assigned: set[int] = set()
    print(f"appending {args.topic} to {args.table} every {every_s:g} s (version {appender.version})",
          flush=True)
    next_at = time.monotonic() + every_s
    while not stopping:
        partitions = consumer.partitions_for_topic(args.topic) or set()
        if partitions - assigned:   # the topic gained partitions (kafka-partitions)
            appender.append()       # what was read so far first: the seeks below restart from it
            assigned = set(partitions)
            tps = [TopicPartition(args.topic, p) for p in sorted(assigned)]
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, appender.ends.get(tp.partition, 0))
        for batch in consumer.poll(timeout_ms=max(1, int((next_at - time.monotonic()) * 1000))).values():
            appender.add(batch)
        if time.monotonic() >= next_at:
            appender.append()
            next_at = time.monotonic() + every_s
    appender.append()
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
