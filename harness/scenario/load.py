"""Scenario files: TOML validated into frozen dataclasses before anything starts.

A scenario names its services, the workload the generator offers, the pipeline under
test and one or more cases (a delivery guarantee and a sink). Durations are strings
with a unit ("500ms", "5s", "2m", "1h"). Every mistake raises ScenarioError naming the
file, the dotted field path and the bad value, with a fix.
"""

from __future__ import annotations

import itertools
import re
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any

from harness.errors import ScenarioError
from harness.scenario import foreach, state_matrix
from harness.scenario.fault_specs import Context, parse_faults, parse_nemesis
from harness.scenario.job import bind_jobs
from harness.scenario.model import (
    CHECKPOINT_FS,
    GUARANTEES,
    SOURCE_KINDS,
    STANDALONE,
    Case,
    KafkaConfig,
    Measure,
    Pipeline,
    PostgresConfig,
    Scenario,
    Services,
    Source,
    SparkConfig,
)
from harness.scenario.pipeline_table import parse as parse_pipeline
from workloads import plugins
from workloads.generator.spec import MAX_RATE_EPS, WorkloadSpec
from workloads.generator.spec import parse as parse_workload
from workloads.plugins import add_import_paths, sink_class
from workloads.replay.spec import is_replay
from workloads.replay.spec import parse as parse_replay
from workloads.sinks import CUSTOM_SINK, SINKS
from workloads.validate import Section, bad, parse_duration_ms, wrong_type

_NAME = re.compile(r"[A-Za-z0-9_.-]+")     # names become directory and table names
_TOP_KEYS = ("name", "description", "imports", "fault_kinds", "drain_timeout", "services", "workload",
             "pipeline", "cases", "matrix", "faults", "nemesis", "measure", "quick", "source")
_CASE_KEYS = ("name", "guarantee", "sink", "sink_class", "pipeline", "faults", "checkpoint_fs", *foreach.KEYS)
_SHIPPED = Path(__file__).parent / "scenarios"


def load(path: str | Path, quick: bool = False) -> Scenario:
    """Read and validate the scenario at `path`; `quick` applies its [quick] overrides."""
    path = Path(path).resolve()
    try:
        with path.open("rb") as f:
            raw = tomllib.load(f)
    except FileNotFoundError:
        raise ScenarioError(f"scenario file not found: {path}",
                            f"check the path; the shipped scenarios are in {_SHIPPED}/") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"cannot read scenario file {path}: {exc}", "pass a readable TOML file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML: {exc}", "fix the syntax at that line") from None
    try:
        # the user's pipeline, oracle and sink live beside the scenario, or in `imports`
        add_import_paths([str(p) for p in _imports(raw, path.parent)])
        return _scenario(raw, path, quick)
    except ScenarioError as exc:
        # the readers name only the field; the file is named once, here
        raise ScenarioError(f"{path}: {exc.problem}", exc.fix) from None


