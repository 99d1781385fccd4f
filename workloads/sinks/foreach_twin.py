"""The foreach_batch sink's twin tables: `python -m workloads.sinks.foreach_twin REQUEST.json`.

The harness never runs Spark itself; after a case whose sink is the user's own `write_batch`
(workloads/sinks/foreach_batch.py), the batch oracle writes a request and starts this program:

  {"driver": "<case>/driver.json",              the case's DriverConfig: jars, imports, settings
   "function": "job:write_batch",
   "sink": "sink_<case>", "workdir": "<case>", "postgres_url": "postgresql://...",
   "tables": [{"name", "store", "key", "ignore"}, ...],
   "answers": {"expected": "<case>/oracle/expected.parquet", "with-flush": "..."},
   "out": "<case>/oracle/tables"}

For each answer (the job's batch output), it calls `write_batch(answer, 0)` once, into fresh
tables of its own (Delta: <case>/tables/<answer>/<name>; PostgreSQL: schema <sink>_<answer>),
the places told through the session's conf as the driver tells them. Then it reads every table
of every side, the stream's included, and writes `<out>/<side>/<name>.parquet` (a table that
does not exist has no file) and `<out>/twin.json` (what it wrote and how long it took). Delta
is read by Delta's own reader (deletion vectors, column mapping), PostgreSQL with psycopg.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from workloads import plugins
from workloads.sinks.foreach_batch import STREAM, Table, locations, prepare

MASTER = "local[2]"
BATCH_ID = 0   # the one call's batch id: the first a fresh query gives
# the case driver's settings that do not belong to a batch run on local[2]
_NOT_HERE = ("spark.master", "spark.executor.", "spark.local.dir", "spark.jars", "spark.sql.streaming.",
             "spark.driver.host", "spark.driver.port", "spark.driver.memory")


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[1]).read_text())
    # the driver's config as plain JSON: workloads.pipelines imports the sinks, not the reverse
    config = json.loads(Path(request["driver"]).read_text())
    out = Path(request["out"])
    out.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    times: dict[str, float] = {}
    plugins.add_import_paths(config.get("import_paths", []))
    write_batch = plugins.load(request["function"], "function")
    tables = [Table.of(t) for t in request["tables"]]
    spark = session(config)
    times["session_s"] = time.perf_counter() - began
    sides = {STREAM: locations(tables, request["workdir"], request["sink"], STREAM)}
    for answer, path in request["answers"].items():
        t = time.perf_counter()
        places = locations(tables, request["workdir"], request["sink"], answer)
        fresh(tables, places, request.get("postgres_url"))
        prepare(spark, tables, places, request.get("postgres_url"))
        write_batch(spark.read.parquet(str(path)), BATCH_ID)
        sides[answer] = places
        times[f"{answer}_s"] = time.perf_counter() - t
    t = time.perf_counter()
    found = {side: {table.name: snapshot(spark, table, places[table.name], request.get("postgres_url"),
                                         out / side / f"{table.name}.parquet") for table in tables}
             for side, places in sides.items()}
    times["read_s"] = time.perf_counter() - t
    spark.stop()
    times["total_s"] = time.perf_counter() - began
    (out / "twin.json").write_text(json.dumps({"places": sides, "rows": found,
                                               "times": {k: round(v, 3) for k, v in times.items()}},
                                              indent=2) + "\n")
    return 0


def session(config: dict):
    """A local[2] session with the case driver's jars and settings (Delta's among them)."""
    from pyspark.sql import SparkSession

    name = f"{config.get('app_name', 'harness')}-foreach-twin"
    jars = ",".join(config.get("jars", []))
    builder = (SparkSession.builder.appName(name).master(MASTER)
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC").config("spark.jars", jars))
    for key, value in config.get("spark_conf", {}).items():
        if not key.startswith(_NOT_HERE):
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def fresh(tables: list[Table], places: dict[str, str], postgres_url: str | None) -> None:
    """Empty twin places: a check run again must not write into the last one's tables."""
    import shutil

    for table in tables:
        if table.store == "delta":
            shutil.rmtree(places[table.name], ignore_errors=True)
    schemas = {places[t.name].partition(".")[0] for t in tables if t.store == "postgres"}
    if schemas:
        import psycopg

        with psycopg.connect(postgres_url or "", autocommit=True) as conn:
            for schema in sorted(schemas):
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def snapshot(spark, table: Table, place: str, postgres_url: str | None, path: Path) -> int | None:
    """The table's rows to `path` as Parquet; how many (None: there is no such table)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if table.store == "delta":
        from delta.tables import DeltaTable

        if not DeltaTable.isDeltaTable(spark, place):
            return None
        rows = spark.read.format("delta").load(place).toArrow()
        import pyarrow.parquet as pq

        pq.write_table(rows, path)
        return int(rows.num_rows)
    return _postgres(place, postgres_url, path)


def _postgres(place: str, url: str | None, path: Path) -> int | None:
    import pandas as pd
    import psycopg

    schema, _, name = place.partition(".")
    with psycopg.connect(url or "") as conn:
        exists = conn.execute("SELECT 1 FROM information_schema.tables WHERE table_schema = %s "
                              "AND table_name = %s", (schema, name)).fetchone()
        if exists is None:
            return None
        cur = conn.execute(f'SELECT * FROM "{schema}"."{name}"')
        frame = pd.DataFrame(cur.fetchall(), columns=[c.name for c in cur.description or ()])
    frame.to_parquet(path, index=False)
    return len(frame)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
