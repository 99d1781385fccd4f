"""One pass over the user's records: how many, their event-time span, how out of order they
are, and the schema a job reads them with.

    scan(source) -> Scan         every record once, a block at a time (bounded memory)
    ddl(arrow_schema) -> str     the schema as Spark's DDL ("user STRING, ts BIGINT")

Order statistics follow the records in file order: a record is out of order when an earlier
one had a later event time, and its lateness is by how much (the running maximum minus its
own). That is what a watermark `delay` must cover for no record to come late when the
records are sent in file order (`python -m harness replay-preview` prints them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import NoReturn

import numpy as np

from workloads.generator.histogram import LogHistogram
from workloads.replay.records import Source, blocks, files_of, format_of

SAMPLE_ROWS = 1_000   # the records a schema is inferred from and checked against


@dataclass(frozen=True)
class Scan:
    """What one pass over a source found."""

    source: Source
    rows: int
    first_ms: int                 # the first record's event time
    min_ms: int
    max_ms: int
    out_of_order: int             # records with an event time below an earlier record's
    lateness_ms: dict             # percentiles of those records' lateness (LogHistogram.to_dict, ms)
    schema: str                   # Spark DDL of the records, as inferred from the first ones
    sample: list[bytes] = field(default_factory=list, repr=False)   # the first SAMPLE_ROWS values

    @property
    def span_ms(self) -> int:
        return self.max_ms - self.min_ms

    @property
    def out_of_order_share(self) -> float:
        return self.out_of_order / self.rows if self.rows else 0.0


def scan(source: Source) -> Scan:
    """Every record of `source` read once; cached per file state (a scenario is loaded more
    than once per run, and a large file takes seconds)."""
    stamp = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files_of(source.path))
    return _scan(source, stamp)


@lru_cache(maxsize=8)
def _scan(source: Source, stamp: tuple) -> Scan:
    rows, late = 0, 0
    first: int | None = None
    low: int | None = None
    high: int | None = None
    running = np.iinfo(np.int64).min
    hist = LogHistogram()
    sample: list[bytes] = []
    for block in blocks(source):
        t = block.event_time_ms
        if not len(t):
            continue
        if first is None:
            first = running = int(t[0])
        before = np.maximum.accumulate(np.concatenate([[running], t[:-1]]))
        behind = before - t
        late_here = behind > 0
        late += int(late_here.sum())
        hist.record(behind[late_here].astype(np.float64))
        running = max(running, int(t.max()))
        low = int(t.min()) if low is None else min(low, int(t.min()))
        high = int(t.max()) if high is None else max(high, int(t.max()))
        rows += len(block)
        if len(sample) < SAMPLE_ROWS:
            sample += block.values[:SAMPLE_ROWS - len(sample)]
    if not rows or first is None or low is None or high is None:
        raise_empty(source.path)
    return Scan(source, rows, first, low, high, late, hist.to_dict("ms"),
                ddl(infer_schema(source.path, sample)), sample)


def raise_empty(path: Path) -> NoReturn:
    from workloads.errors import Problem

    raise Problem(f"{path}: no records", "give the replay a file with at least one record")


def infer_schema(path: Path, sample: list[bytes]):
    """The Arrow schema of the records: a Parquet file's own, else inferred from `sample` (the
    records as JSON, which is how they travel)."""
    import io

    import pyarrow.json as pj
    import pyarrow.parquet as pq

    first = files_of(path)[0]
    if format_of(first) == "parquet":
        return pq.read_schema(first)
    return pj.read_json(io.BytesIO(b"\n".join(sample))).schema


def ddl(schema) -> str:
    """An Arrow schema as Spark's DDL: `name TYPE, ...` (names quoted with backticks)."""
    return ", ".join(f"`{f.name}` {spark_type(f.type)}" for f in schema)


def spark_type(kind) -> str:
    """Spark SQL's name of an Arrow type (nested ones too)."""
    import pyarrow as pa

    simple = [(pa.types.is_boolean, "BOOLEAN"), (pa.types.is_int8, "TINYINT"),
              (pa.types.is_int16, "SMALLINT"), (pa.types.is_int32, "INT"), (pa.types.is_integer, "BIGINT"),
              (pa.types.is_float32, "FLOAT"),
              (pa.types.is_floating, "DOUBLE"), (pa.types.is_timestamp, "TIMESTAMP"),
              (pa.types.is_date, "DATE"), (pa.types.is_binary, "BINARY"), (pa.types.is_null, "STRING")]
    for test, name in simple:
        if test(kind):
            return name
    if pa.types.is_decimal(kind):
        return f"DECIMAL({kind.precision},{kind.scale})"
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return f"ARRAY<{spark_type(kind.value_type)}>"
    if pa.types.is_struct(kind):
        inner = ", ".join(f"`{kind.field(i).name}`: {spark_type(kind.field(i).type)}"
                          for i in range(kind.num_fields))
        return f"STRUCT<{inner}>"
    if pa.types.is_map(kind):
        return f"MAP<{spark_type(kind.key_type)}, {spark_type(kind.item_type)}>"
    return "STRING"