def _scenario(raw: dict, path: Path, quick: bool) -> Scenario:
    # read in the order the tables are documented, so the first error reported is the topmost
    top = Section(raw, "", _TOP_KEYS)
    head = dict(name=top.string("name", pattern=_NAME), description=_description(top),
                imports=_imports(raw, path.parent), fault_kinds=_fault_kinds(top, path.parent),
                drain_timeout_s=top.duration_ms("drain_timeout", "120s", gt=0) / 1000)
    services = _services(top.table("services", ("kafka", "spark", "postgres")))
    quick_raw = top.raw("quick", {})
    quick_faults = quick_raw.pop("faults", None) if isinstance(quick_raw, dict) else None
    quick_pipeline = quick_raw.pop("pipeline", None) if isinstance(quick_raw, dict) else None
    quick_measure = quick_raw.pop("measure", None) if isinstance(quick_raw, dict) else None
    workload = _workload(top.raw("workload", {}), quick_raw, quick, path.parent)
    pipeline = _pipeline(raw, top, path.parent, quick_pipeline, quick)
    matrix = top.table("matrix", ("guarantee", "sink", "watermark", *state_matrix.KEYS))
    cases = _cases(top.raw("cases"), matrix, path.parent, pipeline)
    pipeline, cases = bind_jobs(pipeline, cases, workload)   # a job's schema from its records
    for i, case in enumerate(cases):
        foreach.check_pipeline(case.pipeline or pipeline, case, f"cases[{i}].sink")
    measure = _measures(top, quick_measure, quick, workload)
    quick_duration = quick and isinstance(quick_raw, dict) and "duration" in quick_raw
    ctx = Context(workload.duration_s, services, cases, warmup_s=measure.warmup_s,
                  duration_key="quick.duration" if quick_duration else "workload.duration", pipeline=pipeline)
    faults = _faults(top.raw("faults"), quick_faults, quick, ctx)
    nemesis = top.table("nemesis", ("kinds", "interval", "span", "seed"))
    chaos = parse_nemesis(nemesis, ctx, workload.seed)
    faults = tuple(sorted(faults + chaos, key=_order))
    _real_time(pipeline, cases, workload, services)
    source = _source(top.table("source", ("kind", "commit_interval")), pipeline, cases)
    _source_faults(source, faults)
    return Scenario(**head, path=path, services=services, workload=workload, pipeline=pipeline,
                    cases=cases, faults=faults, measure=measure, quick=quick, source=source)


def _source(s: Section, pipeline, cases) -> Source:
    """[source] kind = "kafka" (the default) or "delta", and a Delta table's commit_interval."""
    kind = s.choice("kind", SOURCE_KINDS, "kafka")
    if kind == "kafka":
        if "commit_interval" in s:
            raise bad(s.field("commit_interval"), s.raw("commit_interval"),
                      "is a Delta source's key, and this scenario reads Kafka",
                      'add kind = "delta", or drop it')
        return Source()
    interval_s = s.duration_ms("commit_interval", "1s", gt=0) / 1000
    for i, case in enumerate(cases):
        if case.guarantee == "at-most-once":
            # its restarts start a fresh query at the latest version, whose first offsets Delta's
            # source does not record as Kafka's does (sources/0/0): the checker could not tell
            # what the fresh query skipped
            raise bad(f"cases[{i}].guarantee", "at-most-once",
                      "runs on a Kafka source only: a fresh Delta query's starting version is not "
                      "recorded where the checker reads a fresh query's start",
                      'use at-least-once or exactly-once with [source] kind = "delta"')
        if (case.pipeline or pipeline).trigger == "real-time":
            raise bad(f"cases[{i}].pipeline.trigger", "real-time",
                      "Spark's real-time mode reads Kafka only, not a Delta table",
                      'use a processing-time trigger, or [source] kind = "kafka"')
    return Source(kind, interval_s)


def _source_faults(source: Source, faults) -> None:
    """A source fault needs its source: hide-commit and delete-source-files a Delta table, the
    Kafka faults the topic the query reads (kafka-retention's records would not be the query's)."""
    from faults.registry import KINDS

    for i, spec in enumerate(faults):
        needs = KINDS[spec.kind].source
        if needs and needs != source.kind:
            raise bad(f"faults[{i}].kind", spec.kind, f"acts on a {needs} source, and this scenario's query "
                      f"reads {source.kind}", f'write [source] kind = "{needs}", or drop the fault')


def _order(spec) -> tuple:
    """Faults in the order they come: by their `at` in seconds, those placed by the query's
    progress after them, in the order they were listed (sorted() is stable)."""
    return (spec.by_progress, 0.0 if spec.by_progress else spec.at_s)


