"""The scenario model: frozen dataclasses, built only by harness.scenario.load."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from faults.spec import FaultSpec
from workloads.generator.spec import WorkloadSpec
from workloads.pipelines.params import STATE_STORES

GUARANTEES = ("at-most-once", "at-least-once", "exactly-once")


@dataclass(frozen=True)
class KafkaConfig:
    """An external cluster, or None: the harness starts its own, of `brokers` nodes."""

    bootstrap_servers: str | None = None
    brokers: int = 1


LOCAL_JIT = "-XX:TieredStopAtLevel=1"   # the JIT of local-cluster JVMs: C1 only (SparkConfig.defaults)
STANDALONE = "standalone"


@dataclass(frozen=True)
class SparkConfig:
    """The Spark master and extra `--conf` settings for every driver."""

    master: str = "local-cluster[2,1,1024]"   # or "standalone": the harness starts a cluster
    # read-only so the frozen config cannot change under a running case; not hashed
    conf: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    workers: int = 2                  # master "standalone": its workers, cores and memory each
    worker_cores: int = 1
    worker_memory: str = "1g"

    @property
    def standalone(self) -> bool:
        """The harness starts a Spark standalone cluster of its own for the run."""
        return self.master == STANDALONE

    @property
    def ours(self) -> bool:
        """Spark's executors run on this machine, started by the harness (or by Spark in it)."""
        return self.standalone or self.master.startswith("local")

    def defaults(self) -> dict[str, str]:
        """The harness's own settings for this master, each overridden by the same key in `conf`.

        On `local-cluster` (one machine, runs of minutes) the JVMs compile with C1 alone: C2
        compiles for longer than such a run lasts, on the cores the query needs. Measured on
        this 2-core machine at 6,000 events/s (docs/performance.md, "Where a batch's time goes"): the
        median batch fell from 1,060 ms to 713 ms and the first batches from 2 s to 0.9 s. On
        `local[N]` (executors inside the driver's JVM) likewise: its JVM is what a case restarts."""
        if not (self.master.startswith("local") or self.standalone):
            return {}
        return {"spark.driver.extraJavaOptions": LOCAL_JIT, "spark.executor.extraJavaOptions": LOCAL_JIT}


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
class SparkSettings:
    """Settings of the query that change its cost and behaviour, as [pipeline] keys."""

    state_store: str = "hdfs"
    shuffle_partitions: int = 2     # Spark's 200 spends most of a batch scheduling tasks on 2 cores
    max_offsets_per_trigger: int | None = None
    # Spark's Kafka source fails the query when records it has not read are gone (deleted by
    # retention, or by kafka-retention); False: it skips them (failOnDataLoss = false)
    fail_on_data_loss: bool = True
    # the state and checkpoint settings a [matrix] sweeps (harness/scenario/state_matrix.py), at
    # Spark's defaults unless swept: the checkpoint format (2: unique ids per task attempt), and
    # async progress tracking (the writer's asyncProgressTrackingEnabled)
    checkpoint_format: int = 1
    async_progress: bool = False

    def conf(self) -> dict[str, str]:
        partitions = {"spark.sql.shuffle.partitions": str(self.shuffle_partitions)}
        version = {} if self.checkpoint_format == 1 else {CHECKPOINT_FORMAT_KEY: str(self.checkpoint_format)}
        return {**STATE_STORES[self.state_store], **partitions, **version}

    def source_options(self) -> dict[str, str]:
        options = {} if self.fail_on_data_loss else {"failOnDataLoss": "false"}
        if self.max_offsets_per_trigger is not None:
            options["maxOffsetsPerTrigger"] = str(self.max_offsets_per_trigger)
        return options

    def writer_options(self) -> dict[str, str]:
        """The query's writer options (DataStreamWriter.option): async progress tracking is one,
        not a Spark setting (AsyncProgressTrackingMicroBatchExecution reads the writer's options)."""
        return {"asyncProgressTrackingEnabled": "true"} if self.async_progress else {}

    def state_settings(self) -> dict:
        """The state and checkpoint settings the matrix sweeps, as summary.json's cases record
        them: the store (hdfs or rocksdb), changelog checkpointing, the checkpoint format, async
        progress tracking."""
        return {"state_store": "hdfs" if self.state_store == "hdfs" else "rocksdb",
                "changelog": self.state_store == "rocksdb-changelog",
                "checkpoint_format": self.checkpoint_format, "async_progress": self.async_progress}

    def describe(self) -> dict:
        out = {"state_store": self.state_store, "shuffle_partitions": self.shuffle_partitions,
               "max_offsets_per_trigger": self.max_offsets_per_trigger,
               "fail_on_data_loss": self.fail_on_data_loss, "conf": self.conf(),
               "source_options": self.source_options()}
        # added later: at their defaults they are left out, so that a scenario's fingerprint (and
        # compare against its baselines) stays what it was before they existed
        if self.checkpoint_format != 1:
            out["checkpoint_format"] = self.checkpoint_format
        if self.async_progress:
            out.update(async_progress=True, writer_options=self.writer_options())
        return out


