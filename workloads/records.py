"""The records a case's stream read, as the recorder saved them (workloads/recorder.py), and
what the batch oracle takes of them.

    <case>/records/chunk-<n>.parquet   Kafka's columns, one row per record, as the broker served
                                       them: key, value, topic, partition, offset, timestamp,
                                       timestampType, headers (Spark's Kafka source's names and
                                       types: `SCHEMA`)
    <case>/records/recorder.json       what the recorder read, per partition, and how it ended

    select(records_dir, ranges) -> (table, missing)

`select` keeps the records in `ranges` ([partition, from, until) per run of offsets the
committed batches read), each once, and says which of those the recording lacks: a record
that Kafka deleted before the recorder read it, or a recording cut short. The oracle then
has no verdict to give (harness/check/batch_oracle/spark_run.py: RecordsMissing), never a false
one.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

DIR = "records"
STATE = "recorder.json"
CHUNK = "chunk-{:05d}.parquet"
# Spark's Kafka source with includeHeaders (KafkaRecordToRowConverter.kafkaSchema): every field
# nullable; `timestamp` in microseconds, from Kafka's milliseconds; headers null when a record has none
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                    ("partition", pa.int32()), ("offset", pa.int64()),
                    ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
                    ("headers", HEADERS)])
# the same as Spark DDL, for the batch oracle's DataFrame (workloads/pipelines/job_batch.py)
SPARK_DDL = ("key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP, "
             "timestampType INT, headers ARRAY<STRUCT<key: STRING, value: BINARY>>")


def records_dir(case_dir: Path) -> Path:
    return Path(case_dir) / DIR


def chunks(directory: Path) -> list[Path]:
    """The recording's chunks, in the order they were written."""
    return sorted(Path(directory).glob("chunk-*.parquet"))


def state(directory: Path) -> dict | None:
    """recorder.json, or None when there is none (a run from before the recorder, or no job)."""
    try:
        return json.loads((Path(directory) / STATE).read_text())
    except (OSError, ValueError):
        return None


Runs = list[tuple[int, int, int]]   # (partition, from, until), until exclusive


def select(directory: Path, ranges: Runs) -> tuple[pa.Table, Runs]:
    """The recorded records in `ranges`, each (partition, offset) once, ordered by partition and
    offset; and the runs of offsets in `ranges` the recording lacks, as (partition, from, until)."""
    wanted = _by_partition(ranges)
    parts = []
    for path in chunks(directory):
        table = pq.read_table(path, schema=SCHEMA)
        keep = _in_ranges(table["partition"].to_numpy(), table["offset"].to_numpy(), wanted)
        if keep.any():
            parts.append(table.filter(pa.array(keep)))
    table = pa.concat_tables(parts) if parts else SCHEMA.empty_table()
    table = _once(table)
    partition, offset = table["partition"].to_numpy(), table["offset"].to_numpy()
    have = {p: offset[partition == p] for p in wanted}   # sorted, each once
    return table, _missing(ranges, have)


def describe(missing: list[tuple[int, int, int]], limit: int = 5) -> str:
    """'200 records: partition 0 offsets 0-199, ...' for a message."""
    count = sum(until - start for _, start, until in missing)
    runs = ", ".join(f"partition {p} offsets {s:,}-{u - 1:,}" for p, s, u in missing[:limit])
    more = f" and {len(missing) - limit} more runs" if len(missing) > limit else ""
    return f"{count:,} record{'s' if count != 1 else ''}: {runs}{more}"


def _by_partition(ranges: list[tuple[int, int, int]]) -> dict[int, np.ndarray]:
    out: dict[int, list[tuple[int, int]]] = {}
    for p, start, until in ranges:
        out.setdefault(int(p), []).append((int(start), int(until)))
    return {p: np.array(sorted(r), dtype=np.int64).reshape(-1, 2) for p, r in out.items()}


def _in_ranges(partition: np.ndarray, offset: np.ndarray, wanted: dict[int, np.ndarray]) -> np.ndarray:
    """Whether each (partition, offset) falls in one of its partition's [from, until) runs."""
    keep = np.zeros(len(offset), dtype=bool)
    for p, runs in wanted.items():
        mine = partition == p
        if not mine.any():
            continue
        o = offset[mine]
        i = np.searchsorted(runs[:, 0], o, side="right") - 1   # the run starting at or before o
        inside = (i >= 0) & (o < runs[np.maximum(i, 0), 1])
        keep[np.flatnonzero(mine)[inside]] = True
    return keep


def _once(table: pa.Table) -> pa.Table:
    """Each (partition, offset) once: a consumer that reconnects may be served a record again."""
    if not table.num_rows:
        return table
    order = np.lexsort((table["offset"].to_numpy(), table["partition"].to_numpy()))
    table = table.take(pa.array(order))
    p, o = table["partition"].to_numpy(), table["offset"].to_numpy()
    first = np.ones(len(o), dtype=bool)
    first[1:] = (p[1:] != p[:-1]) | (o[1:] != o[:-1])
    return table.filter(pa.array(first))


def _missing(ranges: list[tuple[int, int, int]], have: dict[int, np.ndarray]) -> list[tuple[int, int, int]]:
    """The runs of offsets in `ranges` absent from `have` (partition -> sorted offsets, each once)."""
    out: list[tuple[int, int, int]] = []
    for p, start, until in ranges:
        got = have.get(int(p), np.array([], dtype=np.int64))
        lo, hi = np.searchsorted(got, [start, until])
        if hi - lo == until - start:   # every offset of the run is there
            continue
        absent = np.setdiff1d(np.arange(start, until, dtype=np.int64), got[lo:hi], assume_unique=True)
        breaks = np.flatnonzero(np.diff(absent) != 1) + 1
        out += [(int(p), int(run[0]), int(run[-1]) + 1) for run in np.split(absent, breaks)]
    return out