def _fault_kinds(top: Section, scenario_dir: Path) -> tuple[str, ...]:
    """`fault_kinds = ["my_faults:DELETE_COMMIT"]`: fault kinds of the user's own, each a
    faults.kinds.FaultKind in a module beside the scenario or in `imports`, registered for the
    scenario's faults, its nemesis and its hunts (docs/faults.md, "A fault kind of your own")."""
    from faults import registry
    from faults.kinds import FaultKind

    raw = top.raw("fault_kinds", [])
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise bad("fault_kinds", raw, "expected an array of \"module:NAME\" strings",
                  'write fault_kinds = ["my_faults:MY_KIND"]')
    for i, target in enumerate(raw):
        field = f"fault_kinds[{i}]"
        kind = plugins.load(target, field, scenario_dir)
        if not isinstance(kind, FaultKind):
            raise bad(field, target, f"is a {type(kind).__name__}, not a faults.kinds.FaultKind",
                      "point it at a FaultKind(...) the module defines (docs/faults.md, \"A fault kind "
                      "of your own\")")
        try:
            registry.add(kind)
        except ValueError as exc:
            raise bad(field, target, str(exc), "give your kind a name of its own") from None
    return tuple(raw)


_MEASURE_KEYS = ("warmup", "warmup_eps", "lag_trend_max", "enabled", "ceiling", "state_check")


def _measures(top: Section, quick_raw: Any, quick: bool, workload: WorkloadSpec) -> Measure:
    """[measure], and with --quick its keys replaced by [quick.measure]'s (a quick run's warm-up
    at its own rate); a bad [quick.measure] is found with or without --quick."""
    plain = top.table("measure", _MEASURE_KEYS)
    if quick_raw is None:
        return _measure(plain, workload)
    overlaid = _measure(Section({**plain.data, **Section(quick_raw, "quick.measure", _MEASURE_KEYS).data},
                                "quick.measure", _MEASURE_KEYS), workload)
    return overlaid if quick else _measure(plain, workload)


def _measure(s: Section, workload: WorkloadSpec) -> Measure:
    warmup_s = s.duration_ms("warmup", "0s", ge=0) / 1000
    if warmup_s >= workload.duration_s:
        raise bad(s.field("warmup"), s.raw("warmup"), f"leaves nothing of the {workload.duration_s:g}s "
                  "workload to measure", "choose a warm-up shorter than workload.duration")
    warmup_eps = s.number("warmup_eps", gt=0, le=MAX_RATE_EPS) if "warmup_eps" in s else None
    if warmup_eps is not None and warmup_s == 0:
        raise bad(s.field("warmup_eps"), s.raw("warmup_eps"), "is the rate of a warm-up phase, but "
                  "[measure] warmup is 0s", "give [measure] warmup a duration too")
    state_check = s.raw("state_check", "auto")
    if state_check != "auto" and not isinstance(state_check, bool):
        raise bad(s.field("state_check"), state_check, 'is not "auto", true or false',
                  'write state_check = "auto" (a case long enough for the read to cost at most 15% of it), '
                  "true (every case) or false (none)")
    return Measure(warmup_s=warmup_s, lag_trend_max=s.number("lag_trend_max", 0.02, gt=0),
                   warmup_eps=warmup_eps, enabled=s.boolean("enabled", True),
                   ceiling=s.boolean("ceiling", False),
                   state_check=None if state_check == "auto" else state_check)


def _faults(raw: Any, quick_raw: Any, quick: bool, ctx: Context):
    """[[faults]]; with --quick, [[quick.faults]] replaces them when the scenario gives it
    (a shorter workload needs an earlier schedule)."""
    if quick and quick_raw is not None:
        return parse_faults(quick_raw, ctx, "quick.faults")
    return parse_faults(raw, ctx)


# Spark's real-time mode writes through sinks that run inside its long-running tasks (Kafka,
# foreach, console); a foreachBatch sink is refused by Spark's allowlist
_REAL_TIME_SINKS = ("kafka",)
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,")


