"""Ground truth: every event sent and where Kafka put it, streamed to Parquet.

A run's truth is a directory: `part-<j>.parquet` from generator process (or Locust
worker) j, and `control.parquet` for the harness's control events. Each part is
written a row group per block as delivery reports arrive, so memory stays bounded
however long the run; `read()` merges the parts into one table ordered by event_id.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from workloads.generator.plan import EVENT_TYPES, Block

SCHEMA = pa.schema([
    ("event_id", pa.int64()), ("key", pa.string()), ("event_time_ms", pa.int64()),
    ("intended_ms", pa.int64()), ("sent_ms", pa.int64()), ("partition", pa.int32()),
    ("offset", pa.int64()), ("append_ms", pa.int64()), ("late_by_design", pa.bool_()),
    ("user", pa.int32()), ("item", pa.int32()), ("amount", pa.int64()),
    ("event_type", pa.dictionary(pa.int8(), pa.string())), ("control", pa.bool_()),
    # True: offset and append_ms are from the event's own delivery report; False: counted back
    # from the next reported event of its partition, whose append time it takes (workloads.generator.anchors)
    ("reported", pa.bool_()),
])
# dictionary encoding pays only for the repetitive strings; for numbers it costs more than it saves
_DICTIONARY = ["key", "event_type"]
_TYPES = pa.array(EVENT_TYPES, pa.string())


def part_path(truth_dir: Path, index: int) -> Path:
    return Path(truth_dir) / f"part-{index:04d}.parquet"


class TruthWriter:
    """Appends blocks of delivered events to one Parquet part."""

    def __init__(self, path: Path, key_names: np.ndarray, extra: pa.Schema | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.schema = SCHEMA if extra is None else pa.unify_schemas([SCHEMA, extra])
        self.key_names = pa.array(list(key_names), pa.string())
        self.writer = pq.ParquetWriter(self.path, self.schema, use_dictionary=_DICTIONARY)
        self.rows = 0

    def write(self, block: Block, sent_us: np.ndarray, offset: np.ndarray, append_ms: np.ndarray,
              reported: np.ndarray, extra: dict | None = None) -> None:
        n = len(block)
        columns = {
            "event_id": block.event_id, "key": self.key_names.take(pa.array(block.key)),
            "event_time_ms": block.event_time_ms, "intended_ms": block.intended_us // 1000,
            "sent_ms": sent_us // 1000, "partition": block.partition, "offset": offset,
            "append_ms": append_ms, "late_by_design": block.late_by_design,
            "user": block.user.astype(np.int32), "item": block.item.astype(np.int32),
            "amount": block.amount,
            "event_type": pa.DictionaryArray.from_arrays(pa.array(block.event_type, pa.int8()), _TYPES),
            "control": np.zeros(n, dtype=bool), "reported": reported, **(extra or {}),
        }
        self.writer.write_table(pa.table(columns, schema=self.schema))
        self.rows += n

    def close(self) -> Path:
        self.writer.close()
        return self.path


def write_control(truth_dir: Path, rows: list[dict]) -> Path:
    """The harness's control events (warm-up and watermark flush), in the same schema."""
    df = pd.DataFrame(rows)
    n = len(df)
    table = pa.table({
        "event_id": df["event_id"].to_numpy(np.int64), "key": df["key"].astype(str),
        "event_time_ms": df["event_time_ms"].to_numpy(np.int64),
        "intended_ms": np.full(n, -1, np.int64), "sent_ms": df["sent_ms"].to_numpy(np.int64),
        "partition": df["partition"].to_numpy(np.int32), "offset": df["offset"].to_numpy(np.int64),
        "append_ms": df["append_ms"].to_numpy(np.int64), "late_by_design": np.zeros(n, bool),
        "user": np.zeros(n, np.int32), "item": np.zeros(n, np.int32), "amount": np.zeros(n, np.int64),
        "event_type": pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int8)), _TYPES),
        "control": np.ones(n, bool), "reported": np.ones(n, bool),
    }, schema=SCHEMA)
    path = Path(truth_dir) / "control.parquet"
    pq.write_table(table, path, use_dictionary=_DICTIONARY)
    return path


