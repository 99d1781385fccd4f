"""`[pipeline] kind = "job"`: the user's own PySpark job, checked by Spark's batch engine.

    [pipeline]
    kind = "job"
    build = "my_job:transform"        # transform(df): df is the records parsed with `schema`
    # from_kafka = "my_job:from_kafka"  # or: from_kafka(df) over Kafka's raw columns
    schema = "user STRING, ts BIGINT"   # optional: read from the replayed file
    columns = { user = "STRING", session_start = "LONG", clicks = "LONG" }
    key = ["user", "session_start"]   # optional: what identifies an output row
    output_mode = "append"            # or "update" (an upsert sink: postgres_upsert, delta_merge)
    oracle = "batch"                  # or "reference": the same case without faults, run first

The job's watermark, windows and state are its own: the harness reads them from the plan
(workloads/pipelines/job.py). The loader refuses Spark's real-time mode for the batch oracle
and a schema that does not read the records, naming the field. What the job's code does is
not read here, as text: before any service starts, the run builds the job on an empty stream
and refuses by its analysed plan what a batch run cannot mirror and a watermark off the
event-time column (harness/run/job_check.py; workloads/pipelines/determinism.py, the same
check the driver makes).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

from harness.errors import ScenarioError
from harness.scenario import pipeline_keys
from harness.scenario.model import Pipeline, SparkSettings
from workloads import plugins
from workloads.errors import SpecError
from workloads.validate import Section, bad

JOB = "job"
ORACLES = ("batch", "reference")
OUTPUT_MODES = ("append", "update")
UPSERT_SINKS = ("postgres_upsert", "delta_merge", "custom", "foreach_batch")
_KEYS = ("kind", "build", "from_kafka", "schema", "columns", "key", "output_mode", "oracle", "trigger",
         "trigger_interval", "state_store", "shuffle_partitions", "max_offsets_per_trigger",
         "fail_on_data_loss")
# the end-of-run flush's record goes this far past the watermark every output waits for
FLUSH_MARGIN_MS = 86_400_000
FIX = ('remove the call, or use oracle = "reference" (the same case run first without its faults is the '
       'reference; docs/your-job.md, "Keys")')


@dataclass(frozen=True)
class JobSparkSettings(SparkSettings):
    """A job's source options: Kafka's headers too (a job parsing Kafka's columns may read them)."""

    def source_options(self) -> dict[str, str]:
        return {**super().source_options(), "includeHeaders": "true"}


@dataclass(frozen=True, kw_only=True)
class JobSpec(Pipeline):
    """A user's job: its function (`build`), how it reads the records, and its output."""

    reads: str = "parsed"           # "parsed": transform(df) on the schema's columns; "kafka": from_kafka(df)
    schema: str | None = None       # Spark DDL of the records (None until bound to the workload)
    output_mode: str = "append"
    event_time: str | None = None   # the records' event-time column (the workload's)
    records_key: str | None = None  # the records' key column (the workload's), which the truth's `key` holds

    def params(self) -> dict:
        return {**self.values, "job": self.build, "reads": self.reads, "schema": self.schema,
                "columns": dict(self.columns), "key": list(self.key), "output_mode": self.output_mode,
                "oracle": self.oracle}

    @property
    def build_target(self) -> str:
        return "workloads.pipelines.job:build"

    @property
    def watermark_ms(self) -> int:
        """How far past the last output the harness's end-of-run flush goes (FLUSH_MARGIN_MS):
        the job's own delay is in its plan, read once it runs, and is under a day."""
        return FLUSH_MARGIN_MS

    @property
    def upsert(self) -> bool:
        return self.output_mode == "update"


def parse(s: Section, scenario_dir: Path) -> JobSpec:
    """The [pipeline] table of a job (`s` already read its kind)."""
    s = Section(s.data, s.path, _KEYS)
    given = [k for k in ("build", "from_kafka") if k in s]
    if len(given) != 1:
        raise ScenarioError(f"{s.field('kind')} = \"job\" needs one of {s.field('build')} and "
                            f"{s.field('from_kafka')}" + (", not both" if given else ""),
                            'write build = "my_job:transform" (transform(df) over the records parsed with '
                            'your schema) or from_kafka = "my_job:from_kafka" (your own parsing of Kafka\'s '
                            'columns)')
    field = s.field(given[0])
    target = s.string(given[0])
    _function(target, field, scenario_dir)
    columns = pipeline_keys.columns(s)
    key = pipeline_keys.key(s, columns) if "key" in s else ()
    oracle = s.choice("oracle", ORACLES, "batch")
    mode = s.choice("output_mode", OUTPUT_MODES, "append")
    if mode == "update" and not key:
        raise bad(s.field("output_mode"), mode, "an update-mode job writes each key's newest row over "
                  "the last, so the oracle compares per key",
                  f'add {s.field("key")} = [...]: the columns of the key')
    trigger, trigger_ms = pipeline_keys.trigger(s)
    if oracle == "batch":
        if trigger == "real-time":
            raise bad(s.field("trigger"), trigger, "Spark's real-time mode has no batches whose input the "
                      "checkpoint records, so the batch oracle cannot know what the stream read", FIX)
    settings = pipeline_keys.spark_settings(s)
    spark = JobSparkSettings(**{f: getattr(settings, f) for f in settings.__dataclass_fields__})
    schema = s.string("schema", None)
    return JobSpec(kind=JOB, values=MappingProxyType({}), trigger=trigger, trigger_ms=trigger_ms,
                   build=target, oracle=oracle, key=key, columns=MappingProxyType(columns), spark=spark,
                   reads="kafka" if given[0] == "from_kafka" else "parsed", schema=schema, output_mode=mode)


def bind(pipeline, workload, where: str = "pipeline"):
    """A job bound to its workload: the schema read from the replayed file when not given, the
    event-time column, and the schema checked against the first records. Other pipelines
    come back as they are."""
    if not isinstance(pipeline, JobSpec):
        return pipeline
    if getattr(workload, "kind", "") != "replay":
        raise ScenarioError(f'{where}.kind = "job" runs on your records: the workload must be a replay',
                            '[workload] kind = "replay" with file and event_time (docs/your-job.md)')
    scanned = workload.scanned
    schema = pipeline.schema or scanned.schema
    if pipeline.schema is not None and pipeline.reads == "parsed":
        from workloads.replay.schema import problems

        found = problems(pipeline.schema, scanned.sample)
        if found:
            raise bad(f"{where}.schema", pipeline.schema,
                      f"does not parse {workload.source.path}: {found[0]}",
                      "fix the field's name or type (python -m harness replay-preview FILE prints the schema "
                      "the file has), or leave schema out to read it from the file")
    return replace(pipeline, schema=schema, event_time=workload.source.event_time,
                   records_key=workload.source.key)


def bind_jobs(pipeline, cases: tuple, workload) -> tuple:
    """The scenario's pipeline and its cases, each job among them bound to the workload
    (`bind`) and its sink checked (`check_sink`)."""
    pipeline = bind(pipeline, workload)
    bound = []
    for i, case in enumerate(cases):
        own = bind(case.pipeline, workload, f"cases[{i}].pipeline") if case.pipeline else None
        check_sink(own or pipeline, case.sink, f"cases[{i}].sink")
        bound.append(replace(case, pipeline=own) if own is not None else case)
    return pipeline, tuple(bound)


def check_sink(pipeline, sink: str, where: str) -> None:
    """An update-mode job writes through an upsert sink; an append-mode one not through one."""
    if not isinstance(pipeline, JobSpec):
        if sink in UPSERT_SINKS[:2]:
            raise bad(where, sink, "an upsert sink writes a job's update-mode output",
                      'use it with [pipeline] kind = "job" and output_mode = "update"')
        return
    if pipeline.upsert and sink not in UPSERT_SINKS:
        raise bad(where, sink, "an update-mode job rewrites each key's row: the sink must upsert by the key",
                  'use sink = "postgres_upsert" or "delta_merge"')
    if not pipeline.upsert and sink in UPSERT_SINKS[:2]:
        raise bad(where, sink, "an upsert sink keeps one row per key; this job appends",
                  'write output_mode = "update", or use an appending sink (postgres, delta, delta_batch)')


def _function(target: str, field: str, scenario_dir: Path) -> None:
    """The job's function, checked as plugins.function checks it; a module that imports only
    with a Spark session (a module-level `NOISE = F.rand()`) is checked before start instead,
    in the job's own Spark process (harness/run/job_check.py): the harness runs no Spark."""
    try:
        plugins.function(target, field, ("df",), scenario_dir)
    except SpecError as exc:
        if not _needs_spark(exc.__context__):
            raise


def _needs_spark(exc: BaseException | None) -> bool:
    """Whether `exc` is pyspark's refusal to build a Column with no active Spark context."""
    if exc is None:
        return False
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and "pyspark" in Path(tb.tb_frame.f_code.co_filename).parts
