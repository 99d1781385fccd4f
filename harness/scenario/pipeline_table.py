"""[pipeline]: the kind, its keys, and the user's own build or oracle.

    [pipeline]
    kind = "tumbling_count"          # a built-in kind (its oracle checks the output)
    window = "5s"                    # the kind's keys (workloads/pipelines/<kind>.py PARAMS)
    build = "my_job:build"           # optional: the user's build(events_df, params) in place of ours

    [pipeline]
    kind = "custom"                  # the user's query and the user's oracle
    build = "my_job:build"
    oracle = "my_job:expected"       # oracle(truth_df, batches, params) -> expected rows
    key = ["user", "window_start_ms"]
    columns = { user = "STRING", window_start_ms = "LONG", n = "LONG" }

A custom pipeline without an oracle must output `event_id`: it is checked event by event.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import MappingProxyType

from harness.errors import ScenarioError
from harness.pipeline_registry import CUSTOM, PIPELINES
from harness.pipeline_registry import kind as pipeline_kind
from harness.scenario.model import STATE_STORES, Pipeline, SparkSettings
from workloads import plugins
from workloads.pipelines import params as param_mod
from workloads.validate import Section, bad

_OWN = ("kind", "trigger", "trigger_interval", "build", "state_store", "shuffle_partitions",
        "max_offsets_per_trigger", "fail_on_data_loss")
_CUSTOM = ("oracle", "key", "columns")
COLUMN_TYPES = ("STRING", "LONG", "INT", "DOUBLE", "BOOLEAN")


def parse(top: Section, scenario_dir: Path, where: str = "pipeline") -> Pipeline:
    """The `pipeline` table of `top` (the scenario, or a case with its own), named `where`."""
    raw = top.raw("pipeline", {})
    if isinstance(raw, dict) and raw.get("kind") == "job":   # the user's job (harness/scenario/job.py)
        return importlib.import_module("harness.scenario.job").parse(Section(raw, where, raw), scenario_dir)
    every_key = (*_OWN, *_CUSTOM, *dict.fromkeys(p.key for k in PIPELINES.values() for p in k.params))
    kind = Section(raw, where, every_key).choice("kind", (*PIPELINES, CUSTOM), "tumbling_count")
    if kind == CUSTOM:
        return _custom(top.table("pipeline", (*_OWN, *_CUSTOM, *(p.key for p in param_mod.COMMON))),
                       scenario_dir)
    registered = pipeline_kind(kind)
    s = top.table("pipeline", (*_OWN, *(p.key for p in registered.params)))
    values = param_mod.read(s, registered.params)
    registered.check_params(values)
    build = s.string("build", None)
    if build is not None:
        plugins.function(build, s.field("build"), ("events_df", "params"), scenario_dir)
    spark = _spark(s, registered.state_stores_for(values))
    trigger, trigger_ms = _trigger(s)
    if trigger == "real-time" and not registered.stateless_for(values):
        raise bad(s.field("trigger"), "real-time", f"Spark's real-time mode runs stateless queries only, "
                  f"and {kind} keeps state", 'use trigger = "1s" or "available-now", or the passthrough kind')
    return Pipeline(kind=kind, values=MappingProxyType(values), trigger=trigger, trigger_ms=trigger_ms,
                    build=build, columns=MappingProxyType(registered.columns_for(values)), spark=spark)


def _custom(s: Section, scenario_dir: Path) -> Pipeline:
    build = s.string("build", None)
    if build is None:
        raise ScenarioError(f'{s.field("kind")} = "custom" needs {s.field("build")}',
                            'add build = "my_module:build", a function build(events_df, params) '
                            "in my_module.py beside the scenario")
    plugins.function(build, s.field("build"), ("events_df", "params"), scenario_dir)
    columns = _columns(s)
    oracle = s.string("oracle", None)
    key: tuple[str, ...] = ()
    if oracle is not None:
        plugins.function(oracle, s.field("oracle"), ("truth_df", "batches", "params"), scenario_dir)
        key = _key(s, columns)
    elif "event_id" not in columns:
        raise ScenarioError(f"a custom pipeline without {s.field('oracle')} is checked event by event, "
                            f"but {s.field('columns')} has no event_id",
                            'output event_id on every row, or add oracle = "module:function" and key = [...]')
    elif "key" in s:
        raise bad(s.field("key"), s.raw("key"), f"is used only with {s.field('oracle')}",
                  "drop it, or add oracle = \"module:function\"")
    values = param_mod.read(s, param_mod.COMMON, required=False)
    trigger, trigger_ms = _trigger(s)
    return Pipeline(kind=CUSTOM, values=MappingProxyType(values), trigger=trigger, trigger_ms=trigger_ms,
                    build=build, oracle=oracle, key=key, columns=MappingProxyType(columns), spark=_spark(s))


def _what(s: Section) -> str:
    """The pipeline a scenario names: its kind, and its query when it has one."""
    return f"{s.raw('kind')} {s.raw('query')}" if "query" in s else str(s.raw("kind"))


def _spark(s: Section, stores: tuple[str, ...] | None = None) -> SparkSettings:
    """state_store, shuffle_partitions, max_offsets_per_trigger; `stores`: the state stores
    the kind can run on (transformWithState needs RocksDB)."""
    default = stores[0] if stores else "hdfs"
    store = s.choice("state_store", tuple(STATE_STORES), default)
    if stores and store not in stores:
        raise bad(s.field("state_store"), store, f"{_what(s)} runs only on {', '.join(stores)}",
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


def _trigger(s: Section) -> tuple[str, int]:
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


def _columns(s: Section) -> dict[str, str]:
    columns = s.raw("columns")
    example = 'columns = { event_id = "LONG", key = "STRING" }'
    if not isinstance(columns, dict) or not columns:
        raise bad(s.field("columns"), columns, "a custom pipeline declares its output columns",
                  f"write {example}, the columns build() returns, in order")
    for name, kind in columns.items():
        if not isinstance(kind, str) or kind.upper() not in COLUMN_TYPES:
            raise bad(f"{s.field('columns')}.{name}", kind, "is not a column type the sinks know",
                      f"use one of {', '.join(COLUMN_TYPES)}")
    return {name: kind.upper() for name, kind in columns.items()}


def _key(s: Section, columns: dict[str, str]) -> tuple[str, ...]:
    key = s.raw("key")
    if not isinstance(key, list) or not key or not all(isinstance(k, str) for k in key):
        raise bad(s.field("key"), key, "an oracle's rows are matched by key columns",
                  'write key = ["column", ...]: the columns that identify one output row')
    unknown = [k for k in key if k not in columns]
    if unknown:
        raise bad(s.field("key"), key, f"{', '.join(unknown)} not in {s.field('columns')}",
                  f"choose from {', '.join(columns)}")
    return tuple(key)
