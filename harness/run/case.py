"""One case under way: everything a stage of the runner needs, in one argument."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from faults.kinds import CaseView
from faults.network import probe_kafka, probe_postgres
from faults.targets import Targets
from harness import jvm
from harness.metrics import read_progress
from harness.results.rundir import CaseDir, RunDir
from harness.run.pace import Pace
from harness.run.stack import Stack
from harness.scenario import Case as CaseSpec
from harness.scenario import Scenario
from harness.scenario.fault_specs import (
    clock_targets,
    fault_conf,
    set_up,
    source_fs,
    storage_fs,
    task_stage,
    writeback_s,
)
from harness.services.base import Registry
from harness.services.delta_appender import DeltaAppender
from harness.services.fuse_mount import FaultFS
from harness.services.spark import SparkDriver
from workloads.pipelines.config import QUERY_ID_STRIDE, DriverConfig
from workloads.progress import Progress
from workloads.sinks import SinkContext, sink_needs


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
    workload: dict | None = None   # how long the workload was sent, and why (summary.json's cases[].workload)
    flush_offsets: dict[int, int] = field(default_factory=dict)   # partition -> end offset after the flush
    failure: str | None = None     # why the case failed while it ran (a dead driver)
    # the drain ran out its time: what it waited for; a FAIL only when outputs are missing
    drain_short: str | None = None
    # epoch ms: its first batch committed (the warm-up done), and its driver asked to stop; the
    # incidents of the case are what happened between the two
    running_from_ms: float = 0.0
    stopping_ms: float | None = None
    expect_down: bool = False      # a fault killed the driver on purpose: not a failure
    restarting: bool = False       # a new driver is being started after a fault
    driver_up: threading.Event = field(default_factory=threading.Event)   # clear while it restarts
    checkpoints: list[Path] = field(default_factory=list)   # one per query; at-most-once restarts fresh
    started_at: float = 0.0        # monotonic seconds the first driver was started
    # what restart-with changed, kept for every later driver as a deploy keeps it: "conf" (Spark
    # settings) and "pipeline" (its keys: shuffle_partitions, state_store, build...)
    changes: dict = field(default_factory=dict)
    storage: FaultFS | None = None   # the FUSE file system over the checkpoint (storage faults)
    appender: DeltaAppender | None = None   # [source] kind = "delta": the topic appended to a table
    source_fs: FaultFS | None = None        # ... and the FUSE file system over it (hide-commit)
    undo_setup: Callable[[], None] | None = None   # undoes the fault kinds' own set-ups
    pace: Pace = field(init=False)   # the query's measured pace: warm-up, anchors, every wait's scale

    def __post_init__(self) -> None:
        self.pace = Pace(lambda: self.checkpoints, self.topic, self.scenario.measure.warmup_s,
                         self.scenario.workload.duration_s)

    @classmethod
    def create(cls, scenario: Scenario, spec: CaseSpec, stack: Stack, run_dir: RunDir, run_id: str,
               progress: Progress, registry: Registry) -> Case:
        return cls(scenario, spec, stack, run_id, run_dir.case(spec.name).path, progress, registry)

    @property
    def files(self) -> CaseDir:
        """The case's directory, every file named."""
        return CaseDir(self.dir)

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
    def pipeline(self):
        """The case's own [cases.pipeline], else the scenario's [pipeline], with what a
        restart-with changed."""
        pl = self.spec.pipeline or self.scenario.pipeline
        keys = self.changes.get("pipeline", {})
        if not keys:
            return pl
        tunable = ("state_store", "shuffle_partitions", "max_offsets_per_trigger")
        settings = {k: keys[k] for k in tunable if k in keys}
        pl = replace(pl, spark=replace(pl.spark, **settings), build=keys.get("build", pl.build))
        trigger = keys.get("trigger")
        if trigger is None or trigger == pl.trigger:
            return pl
        if trigger in ("available-now", "real-time"):   # its interval: the pipeline's, or the default
            from harness.scenario.pipeline_keys import default_interval_ms

            return replace(pl, trigger=trigger, trigger_ms=default_interval_ms(trigger))
        from workloads.validate import parse_duration_ms

        return replace(pl, trigger="processing-time", trigger_ms=parse_duration_ms(trigger, "trigger"))

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
        """The current query's checkpoint."""
        return self.checkpoints[-1] if self.checkpoints else self.files.checkpoint

    @property
    def truth_dir(self) -> Path:
        return self.files.truth

    def sink(self):
        """The case's sink as the harness reads it (its class built from the case's context)."""
        from workloads.sinks import sink_class

        return sink_class(self.spec.sink, self.spec.sink_class)(self.sink_context())

    def sink_broken(self) -> str | None:
        """Why the case's sink cannot be built, said with its class and the exception its
        constructor raised; None when it builds (what the driver then does too)."""
        from workloads.sinks import sink_target

        target = sink_target(self.spec.sink, self.spec.sink_class)
        try:
            self.sink()
        except Exception as exc:  # noqa: BLE001 - a user's constructor may raise anything
            return (f"the sink {target}: its constructor {target.partition(':')[2]}(ctx) raised "
                    f"{type(exc).__name__}: {exc}; no driver was started")
        return None

    def sink_context(self) -> SinkContext:
        return SinkContext(name=self.sink_name, guarantee=self.spec.guarantee, topic=self.topic,
                           columns=dict(self.pipeline.columns),
                           workdir=str(self.dir), postgres_url=self.stack.postgres_url,
                           bootstrap_servers=self.stack.bootstrap_servers,
                           options={**({"key": list(self.pipeline.key)} if self.pipeline.key else {}),
                                    **self._foreach_options()})

    def _foreach_options(self) -> dict:
        """sink "foreach_batch": the user's function and its tables (workloads/sinks/foreach_batch.py)."""
        if self.spec.function is None:
            return {}
        return {"function": self.spec.function, "tables": [t.describe() for t in self.spec.tables]}

    def driver_sink_context(self) -> SinkContext:
        """The sink as the driver sees it: through the proxy on a network fault's path."""
        return replace(self.sink_context(), postgres_url=self.stack.spark_postgres_url,
                       bootstrap_servers=self.stack.spark_bootstrap_servers)

    def spark_conf(self) -> dict[str, str]:
        """The driver's Spark settings: the harness's defaults for the master, then the
        pipeline's and the sink's; [services.spark] conf, the user's word, wins."""
        spark = self.scenario.services.spark
        faults = fault_conf(self.scenario.faults)
        source = sink_needs("delta")[1] if self.scenario.source.delta else {}   # Delta's session settings
        return {**spark.defaults(), **self.pipeline.spark.conf(), **source, **sink_needs(self.spec.sink)[1],
                **faults, **spark.conf, **self.changes.get("conf", {})}

    def driver_config(self, starting_offsets: str = "earliest") -> DriverConfig:
        sc, pl = self.scenario, self.pipeline
        artifacts = (*sink_needs(self.spec.sink)[0], *(("delta",) if self.scenario.source.delta else ()))
        jars = [*jvm.spark_connector_jars(), *(j for a in artifacts for j in jvm.spark_extra_jars(a))]
        return DriverConfig(starting_offsets=starting_offsets,
            app_name=f"harness-{self.name}", master=self.stack.spark_master or sc.services.spark.master,
            spark_conf=self.spark_conf(), progress=sc.measure.enabled,
            jars=[str(p) for p in dict.fromkeys(jars)], source_options=pl.spark.source_options(),
            writer_options=pl.spark.writer_options(),
            source=sc.source.kind, delta_table=str(self.spark_table) if sc.source.delta else "",
            bootstrap_servers=self.stack.spark_bootstrap_servers, topic=self.topic,
            checkpoint=str(self.spark_checkpoint), pipeline=pl.kind, params=pl.params(),
            trigger=pl.trigger, trigger_ms=pl.trigger_ms, sink=self.spec.sink,
            sink_context=self.driver_sink_context(),
            build=pl.build_target, sink_class=self.spec.sink_class or "",
            task_faults=task_stage(sc.faults),
            clock_file=str(self.files.driver_clock) if "driver" in clock_targets(sc.faults) else "",
            executor_clock="executor" in clock_targets(sc.faults),
            import_paths=[str(p) for p in sc.imports or (sc.path.parent,)])

    @property
    def spark_checkpoint(self) -> Path:
        """The checkpoint as Spark reaches it: through the case's FUSE file system when a
        storage fault is scheduled (the harness reads the directory under it)."""
        if self.storage is not None and self.checkpoint == self.files.checkpoint:
            return self.storage.mountpoint
        return self.checkpoint

    @property
    def source_table(self) -> Path:
        """The Delta source's table, where the appender writes it and the harness reads it."""
        from workloads.delta_source import TABLE

        return self.dir / TABLE

    @property
    def spark_table(self) -> Path:
        """The table as Spark reaches it: through its FUSE file system when a fault needs one."""
        return self.source_fs.mountpoint if self.source_fs is not None else self.source_table

    def start_appender(self) -> None:
        """[source] kind = "delta": append the case's topic to its table, from version 0 on."""
        if not self.scenario.source.delta or self.appender is not None:
            return
        appender = DeltaAppender(self.dir / "delta-appender", self.stack.bootstrap_servers, self.topic,
                                 self.source_table, self.scenario.source.commit_interval_s, self.registry)
        self.appender = appender.start().wait_ready()

    def stop_appender(self) -> None:
        """Once the case's last driver has stopped."""
        if self.appender is not None:
            self.appender.stop()

    def mount_storage(self) -> None:
        """Mount the FUSE file system over the checkpoint, for the storage faults."""
        if (storage_fs(self.scenario.faults) or self.spec.checkpoint_fs != "disk") and self.storage is None:
            writeback = writeback_s(self.scenario.faults)
            if self.spec.checkpoint_fs == "sync":
                writeback = 0.0
            fs = FaultFS(self.dir / "faultfs", self.files.checkpoint, self.dir / "checkpoint-fs",
                         self.registry, writeback_s=writeback)
            self.storage = fs.start().wait_ready()
        if self.scenario.source.delta and source_fs(self.scenario.faults) and self.source_fs is None:
            # a Delta source's table, for hide-commit's listings
            table = FaultFS(self.dir / "source-faultfs", self.source_table, self.dir / "source-fs",
                            self.registry)
            self.source_fs = table.start().wait_ready()
        if self.undo_setup is None:   # the kinds' own set-ups (Preparation.setup), a user's among them
            self.undo_setup = set_up(self.scenario.faults, CaseView(
                self.name, self.dir, self.files.checkpoint, self.files.control, self.topic,
                self.stack.bootstrap_servers, self.stack.postgres_url, self.sink_name,
                self.scenario.workload.seed))

    def unmount_storage(self) -> None:
        """Unmount it once the case's last driver has stopped (and undo the kinds' set-ups)."""
        if self.undo_setup is not None:
            self.undo_setup()
        if self.storage is not None:
            self.storage.stop()
        if self.source_fs is not None:
            self.source_fs.stop()

    def start_driver(self) -> SparkDriver:
        """Start the case's first driver, on its checkpoint, reading from the earliest offsets."""
        self.checkpoints = [self.files.checkpoint]
        self.started_at = time.monotonic()
        self.driver = SparkDriver(self.dir, self.driver_config(), self.registry).start().wait_ready()
        self.driver_up.set()
        return self.driver

    def set_expect_down(self, down: bool) -> None:
        """A fault is about to kill the driver (True), or its new driver is up (False)."""
        self.expect_down = down
        (self.driver_up.clear if down else self.driver_up.set)()

    def current_driver(self, timeout_s: float = 300.0) -> SparkDriver:
        """The driver for a fault to act on: while one restarts, wait for it rather than act
        on the dead one."""
        self.driver_up.wait(timeout_s)
        return self.spark

    def restart_driver(self, changes: dict | None = None) -> None:
        """A new driver after a fault killed the last one. at-least-once and exactly-once
        resume from the same checkpoint (Spark re-executes a batch it had not committed);
        at-most-once starts a fresh checkpoint at the latest offsets: what was in flight is
        skipped and nothing is run again. `changes` (restart-with): {"conf": {...}, "pipeline":
        {...}}, applied to this driver and every later one."""
        for part, values in (changes or {}).items():
            self.changes.setdefault(part, {}).update(values)
        fresh = self.spec.guarantee == "at-most-once"
        if fresh:
            self.checkpoints.append(self.files.fresh_checkpoint(len(self.checkpoints)))
        config = replace(self.driver_config(starting_offsets="latest" if fresh else "earliest"),
                         batch_base=(len(self.checkpoints) - 1) * QUERY_ID_STRIDE)
        self.progress.step(f"case {self.name}: restarting the driver "
                           f"({'a fresh checkpoint at the latest offsets' if fresh else 'same checkpoint'})")
        started = time.monotonic()
        self.restarting = True
        try:
            self.driver = SparkDriver(self.dir, config, self.registry).start()   # stopped even if never ready
            try:
                self.driver.wait_ready()
                self.pace.started(time.monotonic() - started)   # to its query's start: at least this long
            except Exception as exc:
                self.failure = f"the driver of case {self.name} did not come back after a fault: {exc}"
                self.driver.stop()
                raise
        finally:
            self.restarting = False

    def targets(self) -> Targets:
        """What the fault injectors may act on: this run's services and this case's driver."""
        # the newest service of each name; "broker" is Kafka (only ours, never an external cluster)
        # "broker" is Kafka's single broker, "broker:N" a node of a cluster of the harness's own;
        # "worker:N" a worker of its standalone Spark cluster (never an external cluster's)
        ours = {s.name: s for s in self.registry.services}
        services = {role: ours[name] for role, name in (("broker", "kafka"), ("postgres", "postgres"))
                    if name in ours}
        cluster, spark = self.stack.kafka_cluster, self.stack.spark_cluster
        services.update({f"broker:{n.node_id}": n for n in (cluster.nodes if cluster else [])})
        services.update({f"worker:{w.index}": w for w in (spark.workers if spark else [])})
        return Targets(
            driver=self.current_driver, restart_driver=self.restart_driver, driver_now=lambda: self.driver,
            expect_down=self.set_expect_down,
            control_dir=self.files.control, executors_log=self.files.executors,
            progress=lambda: read_progress(self.files.progress),
            checkpoint=lambda: self.checkpoint, started_pids=self.registry.seen_pids,
            services=services,
            postgres_url=self.stack.postgres_url, sink_table=self.sink_name,
            seed=self.scenario.workload.seed, network=self._network(), spark_ports=self._kafka_ports(),
            topic=self.topic, bootstrap_servers=self.stack.bootstrap_servers, pace=self.pace,
            query_paused=self.query_paused,
            driver_clock=self.files.driver_clock if "driver" in clock_targets(self.scenario.faults) else None,
            storage_control=self.storage.control if self.storage else None,
            storage_stats=self.storage.stats if self.storage else None,
            source_table=self.source_table if self.scenario.source.delta else None,
            source_control=self.source_fs.control if self.source_fs else None,
            source_stats=self.source_fs.stats if self.source_fs else None)

    def query_paused(self) -> bool:
        """Whether the query cannot run a batch now: its driver dead, or a new one starting."""
        return self.restarting or self.driver is None or not self.driver.running

    def _brokers(self) -> list:
        """The harness's own brokers whose Spark listener is behind a proxy."""
        cluster = self.stack.kafka_cluster
        nodes = cluster.nodes if cluster else [s for s in self.registry.services if s.name == "kafka"]
        return [n for n in nodes if getattr(n, "spark_listener", None)]

    def _kafka_ports(self):
        """The ports Spark must reach Kafka on (the proxies') and the brokers' own ports."""
        brokers = self._brokers()
        if not brokers:
            return None
        return lambda: ({b.spark_listener[1] for b in brokers},
                        {p for b in brokers for p in (b.port, b.spark_listener[0])})

    def _network(self) -> dict:
        """path -> (the Toxiproxy server, the names of its proxies, a probe through them):
        "postgres", "kafka" (every broker's proxy) and "broker:N" (one broker's)."""
        proxy = self.stack.toxiproxy
        if proxy is None:
            return {}
        out = {}
        if "postgres" in self.stack.proxies:
            url = self.stack.spark_postgres_url or ""
            out["postgres"] = (proxy, ["postgres"], lambda: probe_postgres(url))
        brokers = self._brokers()
        if "kafka" in self.stack.proxies and brokers:
            out["kafka"] = (proxy, [b.proxy_name for b in brokers],
                            lambda: probe_kafka(self.stack.spark_bootstrap_servers))
            for b in brokers:
                out[f"broker:{b.node_id}"] = (proxy, [b.proxy_name], _kafka_probe(b.spark_bootstrap_servers))
        return out

    def sent_offsets(self) -> dict[int, int]:
        """The case's topic's end offsets now: what has been sent to it (from the broker)."""
        from workloads import generator

        return generator.end_offsets(self.stack.bootstrap_servers, self.topic)

    def whereabouts(self) -> str:
        """How far the case had got, for a message: 'at 4,868 of 10,000 events sent'."""
        if self.phase == "sending":
            return f"at {self.sent:,} of {self.planned:,} events sent"
        if self.phase == "draining":
            return f"after all {self.sent:,} events were sent, while waiting for the pipeline to drain"
        return f"while {self.phase}, before any event was sent"


def _kafka_probe(bootstrap: str):
    """A probe of Kafka at `bootstrap`, bound now (not when the probe runs)."""
    return lambda: probe_kafka(bootstrap)
