"""Sinks: where a pipeline's output goes, and how a consumer reads it back.

A sink is a class built as `Sink(ctx)` from a `SinkContext` (its name, the guarantee, the output
columns, the case's directory, PostgreSQL's URL, Kafka's bootstrap servers and the topic the
query reads). The driver calls
  setup()                      create what it writes into, before the query starts
  write(batch_df, batch_id)    one micro-batch, through `foreachBatch` (behind the commit gate)
  close()                      release connections, when the query stopped
and the harness, after the run,
  read()                       what a consumer sees, as a pandas DataFrame with the output
                               columns plus `committed_ms` (when a reader could first see
                               each row) and, if it knows it, `batch_id`
  report()                     optional: what the sink says about itself beyond its rows
                               (files outside its log...), recorded as the case's sink_report
A sink may set `last_rows` after each write (how many rows it wrote: the commit gate holds
only a batch that wrote some). Spark's own format sinks (`FormatSink`) set
`streaming_format = True` and start the query themselves with `start(df, configured)`
in place of `write`.
`SINKS` maps a scenario's sink name to its class and the guarantees it can give. A
scenario's own sink is `sink = "custom"` with `sink_class = "module:Class"` (the same
contract; the case's guarantee is what its author claims for it, and the verdict tests it).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class SinkContext:
    """What a sink needs to know, in the driver and in the harness alike."""

    name: str                    # unique per case: a table, topic or directory name
    guarantee: str               # the delivery guarantee the case declares
    columns: dict[str, str]      # the pipeline's output columns -> Spark SQL type, in order
    workdir: str                 # the case's directory
    postgres_url: str | None = None
    bootstrap_servers: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    topic: str | None = None     # the Kafka topic the case's query reads (its partitions, for one)

    def to_dict(self) -> dict:
        return asdict(self)


class Sink(Protocol):
    """What the driver (setup, write, close) and the harness (read) call."""

    def setup(self) -> None: ...
    def write(self, batch_df, batch_id: int) -> None: ...
    def read(self) -> Any: ...     # a pandas DataFrame: the output columns + committed_ms
    def close(self) -> None: ...


class FormatSink(Sink, Protocol):
    """Spark's own sink (Parquet, Kafka, Delta): it starts the query itself."""

    streaming_format: bool

    def start(self, df, configured) -> Any: ...   # configured(df): the DataStreamWriter; returns the query


@runtime_checkable
class ReportingSink(Protocol):
    """A sink that says something about itself beyond its rows."""

    def report(self) -> dict: ...


@dataclass(frozen=True)
class SinkKind:
    """A built-in sink: where its class lives and the guarantees it can be configured for."""

    target: str                  # "module:Class": its name in messages and in the driver's config
    guarantees: tuple[str, ...]
    needs_postgres: bool = False
    checked: bool = True         # False: a speed run's sink, nothing to read back, no verdict
    commit_gate: bool = True     # False: Spark's own format sink, no foreachBatch to hold a batch in
    why_not: dict[str, str] = field(default_factory=dict)   # guarantee -> why it cannot give it
    jvm: tuple[str, ...] = ()    # JVM artifacts (harness/versions.py JVM_ARTIFACTS) its driver needs
    spark_conf: dict[str, str] = field(default_factory=dict)   # settings its driver's session needs
    cls: Callable[[], type] | None = None   # its class, imported by name (the module's _-functions)

    def load(self) -> type:
        assert self.cls is not None, self.target
        return self.cls()


# each built-in sink's class, imported by name when a case needs it (a sink's module may need
# what the harness's process does not load, Delta's or psycopg's)
def _postgres() -> type:
    from workloads.sinks.postgres import PostgresSink

    return PostgresSink


def _parquet() -> type:
    from workloads.sinks.files import ParquetFileSink

    return ParquetFileSink


def _kafka() -> type:
    from workloads.sinks.kafka import KafkaTopicSink

    return KafkaTopicSink


def _delta() -> type:
    from workloads.sinks.delta import DeltaStreamSink

    return DeltaStreamSink


def _delta_batch() -> type:
    from workloads.sinks.delta import DeltaBatchSink

    return DeltaBatchSink


def _noop() -> type:
    from workloads.sinks.noop import NoopSink

    return NoopSink


def _postgres_upsert() -> type:
    from workloads.sinks.upsert import PostgresUpsertSink

    return PostgresUpsertSink


def _delta_merge() -> type:
    from workloads.sinks.upsert import DeltaMergeSink

    return DeltaMergeSink


def _foreach_batch() -> type:
    from workloads.sinks.foreach_batch import ForeachBatchSink

    return ForeachBatchSink


# at-most-once comes from how the driver restarts (a fresh checkpoint at the latest offsets),
# over a plain append: nothing is written twice, and what was in flight is skipped
_FILE_SINK_WHY = ("Spark's file sink commits each batch's files through its _spark_metadata log, so it "
                  "is exactly-once by construction; at-most-once's fresh checkpoint would find its batch "
                  "ids already in that log and write nothing")