def _real_time(pipeline, cases: tuple[Case, ...], workload: WorkloadSpec, services: Services) -> None:
    """Refuse what Spark's real-time mode cannot run, before anything starts."""
    for i, case in enumerate(cases):
        own = case.pipeline or pipeline
        if own.trigger != "real-time":
            continue
        if case.sink not in _REAL_TIME_SINKS:
            raise bad(f"cases[{i}].sink", case.sink,
                      f"({case.name}) Spark's real-time trigger writes only through sinks that run in its "
                      "long-running tasks (Kafka, foreach, console), not foreachBatch",
                      'use sink = "kafka" for this case, or a processing-time trigger')
    slots = _LOCAL_CLUSTER.match(services.spark.master)
    real_time = any((c.pipeline or pipeline).trigger == "real-time" for c in cases)
    if real_time and slots and workload.partitions > int(slots[1]) * int(slots[2]):
        cores = int(slots[1]) * int(slots[2])
        raise bad("workload.partitions", workload.partitions,
                  f"Spark's real-time mode runs one long-running task per Kafka partition at once, and "
                  f"{services.spark.master} has {cores} cores", f"use at most {cores} partitions, or more "
                  "executors in services.spark.master")


def _imports(raw: dict, scenario_dir: Path) -> tuple[Path, ...]:
    """The scenario's directory, then `imports`: more directories of the user's code (relative
    to the scenario), on the import path of the harness and of every driver."""
    extra = raw.get("imports", [])
    if not isinstance(extra, list) or not all(isinstance(p, str) for p in extra):
        raise bad("imports", extra, "expected an array of directories", 'write imports = ["../my_jobs"]')
    dirs = [scenario_dir]
    for i, text in enumerate(extra):
        found = (scenario_dir / text).resolve()
        if not found.is_dir():
            raise bad(f"imports[{i}]", text, f"is not a directory ({found})",
                      "name a directory of your modules")
        dirs.append(found)
    return tuple(dirs)


def _description(top: Section) -> str:
    value = top.raw("description", "")
    if not isinstance(value, str):
        raise wrong_type("description", value, "a string")
    return value


def _services(s: Section) -> Services:
    kafka = s.table("kafka", ("bootstrap_servers", "brokers"))
    spark = s.table("spark", ("master", "conf", "workers", "worker_cores", "worker_memory"))
    postgres = s.table("postgres", ("url",))
    bootstrap = kafka.string("bootstrap_servers", None)
    brokers = kafka.integer("brokers", 1, ge=1, le=9)
    if bootstrap and "brokers" in kafka:
        raise bad(kafka.field("brokers"), brokers, "is how many brokers the harness starts, but "
                  "services.kafka.bootstrap_servers names a cluster it does not start", "drop one of the two")
    master = spark.string("master", SparkConfig.master)
    cluster: dict[str, Any] = {k: v for k, v in (("workers", spark.integer("workers", 2, ge=1, le=8)),
                                 ("worker_cores", spark.integer("worker_cores", 1, ge=1)),
                                 ("worker_memory", spark.string("worker_memory", "1g"))) if k in spark}
    if cluster and master != STANDALONE:
        raise bad(spark.field(next(iter(cluster))), next(iter(cluster.values())),
                  f"sizes the harness's own standalone cluster, but master is {master!r}",
                  'write master = "standalone", or drop it')
    return Services(kafka=KafkaConfig(bootstrap, brokers),
                    spark=SparkConfig(master, _spark_conf(spark), **cluster),
                    postgres=PostgresConfig(postgres.string("url", None)))


def _spark_conf(spark: Section) -> Mapping[str, str]:
    conf = spark.raw("conf", {})
    if not isinstance(conf, dict):
        raise bad(spark.field("conf"), conf, "expected a table of settings",
                  'write [services.spark.conf] with lines like "spark.sql.shuffle.partitions" = "4"')
    for key, value in conf.items():
        if not isinstance(value, str):
            # Spark takes every setting as a string; requiring quotes avoids guessing how
            # a TOML true or 1.0 should be spelt for it
            raise bad(f'services.spark.conf."{key}"', value, "expected a string",
                      f'quote it: "{key}" = "{value}"')
    return MappingProxyType(dict(conf))


