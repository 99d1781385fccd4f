"""A run's truth and sink read from their Parquet files in bounded memory, for a check that
scales with the run (harness/check/large.py).

`chunks` reads files whole row groups at a time, in any order: for a check that only sums.
`slices` sweeps truth and sink together in event-id order: each slice holds every row of
both with an id in [previous bound, bound), so an event and all its rows meet in one slice
and nothing else needs to be in memory. The bounds come from each row group's min/max
statistics: the generator writes truth in event-id order (a row group per block), and the
sinks are read back in commit order, so a row group spans a narrow range of ids and a
slice costs little more than its rows. A file in no order costs memory, not correctness:
the sweep waits until every row below a bound has been read.

Strings are read as dictionaries (pandas categoricals): 100 million keys cost their codes,
not 100 million Python strings.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

CHUNK_ROWS = 2_000_000
SLICE_ROWS = 4_000_000
POS = "__sink_row"   # each sink row's number in its file, added to the rows a slice holds
_LOWEST = int(np.iinfo(np.int64).min)


@dataclass(frozen=True)
class _Group:
    """One row group of one file: how many rows, its ids' range, its first row's number."""

    path: Path
    index: int
    rows: int
    lo: int
    first_row: int
    sink: bool


def files(truth_dir: Path) -> list[Path]:
    """The Parquet files of a run's truth, as workloads.generator.truth.read takes them."""
    return sorted(Path(truth_dir).glob("*.parquet"))


def rows(paths: list[Path]) -> int:
    """Rows in the files, from their footers alone."""
    return sum(pq.ParquetFile(p).metadata.num_rows for p in paths)


def chunks(paths: list[Path], columns: list[str], max_rows: int | None = None) -> Iterator[pa.Table]:
    """Every row of the files, as tables of whole row groups, about `max_rows` each (CHUNK_ROWS)."""
    max_rows = max_rows or CHUNK_ROWS
    for path in paths:
        f = _open(path, columns)
        step: list[int] = []
        n = 0
        for i in range(f.metadata.num_row_groups):
            step.append(i)
            n += f.metadata.row_group(i).num_rows
            if n >= max_rows:
                yield f.read_row_groups(step, columns=columns)
                step, n = [], 0
        if step:
            yield f.read_row_groups(step, columns=columns)


def slices(truth: list[Path], truth_columns: list[str], sink: Path, sink_columns: list[str],
           key: str = "event_id", max_rows: int | None = None) -> Iterator[tuple[pa.Table, pa.Table]]:
    """(truth rows, sink rows) by ascending ranges of `key`, about `max_rows` (SLICE_ROWS) a
    pair, every row of a key in one pair; the sink's rows carry POS. Rows whose key is null
    come in the last pair."""
    max_rows = max_rows or SLICE_ROWS
    groups = sorted([g for p in truth for g in _groups(p, key, sink=False)] + _groups(sink, key, sink=True),
                    key=lambda g: g.lo)
    carried = {False: _empty(truth[0], truth_columns), True: _empty(sink, sink_columns, pos=True)}
    i = 0
    while True:
        step: list[_Group] = []
        n = 0
        while i < len(groups) and (n < max_rows or not step):
            step.append(groups[i])
            n += groups[i].rows
            i += 1
        bound = groups[i].lo if i < len(groups) else None
        out = []
        for side, columns in ((False, truth_columns), (True, sink_columns)):
            table = _concat([carried[side], *_read([g for g in step if g.sink == side], columns)])
            now, carried[side] = _split(table, key, bound)
            out.append(now)
        yield out[0], out[1]
        if bound is None:
            return


def _open(path: Path, columns: list[str]) -> pq.ParquetFile:
    schema = pq.read_schema(path)
    strings = [c for c in columns if c in schema.names and pa.types.is_string(schema.field(c).type)]
    return pq.ParquetFile(path, read_dictionary=strings)


def _groups(path: Path, key: str, sink: bool) -> list[_Group]:
    meta = pq.ParquetFile(path).metadata
    out, first = [], 0
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        stats = next((rg.column(j).statistics for j in range(rg.num_columns)
                      if rg.column(j).path_in_schema == key), None)
        lo = int(stats.min) if stats is not None and stats.has_min_max and rg.num_rows else _LOWEST
        out.append(_Group(path, i, rg.num_rows, lo, first, sink))
        first += rg.num_rows
    return out


def _read(groups: list[_Group], columns: list[str]) -> list[pa.Table]:
    tables = []
    for path in dict.fromkeys(g.path for g in groups):
        mine = [g for g in groups if g.path == path]
        table = _open(path, columns).read_row_groups([g.index for g in mine], columns=columns)
        if mine[0].sink:
            pos = np.concatenate([np.arange(g.first_row, g.first_row + g.rows, dtype=np.int64) for g in mine])
            table = table.append_column(POS, pa.array(pos))
        tables.append(table)
    return tables


def _empty(path: Path, columns: list[str], pos: bool = False) -> pa.Table:
    table = _open(path, columns).read_row_groups([], columns=columns)
    return table.append_column(POS, pa.array([], pa.int64())) if pos else table


def _concat(tables: list[pa.Table]) -> pa.Table:
    tables = [t for t in tables if t.num_rows] or tables[:1]
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="default")


def _split(table: pa.Table, key: str, bound: int | None) -> tuple[pa.Table, pa.Table]:
    """The rows below `bound` (all of them when None), and the rest."""
    if bound is None:
        return table, table.slice(0, 0)
    below = pc.fill_null(pc.less(table[key], bound), False)
    return table.filter(below), table.filter(pc.invert(below))
