"""[matrix]'s state and checkpoint axes: each case of the matrix once per combination of Spark's
state store, RocksDB's changelog checkpointing, the checkpoint format and async progress tracking.

    [matrix]
    guarantee = ["exactly-once"]
    state_store = ["hdfs", "rocksdb"]      # Spark's state store provider
    changelog = [false, true]              # RocksDB's changelog checkpointing
    checkpoint_format = [1, 2]             # spark.sql.streaming.stateStore.checkpointFormatVersion
    async_progress = [false, true]         # the writer's asyncProgressTrackingEnabled

Every key is optional; without any, the matrix is what it was (the same cases, the same names).
A case's name gains its store when `state_store` is swept (`-hdfs`, `-rocksdb`), and each other
swept setting when it is not Spark's default (`-changelog`, `-ckpt2`, `-async`). Its settings
ride on its pipeline's SparkSettings, so they reach the driver's SparkConf (or, for async progress,
its writer's options) as `state_store` always has, and summary.json records them per case
(`state_settings`).

A combination Spark cannot run is left out of the matrix (logged), each for Spark's own reason,
quoted where it is applied below; a value that no combination can take is refused (exit 2) with
that reason and the fix, before anything starts. A user's job is known stateful only from its
plan: harness/run/job_check.py refuses async progress tracking for one before start.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, replace
from typing import Any

from workloads.validate import Section, bad

log = logging.getLogger(__name__)

KEYS = ("state_store", "changelog", "checkpoint_format", "async_progress")
STORES = ("hdfs", "rocksdb")
FORMATS = (1, 2)
# Spark's allowlist of sinks that take async progress tracking, by the sink's name()
# (AsyncProgressTrackingMicroBatchExecution.validateAndGetTrigger): noop-table, console,
# MemorySink, KafkaTable. Of the harness's sinks only kafka writes through one of them; the
# others write through foreachBatch (or a file or Delta sink), which it refuses.
ASYNC_SINKS = ("kafka",)
ASYNC_FIX = 'use sink = "kafka", a processing-time trigger and a stateless pipeline (passthrough), or drop it'


@dataclass(frozen=True)
class Setting:
    """One combination of the swept axes; None: not swept (the pipeline's own)."""

    state_store: str | None = None
    changelog: bool | None = None
    checkpoint_format: int | None = None
    async_progress: bool | None = None

    @property
    def swept(self) -> bool:
        return any(v is not None for v in (self.state_store, self.changelog, self.checkpoint_format,
                                           self.async_progress))

    def suffix(self) -> str:
        """The case name's part: the store when swept, each other setting when not Spark's default."""
        parts = [self.state_store or "", "changelog" if self.changelog else "",
                 f"ckpt{self.checkpoint_format}" if self.checkpoint_format not in (None, 1) else "",
                 "async" if self.async_progress else ""]
        return "".join(f"-{p}" for p in parts if p)

    def value(self, key: str) -> Any:
        return getattr(self, key)


def settings(s: Section) -> list[Setting]:
    """Every combination of the state axes [matrix] `s` gives ([Setting()] without any)."""
    axes = [_axis(s, key) for key in KEYS]
    return [Setting(*combo) for combo in itertools.product(*axes)]


def _axis(s: Section, key: str) -> list:
    """The axis `key`'s values, each checked ([None]: not swept)."""
    if key not in s:
        return [None]
    values = s.raw(key)
    example = {"state_store": '["hdfs", "rocksdb"]', "checkpoint_format": "[1, 2]"}.get(key, "[false, true]")
    if not isinstance(values, list) or not values:
        raise bad(s.field(key), values, "expected a non-empty array", f"write {key} = {example}")
    if len(set(map(repr, values))) != len(values):
        raise bad(s.field(key), values, "lists a value twice", "give each value once")
    for i, value in enumerate(values):
        field = f"{s.field(key)}[{i}]"
        if key == "state_store" and value not in STORES:
            fix = ('write state_store = ["rocksdb"] and changelog = [true]' if value == "rocksdb-changelog"
                   else f"use {' or '.join(repr(x) for x in STORES)}")
            raise bad(field, value, f"is not a state store of the matrix ({', '.join(STORES)})", fix)
        if key == "checkpoint_format" and (type(value) is not int or value not in FORMATS):
            # SQLConf's spark.sql.streaming.stateStore.checkpointFormatVersion: 1 (the default) or 2,
            # state store checkpoint ids (RocksDB's unique ids per task attempt), since Spark 4.0
            raise bad(field, value, "Spark's checkpoint format version is 1 or 2",
                      "write checkpoint_format = [1, 2]")
        if key in ("changelog", "async_progress") and not isinstance(value, bool):
            raise bad(field, value, "expected true or false", f"write {key} = [false, true]")
    return values


def apply(pipeline, setting: Setting):
    """`pipeline` with `setting`'s swept values in its Spark settings."""
    spark = pipeline.spark
    store = setting.state_store or ("hdfs" if spark.state_store == "hdfs" else "rocksdb")
    changelog = spark.state_store == "rocksdb-changelog" if setting.changelog is None else setting.changelog
    if store == "rocksdb" and changelog:
        store = "rocksdb-changelog"   # the store name that carries changelog checkpointing's setting
    spark = replace(spark, state_store=store,
                    checkpoint_format=setting.checkpoint_format or spark.checkpoint_format,
                    async_progress=spark.async_progress if setting.async_progress is None
                    else setting.async_progress)
    return replace(pipeline, spark=spark)


def why_not(pipeline, sink: str, setting: Setting = Setting()) -> tuple[str, str] | None:
    """Why Spark cannot run `pipeline` (`setting` applied) into `sink`: (Spark's reason, the
    fix), or None. Spark's own rules, each quoted from where Spark applies it."""
    spark = pipeline.spark
    store = spark.state_store
    if store == "hdfs" and setting.changelog:
        # RocksDBConf reads spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled;
        # HDFSBackedStateStoreProvider has no changelog and never reads it: the case would run
        # without one and be named as if it had
        return ("changelog checkpointing is a setting of Spark's RocksDB state store provider only "
                "(spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled, RocksDBConf); "
                "the HDFS-backed store has no changelog",
                'add "rocksdb" to [matrix] state_store, or set [pipeline] state_store = "rocksdb"')
    if store == "hdfs" and spark.checkpoint_format > 1:
        # sql/core/.../state/HDFSBackedStateStoreProvider.scala, getStore: a state store checkpoint
        # id (format 2) throws STATE_STORE_CHECKPOINT_IDS_NOT_SUPPORTED
        return ("Spark says \"HDFSBackedStateStoreProvider does not support checkpointFormatVersion > 1\" "
                "(STATE_STORE_CHECKPOINT_IDS_NOT_SUPPORTED): format 2's unique ids per task attempt are "
                "RocksDB's",
                'add "rocksdb" to [matrix] state_store, or set [pipeline] state_store = "rocksdb"')
    stores = _stores(pipeline)
    if stores and store not in stores:
        return (f"{pipeline.kind} runs only on {', '.join(stores)} (Spark's transformWithState needs "
                "the RocksDB state store provider)", 'write state_store = ["rocksdb"]')
    if spark.async_progress:
        return _async_why_not(pipeline, sink)
    return None


def _stores(pipeline) -> tuple[str, ...] | None:
    from harness.check.registry import CUSTOM, PIPELINES
    from harness.check.registry import kind as pipeline_kind

    if pipeline.kind == CUSTOM or pipeline.kind not in PIPELINES:
        return None
    return pipeline_kind(pipeline.kind).state_stores_for(pipeline.values)


def stateful(pipeline) -> bool | None:
    """Whether a built-in pipeline keeps state; None for one whose plan decides (a job, a custom
    query): a job's is checked before start (harness/run/job_check.py), a custom query's by
    Spark at its first batch."""
    from harness.check.registry import CUSTOM, PIPELINES
    from harness.check.registry import kind as pipeline_kind

    if pipeline.kind == CUSTOM or pipeline.kind not in PIPELINES:
        return None
    return not pipeline_kind(pipeline.kind).stateless_for(pipeline.values)


def _async_why_not(pipeline, sink: str) -> tuple[str, str] | None:
    """sql/core/.../streaming/runtime/AsyncProgressTrackingMicroBatchExecution.scala (Spark 4.2)
    and StreamingQueryManager: the sink, the trigger and the plan."""
    if stateful(pipeline):
        # checkNotStatefulStreamingQuery, at the first batch: a StateStoreWriter in the plan
        return (f"Spark says \"Stateful streaming queries does not support async progress tracking at this "
                f"moment\" (AsyncProgressTrackingMicroBatchExecution), and {pipeline.kind} keeps state",
                ASYNC_FIX)
    if pipeline.trigger == "real-time":
        return ("Spark says \"Async progress tracking is not supported in real-time mode\" "
                "(STREAMING_REAL_TIME_MODE.ASYNC_PROGRESS_TRACKING_NOT_SUPPORTED)", ASYNC_FIX)
    if pipeline.trigger == "available-now":
        return ("Spark says \"Async progress tracking cannot be used with AvailableNow trigger\" "
                "(validateAndGetTrigger: a processing-time trigger only)", ASYNC_FIX)
    if sink not in ASYNC_SINKS:
        return (f"Spark says \"Sink ... does not support async progress tracking\" for the {sink} sink: "
                "validateAndGetTrigger takes only noop-table, console, MemorySink and KafkaTable, and the "
                f"harness's {sink} sink writes through another", ASYNC_FIX)
    return None


def stateless_refusal(s: Section, pipeline) -> None:
    """A state axis over a pipeline that keeps no state would run the same query twice."""
    swept = [k for k in ("state_store", "changelog", "checkpoint_format") if k in s]
    if swept and pipeline is not None and stateful(pipeline) is False:
        raise bad(s.field(swept[0]), s.raw(swept[0]), f"the {pipeline.kind} pipeline keeps no state, so "
                  "Spark's state store settings change nothing in it", "drop it, or use a stateful pipeline")


def refuse_unused(s: Section, tried: list[tuple[Setting, tuple[str, str] | None]]) -> None:
    """A swept value that no combination of the matrix can take: refused with Spark's reason."""
    for key in KEYS:
        if key not in s:
            continue
        for value in s.raw(key):
            reasons = [why for setting, why in tried if setting.value(key) == value]
            if reasons and all(why is not None for why in reasons):
                problem, fix = reasons[0]   # type: ignore[misc]
                raise bad(s.field(key), value, f"no case of the matrix can take it: {problem}", fix)


def left_out(name: str, why: tuple[str, str]) -> None:
    log.info("matrix: %s left out: %s", name, why[0])
