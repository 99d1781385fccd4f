"""One case under way: everything a stage of the runner needs, in one argument."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from harness import jvm
from harness.run.stack import Stack
from harness.scenario import Case as CaseSpec
from harness.scenario import Scenario
from harness.services.base import Registry
from harness.services.spark import SparkDriver
from workloads.pipelines import pipeline as pipeline_module
from workloads.pipelines.config import DriverConfig
from workloads.progress import Progress
from workloads.sinks import SinkContext


@dataclass
class Case:
    """A case of a scenario being run: its spec, where it writes, the services it uses,
    and how far it has got (for messages when something dies)."""

    scenario: Scenario
    spec: CaseSpec
    stack: Stack
    run_id: str
    dir: Path
    progress: Progress
    registry: Registry
    driver: SparkDriver | None = None
    phase: str = "starting"
    sent: int = 0
    planned: int = 0
    warmup: list[dict] = field(default_factory=list)
    report: dict | None = None
    failure: str | None = None     # why the case failed while it ran (a dead driver)

    @classmethod
    def create(cls, scenario: Scenario, spec: CaseSpec, stack: Stack, run_dir: Path, run_id: str,
               progress: Progress, registry: Registry) -> Case:
        return cls(scenario, spec, stack, run_id, run_dir / "cases" / spec.name, progress, registry)

    @property
    def spark(self) -> SparkDriver:
        """The case's driver, once started."""
        if self.driver is None:
            raise RuntimeError(f"case {self.name}: the Spark driver has not been started")
        return self.driver

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def suffix(self) -> str:
        """A name part unique to this case of this run, safe in topic and table names."""
        return re.sub(r"[^A-Za-z0-9]", "_", f"{self.spec.name}_{self.run_id[-4:]}").lower()

    @property
    def topic(self) -> str:
        return f"{self.scenario.workload.topic}-{self.suffix}"

    @property
    def sink_name(self) -> str:
        return f"sink_{self.suffix}"

    @property
    def checkpoint(self) -> Path:
        return self.dir / "checkpoint"

    @property
    def truth_dir(self) -> Path:
        return self.dir / "truth"

    def sink_context(self) -> SinkContext:
        return SinkContext(name=self.sink_name, guarantee=self.spec.guarantee,
                           columns=dict(pipeline_module(self.scenario.pipeline.kind).COLUMNS),
                           workdir=str(self.dir), postgres_url=self.stack.postgres_url,
                           bootstrap_servers=self.stack.bootstrap_servers)

    def driver_config(self) -> DriverConfig:
        sc, pl = self.scenario, self.scenario.pipeline
        return DriverConfig(
            app_name=f"harness-{self.name}", master=sc.services.spark.master,
            spark_conf=dict(sc.services.spark.conf), jars=[str(p) for p in jvm.spark_connector_jars()],
            bootstrap_servers=self.stack.bootstrap_servers, topic=self.topic,
            checkpoint=str(self.checkpoint), pipeline=pl.kind, params=pl.params(),
            trigger_ms=pl.trigger_ms, sink=self.spec.sink, sink_context=self.sink_context())

    def whereabouts(self) -> str:
        """How far the case had got, for a message: 'at 4,868 of 10,000 events sent'."""
        if self.phase == "sending":
            return f"at {self.sent:,} of {self.planned:,} events sent"
        if self.phase == "draining":
            return f"after all {self.sent:,} events were sent, while waiting for the pipeline to drain"
        return f"while {self.phase}, before any event was sent"