def has_parts(truth_dir: Path) -> bool:
    """Whether `truth_dir` holds any truth: a generator part or the control events."""
    return any(Path(truth_dir).glob("*.parquet"))


def read(truth_dir: Path, columns: list[str] | None = None, *, categorical: bool = False) -> pd.DataFrame:
    """Every part of a run's truth as one DataFrame ordered by event_id. `categorical` (with
    `columns`): the key as a pandas Categorical, not a Python string per row, and the columns
    filled in place batch by batch: an hour's truth (80.6 million rows, 8 columns) is 3.5 GB
    that way, read at a peak of 6.5 GB, where strings took over 20 GB."""
    files = sorted(Path(truth_dir).glob("*.parquet"))
    if not files:
        raise FileNotFoundError(f"no ground truth in {truth_dir}")
    if categorical and columns is not None:
        return _read_in_place(files, list(columns))
    # event_id is read even when not asked for: the order is by it
    wanted = None if columns is None else list(dict.fromkeys(["event_id", *columns]))
    # a column some parts lack (Nexmark's fields: not in control.parquet) is null there
    tables = [pq.read_table(f, columns=None if wanted is None else [c for c in wanted if c in _names(f)],
                            schema=SCHEMA if wanted is None else None) for f in files]
    table = pa.concat_tables(tables, promote_options="default")
    del tables
    # sorted and narrowed in Arrow, then converted column by column as Arrow lets go of each
    table = table.sort_by("event_id")
    if columns is not None:
        table = table.select(list(columns))
    df = table.to_pandas(self_destruct=True, split_blocks=True)
    del table
    if "event_type" in df:   # only when read: assigning None would add a column nobody asked for
        df["event_type"] = df["event_type"].astype(str)
    return df


def _names(path: Path) -> set[str]:
    return set(pq.read_schema(path).names)


def _read_in_place(files: list[Path], columns: list[str]) -> pd.DataFrame:
    """read(categorical=True): each column one numpy array of the run's length, filled a
    record batch at a time; strings as codes into one shared list of categories."""
    wanted = list(dict.fromkeys(["event_id", *columns]))
    n = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    arrays: dict[str, np.ndarray] = {}
    categories: dict[str, dict[str, int]] = {}
    at = 0
    for f in files:
        for batch in pq.ParquetFile(f).iter_batches(columns=wanted, batch_size=1 << 20):
            for name in wanted:
                column = batch.column(name)
                if column.null_count:
                    raise ValueError(f"truth column {name} has nulls in {f}: read it without categorical")
                if pa.types.is_string(column.type) or pa.types.is_dictionary(column.type):
                    values = _codes(column, categories.setdefault(name, {}))
                else:
                    values = column.to_numpy(zero_copy_only=False)
                if name not in arrays:
                    arrays[name] = np.empty(n, dtype=values.dtype)
                arrays[name][at:at + len(values)] = values
            at += batch.num_rows
    order = arrays["event_id"].argsort(kind="stable")
    out = {}
    for name in columns:
        values = arrays.pop(name)[order]
        if name in categories:
            names = sorted(categories[name], key=categories[name].__getitem__)
            values = pd.Categorical.from_codes(values, categories=names)
        out[name] = values
    return pd.DataFrame(out, copy=False)


def _codes(column: pa.Array, seen: dict[str, int]) -> np.ndarray:
    """A string column as int32 codes into `seen` (extended with the strings new to it)."""
    encoded = column if pa.types.is_dictionary(column.type) else column.dictionary_encode()
    local = np.array([seen.setdefault(v, len(seen)) for v in encoded.dictionary.to_pylist()], dtype=np.int32)
    return local[encoded.indices.to_numpy(zero_copy_only=False)]