CHECKPOINT_FORMAT_KEY = "spark.sql.streaming.stateStore.checkpointFormatVersion"


# how the query is triggered (the [pipeline] key `trigger`):
#   processing-time  a batch every trigger_ms (trigger = "1s")
#   available-now    a scheduled incremental job: the query drains what is there and stops,
#                    and starts again trigger_ms later (Trigger.AvailableNow)
#   real-time        Spark's real-time mode, long-running tasks, a checkpoint every trigger_ms
TRIGGERS = ("processing-time", "available-now", "real-time")


@dataclass(frozen=True, kw_only=True)
class Pipeline:
    """The streaming query under test: a kind (its oracle), its keys, and whose code builds it."""

    kind: str = "tumbling_count"
    # the kind's keys in milliseconds and counts, as `build(events_df, params)` takes them
    values: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    trigger_ms: int = 1000
    trigger: str = "processing-time"   # one of TRIGGERS
    build: str | None = None      # the user's "module:function" in place of the kind's own
    oracle: str | None = None     # kind "custom": the user's "module:function"
    key: tuple[str, ...] = ()     # kind "custom" with an oracle: the columns that identify a row
    # the output columns -> Spark SQL type (the kind's own, or a custom pipeline's declared ones)
    columns: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    spark: SparkSettings = field(default_factory=SparkSettings)

    def params(self) -> dict:
        return dict(self.values)

    @property
    def build_target(self) -> str:
        """The "module:function" the driver calls: the scenario's own build, or the kind's."""
        if self.build:
            return self.build
        from harness.check.registry import kind

        return kind(self.kind).build

    @property
    def window_ms(self) -> int | None:
        return self.values.get("window_ms")

    @property
    def slide_ms(self) -> int | None:
        return self.values.get("slide_ms")

    @property
    def watermark_ms(self) -> int:
        """The declared watermark delay (0 for a pipeline without one)."""
        return self.values.get("watermark_ms") or 0


@dataclass(frozen=True, kw_only=True)
class Case:
    """One run of the pipeline: a delivery guarantee into a sink."""

    name: str
    guarantee: str
    sink: str = "postgres"
    sink_class: str | None = None   # sink "custom": the user's "module:Class"
    pipeline: Pipeline | None = None   # [cases.pipeline]: this case's own; None: the scenario's
    series: str = ""                # run --repeat N: the scenario's name of the case ("": `name`)
    repeat: int = 1                 # which of its N runs this is
    # the checkpoint's file system: "disk", or "fuse" (the storage faults' layer without a fault:
    # what it costs; a storage fault puts every case on it), or "sync" (that layer making every
    # write durable as it returns, as a sync mount, HDFS or an object store do: lose-unsynced
    # then loses nothing)
    checkpoint_fs: str = "disk"
    # sink "foreach_batch": the user's write_batch ("module:function") and the tables it writes
    # (workloads.sinks.foreach_batch.Table; harness/scenario/foreach.py)
    function: str | None = None
    tables: tuple[Any, ...] = ()


CHECKPOINT_FS = ("disk", "fuse", "sync")


@dataclass(frozen=True, kw_only=True)
class Measure:
    """[measure]: which part of the run the rates and the lag trend are measured over."""

    warmup_s: float = 0.0           # seconds from the first event sent that are not measured
    lag_trend_max: float = 0.02     # a lag growing faster than this share of the offered rate: behind
    warmup_eps: float | None = None   # the warm-up phase's own rate; None: the workload's shape throughout
    # False: no live measurement (the resource sampler, the driver's progress reports); the run
    # is still checked, and its throughput read from the checkpoint (what measuring costs)
    enabled: bool = True
    # after each case, Spark's own ceiling for its query (harness/run/ceiling.py), a reference of
    # the case's (cases[].references.spark_ceiling_eps); off: it costs a driver and a dozen batches
    ceiling: bool = False
    # the state check after each case (harness/check/state_check.py): None ("auto") checks a case
    # that lasted long enough for the read to stay within STATE_CHECK_SHARE of it; True always;
    # False never
    state_check: bool | None = None

    def offered(self, workload):
        """The workload as sent: with a warm-up rate, its shape starts with the warm-up phase."""
        if self.warmup_eps is None or self.warmup_s <= 0:
            return workload
        from dataclasses import replace

        from workloads.generator import shapes

        return replace(workload, rate=shapes.WarmUp(workload.rate, self.warmup_s, self.warmup_eps))


