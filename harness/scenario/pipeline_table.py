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

from pathlib import Path
from types import MappingProxyType

from harness.check.registry import CUSTOM, PIPELINES
from harness.check.registry import kind as pipeline_kind
from harness.errors import ScenarioError
from harness.scenario import job as job_table
from harness.scenario import pipeline_keys
from harness.scenario.model import Pipeline
from workloads import plugins
from workloads.pipelines import params as param_mod
from workloads.validate import Section, bad

_OWN = ("kind", "trigger", "trigger_interval", "build", "state_store", "shuffle_partitions",
        "max_offsets_per_trigger", "fail_on_data_loss")
_CUSTOM = ("oracle", "key", "columns")


def parse(top: Section, scenario_dir: Path, where: str = "pipeline") -> Pipeline:
    """The `pipeline` table of `top` (the scenario, or a case with its own), named `where`."""
    raw = top.raw("pipeline", {})
    if isinstance(raw, dict) and raw.get("kind") == "job":   # the user's job (harness/scenario/job.py)
        return job_table.parse(Section(raw, where, raw), scenario_dir)
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
    spark = pipeline_keys.spark_settings(s, registered.state_stores_for(values))
    trigger, trigger_ms = pipeline_keys.trigger(s)
    if trigger == "real-time" and not registered.stateless_for(values):
        raise bad(s.field("trigger"), "real-time", f"Spark's real-time mode runs stateless queries only, "
                  f"and {kind} keeps state", 'use trigger = "1s" or "available-now", or the passthrough kind')
    if trigger == "available-now" and registered.available_now_refused:
        raise bad(s.field("trigger"), "available-now", f"{kind} cannot run as an available-now job: "
                  f"{registered.available_now_refused}", 'use a processing-time trigger (trigger = "1s")')
    return Pipeline(kind=kind, values=MappingProxyType(values), trigger=trigger, trigger_ms=trigger_ms,
                    build=build, columns=MappingProxyType(registered.columns_for(values)), spark=spark)


def _custom(s: Section, scenario_dir: Path) -> Pipeline:
    build = s.string("build", None)
    if build is None:
        raise ScenarioError(f'{s.field("kind")} = "custom" needs {s.field("build")}',
                            'add build = "my_module:build", a function build(events_df, params) '
                            "in my_module.py beside the scenario")
    plugins.function(build, s.field("build"), ("events_df", "params"), scenario_dir)
    columns = pipeline_keys.columns(s)
    oracle = s.string("oracle", None)
    key: tuple[str, ...] = ()
    if oracle is not None:
        plugins.function(oracle, s.field("oracle"), ("truth_df", "batches", "params"), scenario_dir)
        key = pipeline_keys.key(s, columns)
    elif "event_id" not in columns:
        raise ScenarioError(f"a custom pipeline without {s.field('oracle')} is checked event by event, "
                            f"but {s.field('columns')} has no event_id",
                            'output event_id on every row, or add oracle = "module:function" and key = [...]')
    elif "key" in s:
        raise bad(s.field("key"), s.raw("key"), f"is used only with {s.field('oracle')}",
                  "drop it, or add oracle = \"module:function\"")
    values = param_mod.read(s, param_mod.COMMON, required=False)
    trigger, trigger_ms = pipeline_keys.trigger(s)
    spark = pipeline_keys.spark_settings(s)
    return Pipeline(kind=CUSTOM, values=MappingProxyType(values), trigger=trigger, trigger_ms=trigger_ms,
                    build=build, oracle=oracle, key=key, columns=MappingProxyType(columns), spark=spark)

