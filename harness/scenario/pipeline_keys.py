"""The keys every [pipeline] table shares, whatever its kind (pipeline_table.py's built-in and
custom kinds, job.py's `kind = "job"`): the trigger, Spark's settings, the output's columns and
its key. Each reads one key of a Section and refuses a bad value with its fix."""

from __future__ import annotations

from harness.scenario.model import STATE_STORES, SparkSettings
from workloads.validate import Section, bad

COLUMN_TYPES = ("STRING", "LONG", "INT", "DOUBLE", "BOOLEAN")


def what(s: Section) -> str:
    """The pipeline a scenario names: its kind, and its query when it has one."""
    return f"{s.raw('kind')} {s.raw('query')}" if "query" in s else str(s.raw("kind"))


def spark_settings(s: Section, stores: tuple[str, ...] | None = None) -> SparkSettings:
    """state_store, shuffle_partitions, max_offsets_per_trigger; `stores`: the state stores
    the kind can run on (transformWithState needs RocksDB)."""
    default = stores[0] if stores else "hdfs"
    store = s.choice("state_store", tuple(STATE_STORES), default)
    if stores and store not in stores:
        raise bad(s.field("state_store"), store, f"{what(s)} runs only on {', '.join(stores)}",
                  f'write state_store = "{stores[0]}", or leave it out')
    offsets = s.integer("max_offsets_per_trigger", None, ge=1) if "max_offsets_per_trigger" in s else None
    return SparkSettings(state_store=store, shuffle_partitions=s.integer("shuffle_partitions", 2, ge=1),
                         max_offsets_per_trigger=offsets,
                         fail_on_data_loss=s.boolean("fail_on_data_loss", True))


# trigger_interval's default per trigger: the batch interval; the pause between the runs of an
# available-now job; real-time mode's batch duration (Spark's minimum, realTimeMode.minBatchDuration)
_INTERVAL = {"processing-time": "1s", "available-now": "1s", "real-time": "5s"}
REAL_TIME_MIN_MS = 5000


def default_interval_ms(trigger: str) -> int:
    """trigger_interval's default for an available-now or real-time trigger."""
    from workloads.validate import parse_duration_ms

    return parse_duration_ms(_INTERVAL[trigger], "trigger_interval")


def trigger(s: Section) -> tuple[str, int]:
    """`trigger`: a duration (processing time), "available-now" or "real-time"; with the last
    two, `trigger_interval` (the pause between runs, or the real-time batch duration)."""
    raw = s.raw("trigger", "1s")
    if raw in ("available-now", "real-time"):
        ms = s.duration_ms("trigger_interval", _INTERVAL[raw], gt=0)
        if raw == "real-time" and ms < REAL_TIME_MIN_MS:
            raise bad(s.field("trigger_interval"), s.raw("trigger_interval"),
                      "Spark's real-time mode takes batches of at least 5s "
                      "(spark.sql.streaming.realTimeMode.minBatchDuration)", 'write trigger_interval = "5s"')
        return raw, ms
    if "trigger_interval" in s:
        raise bad(s.field("trigger_interval"), s.raw("trigger_interval"),
                  "goes with trigger = \"available-now\" or \"real-time\"; a processing-time trigger "
                  "is its own interval", f'drop it, or write trigger = "{s.raw("trigger_interval")}"')
    if isinstance(raw, str) and raw and not raw[0].isdigit():
        raise bad(s.field("trigger"), raw, "is not a trigger",
                  'write a duration (trigger = "1s"), "available-now" or "real-time"')
    return "processing-time", s.duration_ms("trigger", "1s", gt=0)


def columns(s: Section) -> dict[str, str]:
    """`columns`: the output's columns and their types (the sinks' types)."""
    declared = s.raw("columns")
    example = 'columns = { event_id = "LONG", key = "STRING" }'
    if not isinstance(declared, dict) or not declared:
        raise bad(s.field("columns"), declared, "a custom pipeline declares its output columns",
                  f"write {example}, the columns build() returns, in order")
    for name, kind in declared.items():
        if not isinstance(kind, str) or kind.upper() not in COLUMN_TYPES:
            raise bad(f"{s.field('columns')}.{name}", kind, "is not a column type the sinks know",
                      f"use one of {', '.join(COLUMN_TYPES)}")
    return {name: kind.upper() for name, kind in declared.items()}


def key(s: Section, columns: dict[str, str]) -> tuple[str, ...]:
    """`key`: the columns that identify one output row, each one of `columns`."""
    given = s.raw("key")
    if not isinstance(given, list) or not given or not all(isinstance(k, str) for k in given):
        raise bad(s.field("key"), given, "an oracle's rows are matched by key columns",
                  'write key = ["column", ...]: the columns that identify one output row')
    unknown = [k for k in given if k not in columns]
    if unknown:
        raise bad(s.field("key"), given, f"{', '.join(unknown)} not in {s.field('columns')}",
                  f"choose from {', '.join(columns)}")
    return tuple(given)