SOURCE_KINDS = ("kafka", "delta")


@dataclass(frozen=True)
class Source:
    """[source]: what the query reads. `kafka` (the default): the case's topic. `delta`: a
    Delta table the harness appends the topic's records to, a commit every `commit_interval_s`
    (workloads/delta_source.py); the generator, ground truth and the lag are Kafka's as ever."""

    kind: str = "kafka"
    commit_interval_s: float = 1.0

    @property
    def delta(self) -> bool:
        return self.kind == "delta"


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """A validated scenario file."""

    name: str
    description: str = ""
    path: Path
    imports: tuple[Path, ...] = ()  # where the user's modules are: the scenario's directory, then `imports`
    fault_kinds: tuple[str, ...] = ()   # "module:NAME" of the user's own fault kinds, registered
    services: Services
    workload: WorkloadSpec
    pipeline: Pipeline
    cases: tuple[Case, ...]
    faults: tuple[FaultSpec, ...] = ()
    drain_timeout_s: float = 120.0
    measure: Measure = field(default_factory=Measure)
    quick: bool = False             # loaded with --quick: its [quick] overrides applied
    source: Source = field(default_factory=Source)

    def to_dict(self) -> dict:
        """The validated values as plain JSON types."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    def fingerprint(self) -> str:
        """A hash of what the scenario runs: its effective values (after --quick and the
        defaults), not where its file is nor how often each case repeats. Two runs with the same
        fingerprint ran the same workload, pipeline, cases and faults; compare refuses others."""
        import hashlib
        import json

        values = self.to_dict()
        for key in ("path", "imports", "description"):
            values.pop(key, None)
        cases = []
        for case in values.get("cases", []):
            case = {**case, "name": case.get("series") or case["name"]}
            case.pop("series", None)
            case.pop("repeat", None)
            # a key added later, at its default, leaves the fingerprint as it was before the key:
            # a baseline measured then still compares with today's run of the same scenario
            if case.get("checkpoint_fs") == "disk":
                case.pop("checkpoint_fs")
            if case.get("function") is None and not case.get("tables"):   # added later, likewise
                case.pop("function", None)
                case.pop("tables", None)
            if case not in cases:
                cases.append(case)
        values["cases"] = cases
        if values.get("source") == _plain(Source()):
            values.pop("source")   # added later: at its default, the fingerprint is as before
        if isinstance(values.get("measure"), dict) and values["measure"].get("ceiling") is False:
            values["measure"].pop("ceiling")   # added later, likewise
        if isinstance(values.get("measure"), dict) and values["measure"].get("state_check", 0) is None:
            values["measure"].pop("state_check")   # added later ("auto"), likewise
        replay = (values.get("workload") or {}).get("replay")
        if isinstance(replay, dict) and replay.get("file"):   # the same file in any checkout
            replay["file"] = file_identity(Path(replay["file"]), Path(self.path).parent)
        text = json.dumps(values, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def repeated(self, times: int) -> Scenario:
        """Each case `times` times, as `<name>-r<k>`, round by round (every case's first run,
        then every second one), so that drift over the run falls on every case alike."""
        if times <= 1:
            return self
        from dataclasses import replace

        runs = tuple(replace(c, name=f"{c.name}-r{k}", series=c.name, repeat=k)
                     for k in range(1, times + 1) for c in self.cases)
        return replace(self, cases=runs)


def file_identity(path: Path, base: Path) -> dict:
    """A replayed file (or directory of files) as a fingerprint holds it: its path relative to
    the scenario's directory, its size and a hash of its content, never its absolute path (the
    same scenario in two CI workspaces is one series of the history, and compare takes the pair)."""
    import os

    try:
        where = Path(os.path.relpath(path, base)).as_posix()
    except ValueError:   # another drive: only its name says anything of it
        where = path.name
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    size, digest = 0, []
    for f in files:
        st = f.stat()
        size += st.st_size
        digest.append(_content_hash(str(f), st.st_size, st.st_mtime_ns))
    import hashlib

    return {"path": where, "bytes": size, "sha256": hashlib.sha256("".join(digest).encode()).hexdigest()}


@functools.lru_cache(maxsize=64)
def _content_hash(path: str, size: int, mtime_ns: int) -> str:
    """The sha256 of a file's content, read a block at a time (kept per size and mtime: a
    scenario's fingerprint is asked for more than once in a run)."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


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