def _workload(raw: Any, quick_raw: Any, quick: bool, base: Path = Path(".")) -> WorkloadSpec:
    """[workload], validated with and without [quick] (so a bad [quick] is found at once);
    [quick] holds any [workload] keys and replaces them for --quick runs. A replay's file is
    relative to `base`, the scenario's directory."""
    parse = partial(parse_replay, base_dir=base) if is_replay(raw) else parse_workload
    plain = parse(raw, "workload")
    if not isinstance(quick_raw, dict):
        raise wrong_type("quick", quick_raw, "a table", "write [quick] with [workload] keys to override")
    try:
        quickened = parse(_overlay(raw, quick_raw), "workload")
    except ScenarioError as exc:
        raise ScenarioError(f"{exc.problem} (with [quick] applied)", exc.fix) from None
    return quickened if quick else plain


def _pipeline(raw: dict, top: Section, scenario_dir: Path, quick_raw: Any, quick: bool):
    """[pipeline], validated with and without [quick.pipeline], whose keys replace its own for
    --quick runs (shorter windows, so that a quick run's first results come sooner)."""
    plain = parse_pipeline(top, scenario_dir)
    if quick_raw is None:
        return plain
    if not isinstance(quick_raw, dict):
        raise wrong_type("quick.pipeline", quick_raw, "a table",
                         "write [quick.pipeline] with [pipeline] keys to override")
    over = Section({**raw, "pipeline": _overlay(raw.get("pipeline"), quick_raw)}, "", _TOP_KEYS)
    try:
        quickened = parse_pipeline(over, scenario_dir)
    except ScenarioError as exc:
        raise ScenarioError(f"{exc.problem} (with [quick.pipeline] applied)", exc.fix) from None
    return quickened if quick else plain


def _overlay(base: Any, top: dict) -> dict:
    """`base` with `top`'s keys replacing its own, table by table."""
    out = dict(base) if isinstance(base, dict) else {}
    for key, value in top.items():
        out[key] = _overlay(out.get(key), value) if isinstance(value, dict) else value
    return out


def _cases(raw: Any, matrix: Section, scenario_dir: Path, pipeline=None) -> tuple[Case, ...]:
    """[[cases]], plus one case per combination of [matrix] guarantee, sink and watermark
    (ducktape's @matrix): the same workload and faults under each guarantee; a watermark
    axis sweeps the pipeline's delay (latency against completeness); the state axes sweep
    Spark's state and checkpoint settings (harness/scenario/state_matrix.py)."""
    listed: list = [] if raw is None else raw
    if not isinstance(listed, list):
        raise bad("cases", raw, "expected an array of tables", "write each case as a [[cases]] table")
    cases = [_case(Section(item, f"cases[{i}]", _CASE_KEYS), scenario_dir) for i, item in enumerate(listed)]
    cases += _matrix(matrix, scenario_dir, pipeline)
    if not cases:
        raise ScenarioError("cases is missing or empty: a scenario needs at least one case",
                            'add a [[cases]] table with name and guarantee, e.g. guarantee = "exactly-once", '
                            'or a [matrix] with guarantee = [...]')
    seen: set[str] = set()
    for i, case in enumerate(cases):
        if case.name in seen:
            raise bad(f"cases[{i}].name", case.name, "is used by an earlier case",
                      "give every case a unique name")
        seen.add(case.name)
    return tuple(cases)


def _matrix(s: Section, scenario_dir: Path, pipeline=None) -> list[Case]:
    if not s.data:
        return []
    axes = {"guarantee": s.raw("guarantee", list(GUARANTEES)), "sink": s.raw("sink", ["postgres"])}
    for key, values in axes.items():
        if not isinstance(values, list) or not values:
            raise bad(s.field(key), values, "expected a non-empty array", f'write {key} = ["...", "..."]')
    delays = _watermarks(s, pipeline)
    states = state_matrix.settings(s)   # Spark's state and checkpoint settings: [Setting()] when not swept
    state_matrix.stateless_refusal(s, pipeline)
    cases, tried = [], []
    for guarantee, sink, (text, own), setting in itertools.product(axes["guarantee"], axes["sink"], delays,
                                                                   states):
        name = f"{guarantee}-{sink}" + (f"-wm{text}" if text else "") + setting.suffix()
        item = {"name": name, "guarantee": guarantee, "sink": sink}
        case = _case(Section(item, f"matrix[{guarantee}, {sink}]", _CASE_KEYS), scenario_dir)
        if not setting.swept:
            cases.append(case if own is None else replace(case, pipeline=own))
            continue
        swept = state_matrix.apply(own or pipeline or Pipeline(), setting)
        why = state_matrix.why_not(swept, sink, setting)
        tried.append((setting, why))
        if why is None:
            cases.append(replace(case, pipeline=swept))
        else:   # a combination Spark cannot run (hdfs with a changelog): the others still run
            state_matrix.left_out(name, why)
    state_matrix.refuse_unused(s, tried)
    return cases


