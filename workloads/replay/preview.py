"""What a replay would send, before sending it: `python -m harness replay-preview FILE`.

Prints the schema read from the records (the DDL a job can take as `schema`), their count,
the event-time span, and how out of order they are in file order: the share of records
older than one before them, and the percentiles of by how much (the watermark delay that
would keep every record on time, sent in file order, is the maximum). Reads the file once.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from workloads.errors import Problem
from workloads.replay.records import Source, files_of, format_of
from workloads.replay.scan import Scan, infer_schema, scan

_TIME_NAME = re.compile(r"(^ts$|time|date|_at$)", re.I)
_FORMAT_NAMES = {"jsonl": "JSON lines", "csv": "CSV", "parquet": "Parquet"}


def guess_event_time(path: Path) -> str:
    """The one column that looks like an event time (a timestamp, or a name like ts, *time*,
    *date*, *_at); Problem naming the columns when there is none or several."""
    sample = _first_values(path)
    schema = infer_schema(path, sample)
    stamps = [f.name for f in schema if str(f.type).startswith("timestamp")]
    named = [f.name for f in schema if _TIME_NAME.search(f.name)]
    found = stamps or named
    if len(found) == 1:
        return found[0]
    names = ", ".join(f.name for f in schema)
    which = f"several may be: {', '.join(found)}" if found else f"none looks like one (columns: {names})"
    raise Problem(f"{path}: which column is the event time? {which}", "pass --event-time COLUMN")


def _first_values(path: Path, rows: int = 100) -> list[bytes]:
    """The first records as JSON (how they travel), without knowing the event-time column."""
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    from workloads.replay.records import row_json

    first = files_of(path)[0]
    fmt = format_of(first)
    if fmt == "jsonl":
        with first.open("rb") as f:
            return [line for line in (f.readline() for _ in range(rows)) if line.strip()]
    if fmt == "csv":
        batch = next(iter(pcsv.open_csv(first)))
    else:
        batch = next(pq.ParquetFile(first).iter_batches(batch_size=rows))
    return row_json(pa.Table.from_batches([batch]).slice(0, rows))


def preview(path: Path, event_time: str | None = None, key: str | None = None) -> str:
    """The preview's text for the records at `path`."""
    path = Path(path)
    files = files_of(path)
    found = scan(Source(path, event_time or guess_event_time(path), key))
    return render(found, files)


def render(s: Scan, files: list[Path]) -> str:
    size = sum(f.stat().st_size for f in files)
    fmt = _FORMAT_NAMES[format_of(files[0])]
    count = f"{len(files)} file{'s' if len(files) != 1 else ''}"
    lat = s.lateness_ms
    lines = [
        f"file        {s.source.path} ({fmt}, {count}, {size / 1e6:,.1f} MB)",
        f"records     {s.rows:,}",
        f"schema      {s.schema}",
        f"event time  {s.source.event_time}: {_when(s.min_ms)} .. {_when(s.max_ms)} "
        f"(span {_span(s.span_ms)}; the first record's {_when(s.first_ms)})",
    ]
    if s.out_of_order:
        lines.append(f"order       {s.out_of_order_share:.2%} out of order ({s.out_of_order:,} records "
                     f"older than one before them); lateness p50 {_span(lat['p50'])}, "
                     f"p90 {_span(lat['p90'])}, p99 {_span(lat['p99'])}, max {_span(lat['max'])}")
        lines.append(f"watermark   a delay of at least {_span(lat['max'])} keeps every record on time, "
                     "sent in file order (less: the late ones are dropped by stateful operators)")
    else:
        lines.append("order       in event-time order: no record is older than one before it")
    if s.span_ms:
        lines.append(f"pace        speed 1 replays it in {_span(s.span_ms)}; "
                     f"speed 100 in {_span(s.span_ms / 100)}")
    return "\n".join(lines)


def _when(ms: float) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _span(ms: float) -> str:
    """A duration for people: 850 ms, 12.3 s, 4 min 5 s, 3 h 2 min."""
    if ms != ms:   # nan
        return "-"
    if ms < 1000:
        return f"{ms:,.0f} ms"
    s = ms / 1000
    if s < 60:
        return f"{s:,.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60)} s"
    return f"{int(s // 3600):,} h {int(s % 3600 // 60)} min"
