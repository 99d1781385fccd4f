"""Sources with the shape of publicly reported source bugs, and their fixes: models.

Each is a Python streaming data source (Spark's DataSourceStreamReader) that a pipeline's
`build` reads instead of the harness's source (docs/pipelines-and-sinks.md: `params` names the
case's table or topic), with offsets in the form of the source it models, so that the harness's
checker reads its checkpoint as that source's. The bugs were fixed before Spark 4.2 and Delta 4.x,
whose own sources hold under the same faults (docs/faults.md).

## delta-io/delta PR 6314: a version one listing missed, skipped

delta-io/delta PR 6314: the Delta source's `latestOffset` and `getBatch` list `_delta_log`
independently; when a commit file is missing from `getBatch`'s listing (an object store's
inconsistent listing), the batch silently ends before it, Spark commits the batch's end offset,
and the version's data is never read. Delta 4.x checks that the batch read every version up to
its end (the fix), and this harness's Delta source runs held under `hide-commit` (docs/faults.md).
delta-rs's `peek_next_commit` (delta-io/delta-rs PR 1937) states the same behaviour as its
design: "If there is a missed commit, it will skip the missed commit."

`ListingDeltaSource` reads the harness's Delta table (workloads/delta_source.py), each version's
Parquet file of the Kafka source's columns, with Delta's offsets (`reservoirVersion`, `index`).
Each batch plans from a listing of `_delta_log`:

- `trust_listing` (the bug): a batch reads the versions its own listing shows between its start
  and end offsets, and a version the listing leaves out is skipped for good;
- `contiguous` (the fix): `latestOffset` stops before the first version missing from the
  listing, and a batch that finds a version of its range missing fails instead of skipping it
  (PR 6314's sanity check).

## SPARK-25214: the Kafka source duplicates over missing offsets under failOnDataLoss=false

apache/spark PR 22207: "When there are missing offsets, Kafka v2 source may return duplicated
records when failOnDataLoss=false because it doesn't skip missing offsets." `OffsetsKafkaSource`
reads a batch's range of each partition record by record, asking for the next offset each
time; Kafka answers a deleted offset with the first record after it:

- `steps_by_one` (the bug): the next offset asked is the one asked plus one, so the first record
  after a deleted run comes back once per missing offset before it, and again as itself;
- `skips_missing` (the fix): the next offset asked is the record's own plus one.
"""

from __future__ import annotations

import json
import os

from workloads.delta_source import LOG
from workloads.kafka_admin import client

try:
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
except ImportError:   # the harness's process imports the module to check the builds' names
    DataSource = DataSourceStreamReader = InputPartition = object

NAME = "harness_listing_delta"
SCHEMA = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
          "timestampType int")


def _offset(version: int) -> dict:
    """Delta's offset for "every version before `version` is read" (BASE_INDEX)."""
    return {"sourceVersion": 1, "reservoirId": "listing-model", "reservoirVersion": version, "index": -1,
            "isStartingVersion": False}


def listed(table: str) -> set[int]:
    """The versions one listing of the table's `_delta_log` shows."""
    try:
        names = os.listdir(os.path.join(table, LOG))
    except FileNotFoundError:
        return set()
    return {int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit()}


class _Version(InputPartition):
    def __init__(self, version: int, files: list[str]):
        self.version, self.files = version, files


class _Reader(DataSourceStreamReader):
    def __init__(self, table: str, contiguous: bool):
        self.table, self.contiguous = table, contiguous

    def initialOffset(self) -> dict:
        return _offset(1)   # version 0 holds the table's protocol and schema, no file

    def latestOffset(self, start=None, limit=None) -> dict:
        # never before `start`: a version read before it went missing from a listing stays read
        floor = int(start["reservoirVersion"]) if start else 1
        versions = listed(self.table)
        if not self.contiguous:
            return _offset(max(floor, max(versions, default=0) + 1))
        last = floor - 1
        while last + 1 in versions:
            last += 1
        return _offset(last + 1)

    def partitions(self, start: dict, end: dict):
        first, stop = int(start["reservoirVersion"]), int(end["reservoirVersion"])
        versions = listed(self.table)
        missing = [v for v in range(first, stop) if v not in versions]
        if missing and self.contiguous:
            raise RuntimeError(f"the batch's range (versions {first}-{stop - 1}) has versions {missing} "
                               "missing from the listing of _delta_log: not skipping them "
                               "(delta-io/delta PR 6314's check)")
        return [_Version(v, self._files(v)) for v in range(first, stop) if v in versions]

    def _files(self, version: int) -> list[str]:
        with open(os.path.join(self.table, LOG, f"{version:020d}.json")) as f:
            actions = [json.loads(line) for line in f if line.strip()]
        return [os.path.join(self.table, a["add"]["path"]) for a in actions if "add" in a]

    def read(self, partition: _Version):
        import pyarrow.parquet as pq

        for path in partition.files:
            yield from pq.read_table(path).to_batches()


