"""A case's `sink = "foreach_batch"`: the user's own foreachBatch function and its tables.

    [[cases]]
    name = "merge"
    guarantee = "exactly-once"
    sink = "foreach_batch"
    function = "job:write_batch"     # write_batch(df, batch_id), beside the scenario
    [[cases.tables]]
    delta = "user_totals"            # or postgres = "user_totals": the table's name
    key = ["user"]                   # merged: its final state per key; without: appended rows
    ignore = ["last_batch"]          # optional: columns of the run's own values, not compared

Checked before anything starts: the function imports and takes (df, batch_id); each table has
one store and a name of its own; the pipeline is a job checked by the batch oracle (the twin
tables are its answer run through the function: workloads/sinks/foreach_batch.py).
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.errors import ScenarioError
from workloads import plugins
from workloads.sinks.foreach_batch import STORES, Table
from workloads.validate import Section, bad

FOREACH_BATCH = "foreach_batch"
KEYS = ("function", "tables")
_TABLE_KEYS = (*STORES, "key", "ignore")
_TABLE_NAME = re.compile(r"[a-z_][a-z0-9_]*")   # a PostgreSQL identifier, a directory name, a conf key part
_FIX_TABLES = ('add one [[cases.tables]] per table write_batch writes: delta = "name" or postgres = "name", '
               'and key = ["..."] for a merged one (docs/your-job.md, "Your own foreachBatch sink")')


def parse(s: Section, sink: str, scenario_dir: Path) -> tuple[str | None, tuple[Table, ...]]:
    """The case's `function` and `tables` (None, () for another sink, which may not have them)."""
    if sink != FOREACH_BATCH:
        for key in KEYS:
            if key in s:
                raise bad(s.field(key), s.raw(key), f'is used only with sink = "{FOREACH_BATCH}"',
                          f'drop it, or set sink = "{FOREACH_BATCH}"')
        return None, ()
    if "function" not in s:
        raise ScenarioError(f'{s.field("sink")} = "{FOREACH_BATCH}" needs {s.field("function")}',
                            'add function = "job:write_batch", your write_batch(df, batch_id) in job.py '
                            "beside the scenario")
    target = s.string("function")
    plugins.function(target, s.field("function"), ("df", "batch_id"), scenario_dir)
    raw = s.raw("tables", None)
    if not isinstance(raw, list) or not raw:
        raise bad(s.field("tables"), raw, "write_batch's tables are what the oracle compares", _FIX_TABLES)
    where = s.field("tables")
    tables = tuple(_table(Section(item, f"{where}[{i}]", _TABLE_KEYS)) for i, item in enumerate(raw))
    seen: set[str] = set()
    for i, table in enumerate(tables):
        if table.name in seen:
            raise bad(f"{s.field('tables')}[{i}]", table.name, "names a table an earlier one names",
                      "give every table its own name")
        seen.add(table.name)
    return target, tables


def _table(s: Section) -> Table:
    stores = [k for k in STORES if k in s]
    if len(stores) != 1:
        raise ScenarioError(f"{s.path} needs one of {', '.join(STORES)}" + (", not both" if stores else ""),
                            'write delta = "user_totals" (a Delta table) or postgres = "user_totals" '
                            "(a PostgreSQL table): the name write_batch asks for it by")
    name = s.string(stores[0])
    if not _TABLE_NAME.fullmatch(name):
        raise bad(s.field(stores[0]), name, "is not a plain lower-case name",
                  "use letters, digits and _ (it becomes a directory, a table and a conf key)")
    return Table(name, stores[0], _names(s, "key"), _names(s, "ignore"))


def _names(s: Section, key: str) -> tuple[str, ...]:
    raw = s.raw(key, [])
    if not isinstance(raw, list) or not all(isinstance(x, str) and x for x in raw):
        raise bad(s.field(key), raw, "expected an array of column names", f'write {key} = ["user"]')
    return tuple(raw)


def check_pipeline(pipeline, case, where: str) -> None:
    """A foreach_batch case runs a job checked by the batch oracle: the tables' twins are the
    batch answer run through the same function."""
    if case.sink != FOREACH_BATCH:
        return
    if getattr(pipeline, "kind", None) != "job":
        raise bad(where, case.sink, "the tables are checked against write_batch run over the batch answer "
                  "of your own job", '[pipeline] kind = "job" (docs/your-job.md)')
    if getattr(pipeline, "oracle", "batch") != "batch":
        raise bad(where, case.sink, f"oracle = {pipeline.oracle!r} compares the sink's rows, and "
                  "write_batch's are in its tables",
                  'use oracle = "batch" (the default) with sink = "foreach_batch"')
