"""The user's records, read from a file in blocks: each record's bytes as Kafka will carry them,
its event time and its key.

    blocks(source) -> iterator of Records (at most BLOCK_ROWS each), in file order

Formats: JSON lines (`.json`, `.jsonl`, `.ndjson`: each line goes to Kafka as it is, byte
for byte), CSV (`.csv`) and Parquet (`.parquet`, `.pq`): each row goes as one JSON object
of its columns. A directory is read as its files of one format, in name order. Memory stays
bounded: a block at a time, whatever the file's size.

The event time is epoch milliseconds (an integer or a float) or an ISO-8601 string (UTC when
it names no zone), or a timestamp column of a Parquet file. A record without one is refused,
naming the row: ground truth and the batch oracle place every record in event time.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workloads.errors import Problem

BLOCK_ROWS = 65_536
_READ_BYTES = 8 << 20          # a JSON lines block is read this many bytes at a time
FORMATS = {".json": "jsonl", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv",
           ".parquet": "parquet", ".pq": "parquet"}


@dataclass(frozen=True)
class Source:
    """Where the records are and which of their columns the harness reads."""

    path: Path
    event_time: str
    key: str | None = None

    @property
    def files(self) -> list[Path]:
        return files_of(self.path)

    @property
    def format(self) -> str:
        return format_of(self.files[0])


@dataclass(frozen=True)
class Records:
    """One block: the records' Kafka values, event times (epoch ms) and keys (None: no key)."""

    first_row: int             # the row number of the first record, counted from 0 over the source
    values: list[bytes]
    event_time_ms: np.ndarray  # int64
    keys: list[str] | None

    def __len__(self) -> int:
        return len(self.values)


def format_of(path: Path) -> str:
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise Problem(f"{path}: the replay reads JSON lines (.json, .jsonl, .ndjson), CSV (.csv) or "
                      f"Parquet (.parquet, .pq), not {path.suffix or 'a file without a suffix'}",
                      "convert the file, or name it with the suffix of its format")
    return fmt


