"""`[pipeline] kind = "job"` in a scenario: what the loader accepts, binds and refuses before
anything starts (real-time mode, a schema that does not read the records, an update-mode job
without an upsert sink), and what the check of the job's plan before any service starts
refuses (non-determinism, processing-time timers: harness/run/job_check.py; more cases in
tests/test_job_refusals.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import ScenarioError
from harness.run import job_check
from harness.scenario import load
from harness.scenario.job import JobSpec
from workloads.errors import SpecError

JOB = '''
from pyspark.sql import functions as F

SCHEMA = "user STRING, ts BIGINT"


def transform(df):
    return counted(df)


def counted(df):
    return df.groupBy("user").count()


def from_kafka(df):
    return transform(df.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("c")).select("c.*"))


def noisy(df):
    return helper(df)


def helper(df):
    return df.withColumn("r", F.rand())


def stamped(df):
    return df.selectExpr("*", "current_timestamp() AS seen")


def timed_out(df):
    from pyspark.sql.streaming.state import GroupStateTimeout
    return df.groupBy("user").applyInPandasWithState(keep, "user STRING", "n LONG", "append",
                                                     GroupStateTimeout.ProcessingTimeTimeout)


def keep(key, rows, state):
    yield from rows


def main():
    import random
    print(random.random())
'''

SCENARIO = '''
name = "job"
[workload]
kind = "replay"
file = "clicks.jsonl"
event_time = "ts"
speed = 10.0
[pipeline]
kind = "job"
{pipeline}
columns = {{ user = "STRING", count = "LONG" }}
[[cases]]
name = "eo"
guarantee = "exactly-once"
sink = "{sink}"
'''


def _scenario(tmp_path: Path, pipeline: str = 'build = "my_job:transform"', sink: str = "postgres") -> Path:
    (tmp_path / "my_job.py").write_text(JOB)
    rows = [{"user": f"u{i % 3}", "ts": 1_714_564_800_000 + i * 100, "page": "/"} for i in range(50)]
    (tmp_path / "clicks.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    path = tmp_path / "scenario.toml"
    path.write_text(SCENARIO.format(pipeline=pipeline, sink=sink))
    return path


def _refused(path: Path) -> str:
    with pytest.raises((ScenarioError, SpecError)) as info:
        load(path)
    return str(info.value)


@pytest.mark.unit
class TestLoad:
    def test_a_job_binds_its_schema_from_the_records(self, tmp_path):
        """Without `schema` the job's schema is the replayed file's, and the event time its column."""
        pl = load(_scenario(tmp_path)).pipeline
        assert isinstance(pl, JobSpec) and pl.reads == "parsed" and pl.event_time == "ts"
        assert pl.schema == "`user` STRING, `ts` BIGINT, `page` STRING"
        assert pl.params()["job"] == "my_job:transform" and pl.build_target == "workloads.pipelines.job:build"

    def test_from_kafka_reads_the_raw_columns_with_headers(self, tmp_path):
        """from_kafka hands the job Kafka's columns, the headers included."""
        pl = load(_scenario(tmp_path, 'from_kafka = "my_job:from_kafka"')).pipeline
        assert pl.reads == "kafka" and pl.spark.source_options()["includeHeaders"] == "true"

    def test_build_and_from_kafka_together_are_refused(self, tmp_path):
        """A job names one function: build or from_kafka."""
        text = _refused(_scenario(tmp_path, 'build = "my_job:transform"\nfrom_kafka = "my_job:from_kafka"'))
        assert "not both" in text


def _cases(tmp_path: Path, jobs: list[tuple[str, str]]) -> Path:
    """The scenario with one case per (function of my_job, oracle), each its own pipeline."""
    path = _scenario(tmp_path)
    cases = "".join(f'''
[[cases]]
name = "{name}-{oracle}"
guarantee = "exactly-once"
sink = "postgres"
[cases.pipeline]
kind = "job"
build = "my_job:{name}"
columns = {{ user = "STRING", count = "LONG" }}
oracle = "{oracle}"
''' for name, oracle in jobs)
    path.write_text(path.read_text() + cases)
    return path


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> dict[str, tuple]:
    """The jobs of JOB checked before start as a run checks them: one Spark process for all."""
    jobs = [("noisy", "batch"), ("stamped", "batch"), ("timed_out", "batch"), ("transform", "batch"),
            ("noisy", "reference")]
    scenario = load(_cases(tmp_path_factory.mktemp("job"), jobs))
    return {f"{spec.build.partition(':')[2]}-{spec.oracle}": (spec, field, found)
            for spec, field, found in job_check.findings(scenario)}


def _refusal(checked: dict, name: str) -> str:
    with pytest.raises(ScenarioError) as info:
        job_check._refuse(*checked[name])
    return str(info.value)


