"""`[pipeline] kind = "job"`: the user's own PySpark code, run on their records as they are.

    build(kafka_df, params) -> the streaming (or batch) DataFrame the sink writes

The driver hands this module Kafka's raw columns (key, value, topic, partition, offset,
timestamp, timestampType, headers), unparsed. The job's function is one of:
  transform(df)     `params["reads"] == "parsed"`: df is the records parsed with the job's
                    schema (`params["schema"]`, Spark DDL): their own columns, nothing else
  from_kafka(df)    `params["reads"] == "kafka"`: df is Kafka's raw columns; the job parses
                    them its own way, exactly as in production
The output is conformed to the declared columns (`params["columns"]`): a TIMESTAMP declared
LONG is its epoch milliseconds (the sinks know STRING, LONG, INT, DOUBLE, BOOLEAN), anything
else is cast. The same function builds the batch oracle's query (job_batch.py): in a batch,
withWatermark is a no-op and every stateful operator sees each key's whole input at once.

When the query is streaming, its plan is read (plan_facts) and written to `plan.json` in the
driver's working directory (the case's): whether it has a watermark, on which column and
with which delay, and its stateful operators. The harness
reads that file for the end of the run (how far the watermark must go) and for which late
records Spark was entitled to drop. A plan the batch engine cannot mirror is refused here
too (the scenario loader refuses what it can see in the source, before anything starts).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from workloads import plugins
from workloads.pipelines import plan_tree

PLAN_FILE = "plan.json"
PROCESSING_TIME = re.compile(r"ProcessingTimeTimeout|TimeMode\.ProcessingTime|ProcessingTime\(\)|"
                             r"timeMode=ProcessingTime|ProcessingTimeMode")
# the stateful operators of an analysed plan, by node name
STATEFUL = {"Aggregate": "aggregate", "Deduplicate": "dedupe",
            "DeduplicateWithinWatermark": "dedupeWithinWatermark",
            "FlatMapGroupsWithState": "flatMapGroupsWithState",
            "FlatMapGroupsInPandasWithState": "applyInPandasWithState",
            "TransformWithState": "transformWithState", "TransformWithStateInPySpark": "transformWithState",
            "TransformWithStateInPandas": "transformWithState", "Join": "join"}
_WATERMARK = re.compile(r"EventTimeWatermark [0-9a-f-]+, ([^#]+)#\d+: \w+, (.+)$", re.M)
_UNITS_MS = {"millisecond": 1, "second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000,
             "week": 604_800_000, "microsecond": 0.001}


class Refused(ValueError):
    """A plan the batch oracle cannot mirror: the reason and the fix."""


def build(kafka_df, params: dict):
    """The job's output from Kafka's raw columns (see the module's docstring)."""
    raw = params["reads"] == "kafka"
    fn = plugins.load(params["job"], "pipeline.from_kafka" if raw else "pipeline.build")
    out = fn(kafka_df if raw else parse(kafka_df, params["schema"]))
    if out.isStreaming:
        facts = plan_facts(out, params.get("output_mode", "append"))
        if params.get("oracle") == "batch":
            refuse(facts)
        where = Path(params.get("workdir") or ".")
        (where / PLAN_FILE).write_text(json.dumps(facts, indent=2) + "\n")
    return conform(out, params["columns"])


def parse(kafka_df, schema: str):
    """The records parsed with the job's schema: their own columns only."""
    from pyspark.sql import functions as F

    return kafka_df.select(F.from_json(F.col("value").cast("string"), schema).alias("r")).select("r.*")


def conform(df, columns: dict[str, str]):
    """The declared output columns, in order, of the declared types; a TIMESTAMP declared LONG
    or INT is its epoch milliseconds."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampNTZType, TimestampType

    types = {f.name: f.dataType for f in df.schema.fields}
    missing = [c for c in columns if c not in types]
    if missing:
        raise ValueError(f"the job's output has columns {list(types)}; the scenario declares {list(columns)} "
                         f"(missing {missing}): declare the columns the job returns")
    spark_type = {"STRING": "string", "LONG": "bigint", "INT": "int", "DOUBLE": "double",
                  "BOOLEAN": "boolean"}
    out = []
    for name, kind in columns.items():
        col = F.col(f"`{name}`")
        if isinstance(types[name], TimestampType | TimestampNTZType) and kind in ("LONG", "INT"):
            col = F.unix_millis(col)
        out.append(col.cast(spark_type[kind]).alias(name))
    return df.select(*out)


# -- the plan -------------------------------------------------------------------------------
def plan_facts(df, output_mode: str = "append") -> dict:
    """What the harness needs of a streaming query's plan: its watermark (column and delay), its
    stateful operators (`operators`; `stateful`: each with its timeout or time mode, which say
    whether its output waits for the watermark), the query's output mode, and what a batch run
    could not mirror (non-deterministic expressions, processing-time timeouts or timers)."""
    analyzed = df._jdf.queryExecution().analyzed()
    text = str(analyzed.toString())
    marks = [{"column": m.group(1).strip("`'"), "delay_ms": interval_ms(m.group(2))}
             for m in _WATERMARK.finditer(text)]
    nodes = plan_tree.walk(analyzed)
    stateful = [_operator(n) for n in nodes if _stateful(n)]
    return {"watermarks": marks, "operators": sorted({s["operator"] for s in stateful}),
            "stateful": stateful, "output_mode": output_mode,
            "nondeterministic": sorted({name for n in nodes for name in _nondeterministic(n)}),
            "processing_time": sorted(set(PROCESSING_TIME.findall(text)))}


def _operator(node) -> dict:
    """A stateful node as plan.json has it: its operator, and its timeout (flatMapGroupsWithState,
    applyInPandasWithState: NoTimeout, EventTimeTimeout, ...) or time mode (transformWithState:
    NoTime, EventTime, ProcessingTime), by Spark's own names."""
    out = {"operator": STATEFUL[node.nodeName()]}
    for field, method in (("timeout", "timeout"), ("time_mode", "timeMode")):
        try:
            out[field] = str(getattr(node, method)()).rstrip("$")
        except Exception:  # noqa: BLE001 - py4j raises its own error for a node without the field
            continue
    return out


def refuse(facts: dict) -> None:
    """Raise Refused when the batch oracle cannot mirror the plan (`reasons`)."""
    found = reasons(facts)
    if found:
        raise Refused(f"{'; '.join(found)}: a batch run cannot mirror it, so oracle = \"batch\" cannot judge "
                      "the job; remove it, or use oracle = \"reference\"")


def reasons(facts: dict) -> list[str]:
    """Why a batch run cannot mirror the plan whose facts are `facts`: what in it a second run
    computes otherwise (determinism.node_findings), and processing-time timeouts or timers,
    which fire by the clock, not by the data."""
    found = [f"the job uses {what}" for what in facts["nondeterministic"]]
    if facts["processing_time"]:
        used = ", ".join(facts["processing_time"])
        found.append(f"the job uses processing-time timeouts or timers ({used}), which fire by the clock, "
                     "not by the data")
    return found


def _stateful(node) -> bool:
    name = node.nodeName()
    if name not in STATEFUL:
        return False
    if name == "Join":   # a stream-static join keeps no state
        children = node.children()
        return all(bool(children.apply(i).isStreaming()) for i in range(children.size()))
    if name == "Aggregate":
        return bool(node.isStreaming())
    return True


def _nondeterministic(node) -> list[str]:
    """What in `node` a batch run computes otherwise than the stream (determinism.py: Spark's
    own non-deterministic flag, its clock, the Python functions' bodies)."""
    from workloads.pipelines import determinism

    return determinism.node_findings(node)


def interval_ms(text: str) -> int:
    """Spark's interval text ("10 seconds", "1 minutes 30 seconds", "INTERVAL '10' SECOND") in ms."""
    total = 0.0
    for number, unit in re.findall(r"(-?\d+(?:\.\d+)?)'?\s*([a-zA-Z]+)", text):
        unit = unit.lower().rstrip("s")
        total += float(number) * _UNITS_MS.get(unit, 0)
    return int(round(total))


def read_plan(workdir: Path) -> dict | None:
    """The plan facts a driver wrote in `workdir`, or None (no job, or it never built)."""
    try:
        return json.loads((Path(workdir) / PLAN_FILE).read_text())
    except (OSError, ValueError):
        return None