def files_of(path: Path) -> list[Path]:
    """The file, or a directory's files of one format in name order (hidden ones left out)."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise Problem(f"{path}: no such file or directory", "give workload.file the path of your records "
                      "(relative to the scenario's directory)")
    found = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith((".", "_"))
                   and p.suffix.lower() in FORMATS)
    if not found:
        raise Problem(f"{path}: a directory without JSON lines, CSV or Parquet files",
                      "point workload.file at a file, or a directory of files of one format")
    kinds = {format_of(p) for p in found}
    if len(kinds) > 1:
        raise Problem(f"{path}: files of several formats ({', '.join(sorted(kinds))})",
                      "keep one format per directory")
    return found


def blocks(source: Source, rows: int = BLOCK_ROWS) -> Iterator[Records]:
    """Every record of `source`, in file order, `rows` at a time (a block never spans files)."""
    first = 0
    for path in source.files:
        read = {"jsonl": _jsonl, "csv": _csv, "parquet": _parquet}[format_of(path)]
        for values, columns in read(path, source, rows):
            times = event_times(columns[source.event_time], path, first, source.event_time)
            keys = None if source.key is None else _texts(columns[source.key])
            yield Records(first, values, times, keys)
            first += len(values)


def _columns(names: tuple[str, ...], table, path: Path) -> dict:
    missing = [n for n in names if n not in table.column_names]
    if missing:
        have = ", ".join(table.column_names)
        raise Problem(f"{path}: no column {', '.join(missing)} (its columns: {have})",
                      "name the event-time and key columns as the file names them")
    return {n: table.column(n) for n in names}


def _wanted(source: Source) -> tuple[str, ...]:
    return tuple(dict.fromkeys(c for c in (source.event_time, source.key) if c))


def _jsonl(path: Path, source: Source, rows: int):
    """JSON lines: each non-blank line's own bytes, and the event-time and key columns parsed
    from the block by Arrow (in C), typed by the first record."""
    import pyarrow.json as pj

    wanted = _wanted(source)
    schema = None
    with path.open("rb") as f:
        tail = b""
        while True:
            chunk = f.read(_READ_BYTES)
            data = tail + chunk
            if not chunk:
                cut = len(data)
            else:
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    tail = data
                    continue
            body, tail = data[:cut], data[cut:]
            lines = [line.rstrip(b"\r") for line in body.split(b"\n") if line.strip()]
            if lines:
                schema = schema or _json_schema(lines[0], wanted, path)
                options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
                try:
                    table = pj.read_json(io.BytesIO(b"\n".join(lines)), parse_options=options)
                except Exception as exc:  # noqa: BLE001 - Arrow's message names the row
                    near = f.tell() - len(data)
                    raise Problem(f"{path}: not JSON lines Arrow can read, near byte {near:,}: {exc}",
                                  "make every line one JSON object, its event time and key of one "
                                  "type throughout") from None
                columns = _columns(wanted, table, path)
                for at in range(0, len(lines), rows):
                    yield lines[at:at + rows], {n: c.slice(at, rows) for n, c in columns.items()}
            if not chunk:
                return


def _json_schema(line: bytes, wanted: tuple[str, ...], path: Path):
    """The Arrow types of the wanted fields, as the first record has them."""
    import pyarrow as pa

    try:
        first = json.loads(line)
    except ValueError as exc:
        raise Problem(f"{path}: the first line is not JSON ({exc})", "give a file of JSON lines") from None
    if not isinstance(first, dict):
        raise Problem(f"{path}: the first line is not a JSON object", "give one JSON object per line")
    types = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string()}
    fields = []
    for name in wanted:
        if name not in first:
            raise Problem(f"{path}: the first record has no field {name!r} (its fields: {', '.join(first)})",
                          "name the event-time and key fields as the records name them")
        kind = types.get(type(first[name]))
        if kind is None:
            raise Problem(f"{path}: field {name!r} is {type(first[name]).__name__} in the first record",
                          "use a number or a string for the event time and the key")
        fields.append((name, kind))
    return pa.schema(fields)


def _csv(path: Path, source: Source, rows: int):
    import pyarrow.csv as pcsv

    try:
        reader = pcsv.open_csv(path, read_options=pcsv.ReadOptions(block_size=_READ_BYTES))
    except Exception as exc:  # noqa: BLE001 - Arrow names the problem
        raise Problem(f"{path}: not a CSV file Arrow can read: {exc}",
                      "give a CSV file with a header") from None
    for batch in reader:
        yield from _arrow_rows(batch, path, source, rows)


def _parquet(path: Path, source: Source, rows: int):
    import pyarrow.parquet as pq

    for batch in pq.ParquetFile(path).iter_batches(batch_size=rows):
        yield from _arrow_rows(batch, path, source, rows)


def _arrow_rows(batch, path: Path, source: Source, rows: int):
    """A record batch's rows as JSON objects (one line each), with its wanted columns."""
    import pyarrow as pa

    table = pa.Table.from_batches([batch])
    columns = _columns(_wanted(source), table, path)
    values = row_json(table)
    for at in range(0, len(values), rows):
        yield values[at:at + rows], {n: c.slice(at, rows) for n, c in columns.items()}


def row_json(table) -> list[bytes]:
    """Each row of an Arrow table as one compact JSON object: timestamps and dates in ISO-8601,
    nulls as null, the columns in order."""
    frame = table.to_pandas()
    text = frame.to_json(orient="records", lines=True, date_format="iso", date_unit="ms", force_ascii=False)
    return [line.encode() for line in text.split("\n") if line]


def event_times(column, path: Path, first_row: int, name: str) -> np.ndarray:
    """An Arrow column of event times as epoch milliseconds (int64)."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if column.null_count:
        row = first_row + int(pc.index(pc.is_null(column), True).as_py())
        raise Problem(f"{path}: row {row:,} has no {name}", "give every record an event time, or drop it")
    kind = column.type
    if pa.types.is_timestamp(kind):
        return column.cast(pa.timestamp("ms", tz=kind.tz)).cast(pa.int64()).to_numpy()
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        return np.floor(column.to_numpy(zero_copy_only=False)).astype(np.int64)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        text = column.to_pandas()
        naive = ~text.str.contains(r"(?:Z|[+-]\d\d:?\d\d)$", regex=True)
        text = text.where(~naive, text + "Z")   # no zone: UTC, as Spark's session time zone here
        try:
            stamps = pd.to_datetime(text, utc=True, format="ISO8601")
        except (ValueError, TypeError) as exc:
            raise Problem(f"{path}: {name} near row {first_row:,} is not ISO-8601 ({exc})",
                          "write event times as epoch milliseconds or ISO-8601 "
                          "(2024-05-01T12:00:00.123Z)") from None
        return (stamps.astype("int64") // 1_000_000).to_numpy()
    raise Problem(f"{path}: {name} is of type {kind}",
                  "use epoch milliseconds, ISO-8601 strings or timestamps")


def _texts(column) -> list[str]:
    """Key values as strings (a number's decimal text; null as the empty string)."""
    return ["" if v is None else str(v) for v in column.to_pylist()]
