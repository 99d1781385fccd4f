"""Scenario files: TOML validated into frozen dataclasses before anything starts.

A scenario names its services, the workload the generator offers, the pipeline under
test and one or more cases (a delivery guarantee and a sink). Durations are strings
with a unit ("500ms", "5s", "2m", "1h"). Every mistake raises ScenarioError naming the
file, the dotted field path and the bad value, with a fix.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from harness.errors import ScenarioError
from harness.scenario.model import (
    GUARANTEES,
    Case,
    KafkaConfig,
    Pipeline,
    PostgresConfig,
    Scenario,
    Services,
    SparkConfig,
)
from workloads.generator._validate import Section, bad, wrong_type
from workloads.generator.spec import WorkloadSpec
from workloads.generator.spec import parse as parse_workload
from workloads.pipelines import PIPELINES
from workloads.pipelines import pipeline as pipeline_module
from workloads.sinks import SINKS

_NAME = re.compile(r"[A-Za-z0-9_.-]+")     # names become directory and table names
_TOP_KEYS = ("name", "description", "drain_timeout", "services", "workload", "pipeline", "cases",
             "quick")
_CASE_KEYS = ("name", "guarantee", "sink", "faults")
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
        return _scenario(raw, path, quick)
    except ScenarioError as exc:
        # the readers name only the field; the file is named once, here
        raise ScenarioError(f"{path}: {exc.problem}", exc.fix) from None


def _scenario(raw: dict, path: Path, quick: bool) -> Scenario:
    # read in the order the tables are documented, so the first error reported is the topmost
    top = Section(raw, "", _TOP_KEYS)
    head = dict(name=top.string("name", pattern=_NAME), description=_description(top),
                drain_timeout_s=top.duration_ms("drain_timeout", "120s", gt=0) / 1000)
    services = _services(top.table("services", ("kafka", "spark", "postgres")))
    workload = _workload(top.raw("workload", {}), top.raw("quick", {}), quick)
    return Scenario(**head, path=path, services=services, workload=workload,
                    pipeline=_pipeline(top),
                    cases=_cases(top.raw("cases")))


def _description(top: Section) -> str:
    value = top.raw("description", "")
    if not isinstance(value, str):
        raise wrong_type("description", value, "a string")
    return value


def _services(s: Section) -> Services:
    kafka = s.table("kafka", ("bootstrap_servers",))
    spark = s.table("spark", ("master", "conf"))
    postgres = s.table("postgres", ("url",))
    return Services(kafka=KafkaConfig(kafka.string("bootstrap_servers", None)),
                    spark=SparkConfig(spark.string("master", SparkConfig.master), _spark_conf(spark)),
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


def _workload(raw: Any, quick_raw: Any, quick: bool) -> WorkloadSpec:
    """[workload], validated with and without [quick] (so a bad [quick] is found at once);
    [quick] holds any [workload] keys and replaces them for --quick runs."""
    plain = parse_workload(raw, "workload")
    if not isinstance(quick_raw, dict):
        raise wrong_type("quick", quick_raw, "a table", "write [quick] with [workload] keys to override")
    try:
        quickened = parse_workload(_overlay(raw, quick_raw), "workload")
    except ScenarioError as exc:
        raise ScenarioError(f"{exc.problem} (with [quick] applied)", exc.fix) from None
    return quickened if quick else plain


def _overlay(base: Any, top: dict) -> dict:
    """`base` with `top`'s keys replacing its own, table by table."""
    out = dict(base) if isinstance(base, dict) else {}
    for key, value in top.items():
        out[key] = _overlay(out.get(key), value) if isinstance(value, dict) else value
    return out


def _pipeline(top: Section) -> Pipeline:
    kind = Section(top.raw("pipeline", {}), "pipeline", ("kind", *_any_pipeline_key())).choice(
        "kind", tuple(PIPELINES), "tumbling_count")
    s = top.table("pipeline", ("kind", "trigger", *pipeline_module(kind).PARAMS))
    window = s.duration_ms("window", gt=0)
    slide = s.duration_ms("slide", s.raw("window"), gt=0)
    window_text, slide_text = s.raw("window"), s.raw("slide", s.raw("window"))
    if window < slide:
        raise ScenarioError(
            f"pipeline.window ({window_text}) is shorter than pipeline.slide ({slide_text})",
            "make the window at least as long as the slide, or drop slide for tumbling windows")
    if window % slide:
        raise ScenarioError(
            f"pipeline.window ({window_text}) is not a multiple of pipeline.slide ({slide_text})",
            "choose a slide that divides the window, e.g. window 10s with slide 5s")
    return Pipeline(kind=kind, window_ms=window, slide_ms=slide,
                    watermark_ms=s.duration_ms("watermark"),
                    trigger_ms=s.duration_ms("trigger", "1s", gt=0))


def _any_pipeline_key() -> tuple[str, ...]:
    """Every key some pipeline takes: the kind is read before its own keys are known."""
    return ("trigger", *sorted({key for kind in PIPELINES for key in pipeline_module(kind).PARAMS}))


def _cases(raw: Any) -> tuple[Case, ...]:
    if raw is None or raw == []:
        raise ScenarioError("cases is missing or empty: a scenario needs at least one case",
                            'add a [[cases]] table with name and guarantee, e.g. guarantee = "exactly-once"')
    if not isinstance(raw, list):
        raise bad("cases", raw, "expected an array of tables", "write each case as a [[cases]] table")
    cases = tuple(_case(Section(item, f"cases[{i}]", _CASE_KEYS)) for i, item in enumerate(raw))
    seen: set[str] = set()
    for i, case in enumerate(cases):
        if case.name in seen:
            raise bad(f"cases[{i}].name", case.name, "is used by an earlier case",
                      "give every case a unique name")
        seen.add(case.name)
    return cases


def _case(s: Section) -> Case:
    faults = s.raw("faults", [])
    if faults != []:
        raise bad(s.field("faults"), faults, "faults are not supported yet",
                  "remove faults or leave it empty: fault injection is not implemented")
    case = Case(name=s.string("name", pattern=_NAME), guarantee=s.choice("guarantee", GUARANTEES),
                sink=s.choice("sink", tuple(SINKS), "postgres"))
    offered = SINKS[case.sink].guarantees
    if case.guarantee not in offered:
        raise bad(s.field("guarantee"), case.guarantee, f"the {case.sink} sink does not offer it yet",
                  f"use one of {', '.join(offered)} with sink {case.sink!r}")
    return case

