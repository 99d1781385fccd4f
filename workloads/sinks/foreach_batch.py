"""sink = "foreach_batch": the user's own `write_batch(df, batch_id)` as it is, and the tables it
writes (a Delta MERGE, appends to several tables), as real jobs end.

    [[cases]]
    sink = "foreach_batch"
    function = "job:write_batch"       # called by Spark's foreachBatch, in the driver
    [[cases.tables]]
    delta = "user_totals"              # a Delta table, by the name write_batch asks for it
    key = ["user"]                     # merged: compared by its final state per key
    ignore = ["last_batch"]            # optional: columns whose values are the run's own
    [[cases.tables]]
    postgres = "clicks"                # a PostgreSQL table; no key: appended, compared as a multiset

Where a table is: the harness gives each case fresh places, and `write_batch` reads them from
its session's configuration, as a job reads its own settings (with the production value as the
default, the same code runs in production unchanged):

    path = df.sparkSession.conf.get("spark.harness.table.user_totals", "/data/user_totals")

A Delta table's value is its path (`<case>/tables/stream/<name>`); a PostgreSQL table's is
`schema.table` (the schema is the case's own), and `spark.harness.postgres.url` is the server's
libpq URL (psycopg.connect takes it; the driver has no JDBC jar). The function creates its
tables when they do not exist, as it would in a fresh environment.

After the case the batch oracle runs the same function once over the batch answer into twin
tables (another schema, another path: workloads/sinks/foreach_twin.py) and compares each
table with its twin (harness/check/batch_oracle/foreach_tables.py). `read()` returns no rows of
its own: the tables are the output, and the oracle reads them; its frame carries the tables in
attrs["foreach_batch"].
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workloads.sinks import SinkContext

STORES = ("delta", "postgres")
CONF_TABLE = "spark.harness.table."          # + the table's name: its path, or schema.table
CONF_POSTGRES = "spark.harness.postgres.url"
STREAM = "stream"                            # the side the streaming query wrote
TABLES_DIR = "tables"                        # <case>/tables/<side>/<name>: the Delta tables
ATTR = "foreach_batch"
CALLS = "calls.jsonl"                        # <case>/tables/calls.jsonl: each call of the function


def calls(workdir: str | Path) -> list[dict]:
    """Every call of the function the driver made, in order (batch_id, began_ms, ended_ms, pid,
    error: None when it returned)."""
    path = Path(workdir) / TABLES_DIR / CALLS
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@dataclass(frozen=True)
class Table:
    """One table the function writes: its name, its store, and how it is compared."""

    name: str
    store: str                       # "delta" or "postgres"
    key: tuple[str, ...] = ()        # merged: its final state per key; (): appended, a multiset of rows
    ignore: tuple[str, ...] = ()     # columns left out of the comparison (batch ids, write times)

    @property
    def merged(self) -> bool:
        return bool(self.key)

    def describe(self) -> dict:
        return {"name": self.name, "store": self.store, "key": list(self.key), "ignore": list(self.ignore)}

    @classmethod
    def of(cls, raw: dict) -> Table:
        return cls(raw["name"], raw["store"], tuple(raw.get("key") or ()), tuple(raw.get("ignore") or ()))


def schema_of(sink_name: str, side: str) -> str:
    """The PostgreSQL schema of one side's tables: the case's own for the stream, one per twin."""
    return sink_name if side == STREAM else f"{sink_name}_{side.replace('-', '_')}"


def locations(tables: list[Table], workdir: str | Path, sink_name: str, side: str) -> dict[str, str]:
    """Each table's place on one side (STREAM, or a twin's name): a Delta path or schema.table."""
    out = {}
    for t in tables:
        if t.store == "delta":
            out[t.name] = str(Path(workdir) / TABLES_DIR / side / t.name)
        else:
            out[t.name] = f"{schema_of(sink_name, side)}.{t.name}"
    return out


def prepare(spark, tables: list[Table], places: dict[str, str], postgres_url: str | None) -> None:
    """Tell the session where the tables are (its conf, which foreachBatch's DataFrame shares),
    and create the PostgreSQL schema they go in."""
    for name, place in places.items():
        spark.conf.set(CONF_TABLE + name, place)
    if postgres_url:
        spark.conf.set(CONF_POSTGRES, postgres_url)
    schemas = {places[t.name].partition(".")[0] for t in tables if t.store == "postgres"}
    if schemas:
        import psycopg

        if not postgres_url:
            raise RuntimeError("a PostgreSQL table needs the harness's PostgreSQL URL")
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            for schema in sorted(schemas):
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')


def function_of(ctx: SinkContext):
    """The user's write_batch, named "module:function" in ctx.options["function"]."""
    from workloads import plugins

    target = ctx.options.get("function")
    if not target:
        raise ValueError(f'sink "foreach_batch" of {ctx.name} needs function = "module:write_batch"')
    return plugins.load(target, "function")


class ForeachBatchSink:
    """The driver calls the user's function for each batch, behind the commit gate; nothing else
    touches the batch (a second action would run its plan again)."""

    def __init__(self, ctx: SinkContext):
        self.ctx = ctx
        self.function = function_of(ctx)
        self.tables = [Table.of(t) for t in ctx.options.get("tables") or ()]
        if not self.tables:
            raise ValueError(f'sink "foreach_batch" of {ctx.name} needs its tables: [[cases.tables]]')
        self.places = locations(self.tables, ctx.workdir, ctx.name, STREAM)
        # the gate counts the rows inside the function's own first action (control._observe)
        self.last_rows: int | None = None

    def setup(self) -> None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is None:
            raise RuntimeError("the foreach_batch sink's setup() runs in the driver, with a Spark session")
        prepare(spark, self.tables, self.places, self.ctx.postgres_url)

    def write(self, batch_df, batch_id: int) -> None:
        began_ms = time.time_ns() // 1_000_000
        try:
            self.function(batch_df, batch_id)
        except BaseException as exc:
            self._called(batch_id, began_ms, f"{type(exc).__name__}: {exc}")
            raise
        self._called(batch_id, began_ms, None)

    def _called(self, batch_id: int, began_ms: int, error: str | None) -> None:
        """One line per call in <case>/tables/calls.jsonl: the evidence of a batch Spark ran twice
        (findings/tables.py), written beside the batch, never from it."""
        path = Path(self.ctx.workdir) / TABLES_DIR / CALLS
        path.parent.mkdir(parents=True, exist_ok=True)
        line = {"batch_id": int(batch_id), "began_ms": began_ms, "ended_ms": time.time_ns() // 1_000_000,
                "pid": os.getpid(), "error": error}
        with path.open("a") as out:
            out.write(json.dumps(line) + "\n")

    __call__ = write

    def read(self):
        """No rows of its own (the tables are compared by the batch oracle): the output's columns,
        empty, with the tables, their places and the server's URL in attrs[ATTR]."""
        import pandas as pd

        out = pd.DataFrame(columns=[*self.ctx.columns, "batch_id", "committed_ms"])
        out.attrs[ATTR] = {"function": self.ctx.options.get("function"), "sink": self.ctx.name,
                           "workdir": self.ctx.workdir, "postgres_url": self.ctx.postgres_url,
                           "tables": [t.describe() for t in self.tables], "places": self.places}
        return out

    def close(self) -> None:
        pass


def described(sink: Any) -> dict | None:
    """What a foreach_batch sink's read() said of its tables (None: another sink's frame)."""
    attrs = getattr(sink, "attrs", None) or {}
    return attrs.get(ATTR)