_DELTA_STREAM_WHY = ("Delta's streaming sink records each batch id in the table's log and skips one it has "
                     "seen, so it is exactly-once by construction; for at-least-once or at-most-once use "
                     'sink = "delta_batch", a foreachBatch append')
_UPSERT_WHY = ("an upsert by key rewrites a replayed batch's rows with the same values, so it cannot lose "
               "what a restart skipped the way at-most-once's fresh checkpoint does")
_DELTA_CONF = {   # Delta's session settings (its documentation's two)
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # Delta rebuilds the table's snapshot after every commit in 50 tasks by default: on two
    # cores that was 4.5 s of each 300-row append; in 2 tasks, 2.3 s
    # (docs/pipelines-and-sinks.md, "Delta Lake")
    "spark.databricks.delta.snapshotPartitions": "2",
}
SINKS = {
    "postgres": SinkKind("workloads.sinks.postgres:PostgresSink",
                         ("at-most-once", "at-least-once", "exactly-once"), needs_postgres=True,
                         cls=_postgres),
    "parquet": SinkKind("workloads.sinks.files:ParquetFileSink", ("exactly-once",), commit_gate=False,
                        why_not=dict.fromkeys(("at-most-once", "at-least-once"), _FILE_SINK_WHY),
                        cls=_parquet),
    "kafka": SinkKind("workloads.sinks.kafka:KafkaTopicSink", ("at-least-once",), commit_gate=False,
                      why_not={"exactly-once": "Spark's Kafka sink is not transactional: a batch run again "
                                               "after a restart is sent again",
                               "at-most-once": "a restart on a fresh checkpoint re-sends nothing, but Spark "
                                               "may still send a batch twice within one query"}, cls=_kafka),
    "delta": SinkKind("workloads.sinks.delta:DeltaStreamSink", ("exactly-once",), commit_gate=False,
                      why_not=dict.fromkeys(("at-most-once", "at-least-once"), _DELTA_STREAM_WHY),
                      jvm=("delta",), spark_conf=_DELTA_CONF, cls=_delta),
    "delta_batch": SinkKind("workloads.sinks.delta:DeltaBatchSink",
                            ("at-most-once", "at-least-once", "exactly-once"), jvm=("delta",),
                            spark_conf=_DELTA_CONF, cls=_delta_batch),
    "noop": SinkKind("workloads.sinks.noop:NoopSink", ("at-most-once", "at-least-once", "exactly-once"),
                     checked=False, cls=_noop),
    # an update-mode job's upserts by its key (workloads/sinks/upsert.py)
    "postgres_upsert": SinkKind("workloads.sinks.upsert:PostgresUpsertSink",
                                ("exactly-once", "at-least-once"), needs_postgres=True,
                                why_not={"at-most-once": _UPSERT_WHY}, cls=_postgres_upsert),
    "delta_merge": SinkKind("workloads.sinks.upsert:DeltaMergeSink", ("exactly-once", "at-least-once"),
                            jvm=("delta",), spark_conf=_DELTA_CONF, why_not={"at-most-once": _UPSERT_WHY},
                            cls=_delta_merge),
    # the user's own foreachBatch function and the tables it writes (workloads/sinks/foreach_batch.py)
    "foreach_batch": SinkKind("workloads.sinks.foreach_batch:ForeachBatchSink",
                              ("at-most-once", "at-least-once", "exactly-once"), needs_postgres=True,
                              jvm=("delta",), spark_conf=_DELTA_CONF, cls=_foreach_batch),
}
CUSTOM_SINK = "custom"   # the scenario's own class, named by the case's sink_class
# a user's sink runs with what the built-in ones may need (Delta is where Spark users most
# often write streams), so that it can write Delta as ours do
CUSTOM_SINK_JVM, CUSTOM_SINK_CONF = ("delta",), _DELTA_CONF


def sink_needs(sink: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """The JVM artifacts and the session settings a case's driver needs for its sink."""
    if sink == CUSTOM_SINK:
        return CUSTOM_SINK_JVM, dict(CUSTOM_SINK_CONF)
    return SINKS[sink].jvm, dict(SINKS[sink].spark_conf)


def sink_target(sink: str, sink_class: str | None) -> str:
    """The "module:Class" of a case's sink."""
    if sink == CUSTOM_SINK:
        if sink_class is None:
            raise ValueError('sink "custom" needs a sink_class')
        return sink_class
    return SINKS[sink].target


def sink_class(sink: str, own: str | None) -> type:
    """A case's sink class: a built-in one's (imported by name), or the scenario's own
    `sink_class = "module:Class"` (a user's plug-in, named by its text)."""
    if sink == CUSTOM_SINK:
        return load(sink_target(sink, own))
    return SINKS[sink].load()


def load(target: str) -> type:
    """The sink class named "module:Class" (a scenario's own, already validated by the loader)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)