@pytest.mark.integration
class TestRefusals:
    """Refused before any service starts, by the job's analysed plan on an empty stream."""

    def test_a_nondeterministic_function_is_refused_with_the_fix(self, checked):
        """rand() in a function the job calls refuses oracle = "batch", naming the call, its
        column and the fix."""
        text = _refusal(checked, "noisy-batch")
        assert "rand() in column `r`" in text and 'oracle = "reference"' in text, text

    def test_current_timestamp_in_sql_text_is_refused(self, checked):
        """current_timestamp() inside a SQL expression is in the plan, and seen there."""
        assert "current_timestamp() in column `seen`" in _refusal(checked, "stamped-batch")

    def test_a_processing_time_timeout_is_refused(self, checked):
        """GroupStateTimeout.ProcessingTimeTimeout fires by the clock: refused for the batch oracle."""
        assert "ProcessingTimeTimeout" in _refusal(checked, "timed_out-batch")

    def test_the_reference_oracle_takes_what_the_batch_one_refuses(self, checked):
        """oracle = "reference" accepts a non-deterministic job."""
        job_check._refuse(*checked["noisy-reference"])
        assert checked["noisy-reference"][2]["refusals"] == []

    def test_code_the_job_never_calls_is_not_read(self, checked):
        """random() in main(), which transform never calls, is no reason to refuse: only what
        runs (the plan) is read."""
        job_check._refuse(*checked["transform-batch"])
        assert checked["transform-batch"][2]["refusals"] == []


@pytest.mark.unit
class TestLoaderRefusals:
    def test_the_loader_reads_no_source_text(self, tmp_path):
        """The loader no longer refuses from the job's source (the plan check before start does):
        a job calling rand() loads."""
        assert load(_scenario(tmp_path, 'build = "my_job:noisy"')).pipeline.build == "my_job:noisy"

    def test_a_module_that_imports_only_with_a_spark_session_loads(self, tmp_path):
        """A module-level `NOISE = F.rand()` needs a Spark session to import: the harness has none,
        so its function is checked before start in the job's own Spark process, not refused here;
        a module that fails to import for its own reason still is."""
        path = _scenario(tmp_path, 'build = "noise_job:noisy"')
        (tmp_path / "noise_job.py").write_text("from pyspark.sql import functions as F\nNOISE = F.rand()\n"
                                               "def noisy(df):\n    return df.withColumn('r', NOISE)\n")
        assert load(path).pipeline.build == "noise_job:noisy"
        (tmp_path / "broken_job.py").write_text("import no_such_module_here\n")
        path.write_text(path.read_text().replace("noise_job:noisy", "broken_job:noisy"))
        assert "importing the module failed" in _refused(path)

    def test_real_time_mode_is_refused(self, tmp_path):
        """Spark's real-time mode has no batches for the oracle to read: refused with the fix."""
        text = _refused(_scenario(tmp_path, 'build = "my_job:transform"\ntrigger = "real-time"'))
        assert "real-time" in text and 'oracle = "reference"' in text

    def test_a_schema_that_does_not_parse_the_file_is_refused(self, tmp_path):
        """A declared field the records lack is named, with the file and the fix."""
        text = _refused(_scenario(tmp_path, 'build = "my_job:transform"\nschema = "usr STRING, ts BIGINT"'))
        assert "does not parse" in text and "'usr'" in text and "replay-preview" in text

    def test_a_schema_of_the_wrong_type_is_refused(self, tmp_path):
        """A field whose values the declared type reads as null is named."""
        text = _refused(_scenario(tmp_path, 'build = "my_job:transform"\nschema = "user BIGINT, ts BIGINT"'))
        assert "which BIGINT reads as null" in text


@pytest.mark.unit
class TestOutputMode:
    def test_update_mode_needs_a_key(self, tmp_path):
        """An update-mode job is compared per key: without `key` it is refused."""
        assert "key" in _refused(_scenario(tmp_path, 'build = "my_job:transform"\noutput_mode = "update"',
                                           sink="postgres_upsert"))

    def test_update_mode_needs_an_upsert_sink(self, tmp_path):
        """An update-mode job into an appending sink is refused, naming the upsert sinks."""
        text = _refused(_scenario(tmp_path, 'build = "my_job:transform"\noutput_mode = "update"\n'
                                            'key = ["user"]'))
        assert "postgres_upsert" in text

    def test_a_job_needs_a_replay(self, tmp_path):
        """A job over generated events is refused: it runs on the user's records."""
        path = _scenario(tmp_path)
        path.write_text(path.read_text().replace('kind = "replay"\nfile = "clicks.jsonl"\nevent_time = "ts"\n'
                                                 'speed = 10.0', 'duration = "5s"\nrate = { eps = 10 }'))
        assert "must be a replay" in _refused(path)