def _watermarks(s: Section, pipeline) -> list[tuple[str, Any]]:
    """[matrix] watermark = ["1s", "4s"]: the pipeline once per delay; [("", None)] without."""
    if "watermark" not in s:
        return [("", None)]
    values = s.raw("watermark")
    if not isinstance(values, list) or not values:
        raise bad(s.field("watermark"), values, "expected a non-empty array of durations",
                  'write watermark = ["1s", "2s", "4s"]')
    if pipeline is None or "watermark_ms" not in pipeline.values:
        kind = getattr(pipeline, "kind", "?")
        raise bad(s.field("watermark"), values, f"the {kind} pipeline has no watermark to sweep",
                  "drop it, or use a pipeline with a watermark key")
    out = []
    for i, text in enumerate(values):
        ms = parse_duration_ms(text, f"{s.field('watermark')}[{i}]")
        values_ms = MappingProxyType({**pipeline.values, "watermark_ms": ms})
        out.append((str(text), replace(pipeline, values=values_ms)))
    return out


def _case(s: Section, scenario_dir: Path) -> Case:
    if s.raw("faults", []) != []:   # an empty list was always accepted, and still is
        raise bad(s.field("faults"), s.raw("faults"), "faults are not a key of a case",
                  "declare them at the top level as [[faults]] tables: they apply to every case")
    own = parse_pipeline(s, scenario_dir, s.field("pipeline")) if "pipeline" in s else None
    case = Case(name=s.string("name", pattern=_NAME), guarantee=s.choice("guarantee", GUARANTEES),
                sink=s.choice("sink", (*SINKS, CUSTOM_SINK), "postgres"),
                sink_class=s.string("sink_class", None), pipeline=own,
                checkpoint_fs=s.choice("checkpoint_fs", CHECKPOINT_FS, "disk"))
    function, tables = foreach.parse(s, case.sink, scenario_dir)
    if function is not None:
        case = replace(case, function=function, tables=tables)
    if case.checkpoint_fs != "disk":
        from harness.services.fuse_mount import fuse_problem

        problem = fuse_problem()
        if problem:
            raise bad(s.field("checkpoint_fs"), case.checkpoint_fs, f"FUSE cannot mount here: {problem}",
                      'install what it names, or write checkpoint_fs = "disk"')
    if case.sink == CUSTOM_SINK:
        if case.sink_class is None:
            raise ScenarioError(f'{s.field("sink")} = "custom" needs {s.field("sink_class")}',
                                'add sink_class = "my_module:MySink", a class built as MySink(ctx) '
                                "in my_module.py beside the scenario")
        # the user's claim is the case's guarantee: whatever it is, the verdict tests it
        sink_class(case.sink_class, s.field("sink_class"), scenario_dir)
        return case
    if case.sink_class is not None:
        raise bad(s.field("sink_class"), case.sink_class, f"is used only with sink = \"{CUSTOM_SINK}\"",
                  f'drop it, or set sink = "{CUSTOM_SINK}"')
    offered = SINKS[case.sink].guarantees
    if case.guarantee not in offered:
        why = SINKS[case.sink].why_not.get(case.guarantee, "")
        raise bad(s.field("guarantee"), case.guarantee,
                  f"the {case.sink} sink cannot give it" + (f": {why}" if why else ""),
                  f"use one of {', '.join(offered)} with sink {case.sink!r}, or another sink")
    return case
