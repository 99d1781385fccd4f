"""The scenario model: frozen dataclasses, built only by harness.scenario.load."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from faults.spec import FaultSpec
from workloads.generator.spec import WorkloadSpec

GUARANTEES = ("at-most-once", "at-least-once", "exactly-once")


@dataclass(frozen=True)
class KafkaConfig:
    """An external cluster, or None: the harness starts its own broker."""

    bootstrap_servers: str | None = None


@dataclass(frozen=True)
class SparkConfig:
    """The Spark master and extra `--conf` settings for every driver."""

    master: str = "local-cluster[2,1,1024]"
    # read-only so the frozen config cannot change under a running case; not hashed
    conf: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False)


@dataclass(frozen=True)
class PostgresConfig:
    """An external server URL, or None: the harness starts its own server."""

    url: str | None = None


@dataclass(frozen=True)
class Services:
    """Where Kafka, Spark and PostgreSQL come from."""

    kafka: KafkaConfig = field(default_factory=KafkaConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    postgres: PostgresConfig = field(default_factory=PostgresConfig)


@dataclass(frozen=True, kw_only=True)
class Pipeline:
    """The streaming query under test."""

    kind: str = "tumbling_count"
    window_ms: int
    slide_ms: int
    watermark_ms: int
    trigger_ms: int = 1000

    def params(self) -> dict:
        """The pipeline's keys in milliseconds, as `build(events_df, params)` takes them."""
        return {"window_ms": self.window_ms, "slide_ms": self.slide_ms, "watermark_ms": self.watermark_ms}


@dataclass(frozen=True, kw_only=True)
class Case:
    """One run of the pipeline: a delivery guarantee into a sink."""

    name: str
    guarantee: str
    sink: str = "postgres"


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """A validated scenario file."""

    name: str
    description: str = ""
    path: Path
    services: Services
    workload: WorkloadSpec
    pipeline: Pipeline
    cases: tuple[Case, ...]
    faults: tuple[FaultSpec, ...] = ()
    drain_timeout_s: float = 120.0

    def to_dict(self) -> dict:
        """The validated values as plain JSON types."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}


def _plain(value: Any) -> Any:
    if callable(getattr(value, "describe", None)):
        return _plain(value.describe())
    if is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return str(value) if isinstance(value, Path) else value
