"""The driver's config: written as JSON by the harness, read by the driver program."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workloads.sinks import SinkContext

QUERY_ID_STRIDE = 1_000_000   # the k-th query of a case numbers its batches from k * this


@dataclass(frozen=True, kw_only=True)
class DriverConfig:
    """Everything one driver process needs to run one case's query."""

    app_name: str
    master: str
    spark_conf: dict[str, str] = field(default_factory=dict)
    jars: list[str] = field(default_factory=list)
    bootstrap_servers: str
    topic: str
    checkpoint: str
    pipeline: str                  # a kind in workloads.pipelines.PIPELINES, or "custom"
    params: dict                   # the pipeline's keys in ms and counts
    trigger_ms: int                # processing-time's interval; available-now's pause; real-time's batch
    sink: str                      # a name in workloads.sinks.SINKS, or "custom"
    sink_context: SinkContext
    trigger: str = "processing-time"   # or "available-now", "real-time" (harness/scenario/model.py)
    build: str                     # "module:function" that builds the query: the kind's, or the user's
    sink_class: str = ""           # "module:Class" of the sink ("": the named sink's own)
    import_paths: list[str] = field(default_factory=list)   # the scenario's directory: the user's code
    source_options: dict[str, str] = field(default_factory=dict)   # e.g. maxOffsetsPerTrigger
    writer_options: dict[str, str] = field(default_factory=dict)   # e.g. asyncProgressTrackingEnabled
    # "kafka", or "rate": Spark's rate-micro-batch source, rows_per_batch events a batch, for
    # Spark's own ceiling of the query (harness/run/ceiling.py)
    source: str = "kafka"
    rows_per_batch: int = 0
    delta_table: str = ""          # source "delta": the table the harness appends the topic to
    # files the driver writes and watches, in the case directory (the harness names them:
    # harness/results/rundir.py CaseDir)
    status_path: str = ""
    conf_path: str = ""            # the SparkConf it runs with
    progress_path: str = ""
    executors_path: str = ""       # executors added and removed (pipelines/executors.py)
    progress: bool = True          # False ([measure] enabled = false): no progress listener
    stop_path: str = ""
    timers_path: str = ""          # where a transformWithState processor records its firings (timer_log.py)
    control_dir: str = ""          # the control channel (pipelines/control.py)
    # where a query on a fresh checkpoint starts: earliest, or latest (at-most-once's restart)
    starting_offsets: str = "earliest"
    batch_base: int = 0            # added to batch ids in the sink: one range per query
    task_faults: bool = False      # a stage before the sink that fail-task can fail (pipelines/taskfault.py)
    # the clock faults' (workloads/clock.py): the driver JVM's clock file, and whether each
    # executor reads one of its own; "" and False: every clock is the real one
    clock_file: str = ""
    executor_clock: bool = False

    def write(self, path: Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def read(cls, path: Path) -> DriverConfig:
        raw = json.loads(Path(path).read_text())
        return cls(**{**raw, "sink_context": SinkContext(**raw["sink_context"])})