class ListingDeltaSource(DataSource):
    """options: `path` (the table), `mode` ("trust_listing" or "contiguous")."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema):
        return _Reader(self.options["path"], self.options.get("mode", "contiguous") == "contiguous")


KAFKA_NAME = "harness_offsets_kafka"
EMPTY_POLLS = 30   # a task that cannot read its range fails (Spark retries it), never returns less


class _Range(InputPartition):
    def __init__(self, partition: int, start: int, end: int):
        self.partition, self.start, self.end = partition, start, end


class _KafkaReader(DataSourceStreamReader):
    def __init__(self, bootstrap: str, topic: str, skip_missing: bool):
        self.bootstrap, self.topic, self.skip_missing = bootstrap, topic, skip_missing

    def _ends(self) -> dict[int, int]:
        from kafka import TopicPartition

        with client("consumer", self.bootstrap) as consumer:
            ids = sorted(consumer.partitions_for_topic(self.topic) or ())
            parts = [TopicPartition(self.topic, p) for p in ids]
            return {tp.partition: o for tp, o in consumer.end_offsets(parts).items()}

    def initialOffset(self) -> dict:
        return {self.topic: {str(p): 0 for p in self._ends()}}

    def latestOffset(self, start=None, limit=None) -> dict:
        return {self.topic: {str(p): o for p, o in self._ends().items()}}

    def partitions(self, start: dict, end: dict):
        first, last = start.get(self.topic, {}), end.get(self.topic, {})
        return [_Range(int(p), int(first.get(p, 0)), int(o)) for p, o in sorted(last.items())
                if int(o) > int(first.get(p, 0))]

    def read(self, partition: _Range):
        from kafka import TopicPartition

        tp = TopicPartition(self.topic, partition.partition)
        with client("consumer", self.bootstrap, enable_auto_commit=False,
                    auto_offset_reset="earliest") as consumer:
            consumer.assign([tp])
            consumer.seek(tp, partition.start)
            records = []   # what the partition still holds of the range, in order
            empty = 0
            # to the range's end, whatever a poll returns: an empty poll is no end of data (a clock
            # that jumps ends a poll's wait at once: run h3 of hunt 20261126T172013-spark-25214-9577)
            while consumer.position(tp) < partition.end:
                polled = consumer.poll(timeout_ms=1000).get(tp, [])
                empty = 0 if polled else empty + 1
                if empty >= EMPTY_POLLS:
                    raise RuntimeError(f"partition {partition.partition}: offsets {partition.start}-"
                                       f"{partition.end - 1} not read to their end ({consumer.position(tp)}) "
                                       f"after {EMPTY_POLLS} empty polls")
                records += [r for r in polled if partition.start <= r.offset < partition.end]
        for r in answers(records, partition.start, partition.end, self.skip_missing):
            yield (r.key, r.value, self.topic, partition.partition, r.offset,
                   _datetime(r.timestamp), r.timestamp_type)


def answers(records: list, start: int, end: int, skip_missing: bool) -> list:
    """The records a reader returns for offsets [start, end) asked one at a time, each answered
    with the first record at or after it (`records`: what the partition holds of the range, in
    order, each with `.offset`): the next offset asked is the record's own plus one
    (`skip_missing`), or the one asked plus one (SPARK-25214's bug)."""
    out, asked, i = [], start, 0
    while asked < end:
        while i < len(records) and records[i].offset < asked:
            i += 1
        if i == len(records):
            break
        out.append(records[i])
        asked = records[i].offset + 1 if skip_missing else asked + 1
    return out


def _datetime(ms: int):
    import datetime

    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


class OffsetsKafkaSource(DataSource):
    """options: `bootstrap`, `topic`, `mode` ("steps_by_one" or "skips_missing")."""

    @classmethod
    def name(cls) -> str:
        return KAFKA_NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema):
        return _KafkaReader(self.options["bootstrap"], self.options["topic"],
                            self.options.get("mode", "skips_missing") == "skips_missing")


def _passthrough_over(events, params: dict, source, **options):
    """The passthrough pipeline over a model source, read with `options`, in place of `events`."""
    from workloads.pipelines import passthrough
    from workloads.pipelines.source import parse_events

    spark = events.sparkSession
    spark.dataSource.register(source)
    reader = spark.readStream.format(source.name())
    for key, value in options.items():
        reader = reader.option(key, value)
    return passthrough.build(parse_events(reader.load()), params)


def repeats_over_missing(events, params):
    """The passthrough pipeline over the model Kafka source that does not skip missing offsets."""
    return _passthrough_over(events, params, OffsetsKafkaSource, bootstrap=params["bootstrap_servers"],
                             topic=params["source_topic"], mode="steps_by_one")


def skips_missing(events, params):
    """The passthrough pipeline over the model Kafka source that skips them."""
    return _passthrough_over(events, params, OffsetsKafkaSource, bootstrap=params["bootstrap_servers"],
                             topic=params["source_topic"], mode="skips_missing")


def skips_unlisted(events, params):
    """The passthrough pipeline over the model source that skips a version its listing missed."""
    return _passthrough_over(events, params, ListingDeltaSource, path=params["source_table"],
                             mode="trust_listing")


def reads_every_version(events, params):
    """The passthrough pipeline over the model source that reads every version, in order."""
    return _passthrough_over(events, params, ListingDeltaSource, path=params["source_table"],
                             mode="contiguous")
