"""Refusals decided by what runs, before anything starts (issue 47): a job is built on an empty
stream in a local Spark process of its own (harness/run/job_check.py) and refused by its
analysed plan (workloads/pipelines/determinism.py, the driver's own check) and by where its
watermark is (workloads/pipelines/event_time.py); Python UDF bodies are read by what their
names resolve to (workloads/pipelines/python_reads.py), never as text.

Each false refusal the source scan made must pass; each miss must be refused, naming the
function as the user calls it and where it is. One Spark process checks every job of the
module (`checked`), as a run checks every job of its scenario at once."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.errors import ScenarioError
from harness.run import job_check
from harness.scenario import load
from harness.scenario.job import JobSpec
from tests.helpers import REPO
from workloads.pipelines import job, python_reads

JOBS = '''
"""Jobs as teams write them. This one no longer calls rand() or current_timestamp()."""
import logging
import random as rnd
import time
import uuid
from datetime import datetime

from pyspark.sql import functions as F
from pyspark.sql.functions import rand as jitter

log = logging.getLogger(__name__)
NOISE = F.rand()
SCHEMA = "user STRING, ts BIGINT, sent BIGINT"


def docstring(df):
    """Counts per user; this one no longer calls rand() or current_timestamp()."""
    return df.groupBy("user").count()


def label(df):
    return df.select("user", F.lit("as of now (UTC)").alias("note"))


def random(df):   # the user's own function, named random
    return df.select("user", (F.col("ts") % 7).alias("bucket"))


def own_random(df):
    return random(df)


def log_line(df):
    log.info("built; datetime.now() is not called here")
    return df.select("user", "ts")


def alias(df):
    return df.withColumn("r", jitter())


def module_value(df):
    return df.withColumn("r", NOISE)


def lam(df):
    add = lambda d: d.withColumn("r", F.randn())   # noqa: E731
    return add(df)


class Steps:
    def rand(self, df):   # a method whose name shadows the function
        return df.withColumn("r", F.uuid())


def method(df):
    return Steps().rand(df)


@F.udf("double")
def lag(ts):
    return time.time() - ts / 1000


def udf_clock(df):
    return df.withColumn("lag", lag("ts"))


def udf_uuid(df):
    tag = F.udf(lambda u: f"{u}-{uuid.uuid4()}", "string")
    return df.withColumn("t", tag("user"))


def udf_random(df):
    pick = F.udf(lambda u: rnd.choice(["a", "b"]), "string")
    return df.withColumn("p", pick("user"))


def udf_pure(df):
    """A UDF whose docstring says time.time(): it reads no clock."""
    shout = F.udf(lambda u: u.upper(), "string")
    return df.withColumn("u", shout("user"))


def randstr(df):
    return df.withColumn("s", F.randstr(F.lit(8)))


def uniform(df):
    return df.withColumn("s", F.uniform(F.lit(0), F.lit(10)))


def sql_text(df):
    return df.selectExpr("user", "current_timestamp() AS seen")


def where_text(df):
    return df.where("rand() < 0.5")


def state_clock(df):
    import pandas as pd

    def count(key, rows, state):
        total = sum(len(r) for r in rows)
        yield pd.DataFrame({"user": [key[0]], "n": [total], "at": [datetime.now().timestamp()]})

    return df.groupBy("user").applyInPandasWithState(count, "user STRING, n LONG, at DOUBLE", "n LONG",
                                                     "append", "NoTimeout")


def processing_timeout(df):
    def keep(key, rows, state):
        yield from rows

    return df.groupBy("user").applyInPandasWithState(keep, "user STRING, ts LONG, sent LONG", "n LONG",
                                                     "append", "ProcessingTimeTimeout")


def derived_watermark(df):
    return (df.withColumn("at", F.timestamp_millis("ts")).withWatermark("at", "10 seconds")
            .groupBy(F.window("at", "10 seconds"), "user").count())


def other_field(df):
    return (df.withColumn("at", F.timestamp_millis("sent")).withWatermark("at", "10 seconds")
            .dropDuplicatesWithinWatermark(["user"]))


def kafka_timestamp(kafka):
    clicks = kafka.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("c"), "timestamp")
    return (clicks.select("c.*", "timestamp").withWatermark("timestamp", "10 seconds")
            .dropDuplicatesWithinWatermark(["user", "ts"]))


def kafka_derived(kafka):
    clicks = kafka.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("c")).select("c.*")
    return derived_watermark(clicks)
'''

SCENARIO = '''
name = "refusals"
[workload]
kind = "replay"
file = "clicks.jsonl"
event_time = "ts"
speed = 10.0
[pipeline]
kind = "job"
build = "refusal_jobs:docstring"
columns = {{ user = "STRING" }}
{cases}
'''
CASE = '''
[[cases]]
name = "{name}"
guarantee = "exactly-once"
sink = "postgres"
[cases.pipeline]
kind = "job"
{read} = "refusal_jobs:{name}"
columns = {{ user = "STRING" }}
oracle = "{oracle}"
'''
FROM_KAFKA = ("kafka_timestamp", "kafka_derived")
RUNS = ("docstring", "label", "own_random", "log_line", "udf_pure", "derived_watermark", "kafka_derived")
REFUSED = {   # job -> what the refusal must say: the function as the user calls it, and where
    "alias": "rand() in column `r`",
    "module_value": "rand() in column `r`",
    "lam": "randn() in column `r`",
    "method": "uuid() in column `r`",
    "udf_clock": "the Python function lag() in column `lag`: lag() calls time.time()",
    "udf_uuid": "calls uuid.uuid4()",
    "udf_random": "calls rnd.choice() (that is random.choice)",
    "randstr": "randstr() in column `s`",
    "uniform": "uniform() in column `s`",
    "sql_text": "current_timestamp() in column `seen`",
    "where_text": "rand() in a filter",
    "state_clock": "in applyInPandasWithState: state_clock.<locals>.count() calls datetime.now() "
                   "(that is datetime.datetime.now)",
    "processing_timeout": "ProcessingTimeTimeout",
}
OFF_THE_EVENT_TIME = {"other_field": "the records' field `sent`",
                      "kafka_timestamp": "Kafka's `timestamp` column"}


def _write(where: Path, cases: list[tuple[str, str]]) -> Path:
    """A scenario beside refusal_jobs.py, one case per (job, oracle)."""
    (where / "refusal_jobs.py").write_text(JOBS)
    rows = [{"user": f"u{i % 3}", "ts": 1_714_564_800_000 + i * 100, "sent": 1_714_564_800_000 + i * 90}
            for i in range(50)]
    (where / "clicks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = where / "scenario.toml"
    path.write_text(SCENARIO.format(cases="".join(
        CASE.format(name=name, oracle=oracle, read="from_kafka" if name in FROM_KAFKA else "build")
        for name, oracle in cases)))
    return path


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> dict[str, dict]:
    """Every job of the module checked as a run checks its scenario's: one Spark process."""
    names = [*RUNS, *REFUSED, *OFF_THE_EVENT_TIME]
    scenario = load(_write(tmp_path_factory.mktemp("jobs"), [(n, "batch") for n in names]))
    return {spec.build.partition(":")[2]: found for spec, _, found in job_check.findings(scenario)}


@pytest.mark.integration
class TestWhatRuns:
    @pytest.mark.parametrize("name", RUNS)
    def test_a_correct_job_is_not_refused(self, checked, name):
        """A docstring or label that mentions rand() or "now", a function of the user's own
        named random, datetime.now() in a log line, a UDF whose docstring says time.time(), a
        watermark on a column derived from the event time: none is refused."""
        found = checked[name]
        assert "error" not in found and found["refusals"] == [] and found["watermark"] == [], found

    @pytest.mark.parametrize("name", sorted(REFUSED))
    def test_what_a_batch_run_cannot_mirror_is_refused_by_its_plan(self, checked, name):
        """An alias, a module-level value, a lambda, a method named like the function, a UDF
        that reads the clock, uuids or random, randstr, uniform, SQL text, applyInPandasWithState
        reading the clock, a processing-time timeout: refused, naming what and where."""
        found = checked[name]
        assert any(REFUSED[name] in r for r in found["refusals"]), found

    @pytest.mark.parametrize("name", sorted(OFF_THE_EVENT_TIME))
    def test_a_watermark_off_the_event_time_column_is_refused_naming_both(self, checked, name):
        """The harness decides lateness from the replay's event time: a watermark on another
        field, or on Kafka's timestamp, is refused naming what it is computed from."""
        text = " ".join(checked[name]["watermark"])
        assert OFF_THE_EVENT_TIME[name] in text and "event-time column `ts`" in text, checked[name]

    def test_the_driver_refuses_by_the_same_check(self, checked):
        """The driver's refusal (job.refuse over the plan's facts) gives the same reasons the
        check before start gave: one implementation."""
        facts = checked["alias"]["facts"]
        with pytest.raises(job.Refused, match=r"rand\(\) in column `r`"):
            job.refuse(facts)
        assert job.reasons(facts) == checked["alias"]["refusals"]


@pytest.mark.integration
class TestBeforeAnyServiceStarts:
    def test_a_refused_job_exits_2_before_the_run_directory_exists(self, tmp_path):
        """`python -m harness run` on an aliased rand(): exit 2 with the reason and the fix,
        and no run directory (so no service, no pid file): the check ran before anything."""
        path = _write(tmp_path, [("alias", "batch")])
        out = tmp_path / "run"
        proc = subprocess.run([sys.executable, "-m", "harness", "run", str(path), "--out", str(out)],
                              capture_output=True, text=True, cwd=REPO, timeout=600, check=False)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "cases[0].pipeline.build = 'refusal_jobs:alias'" in proc.stderr, proc.stderr
        assert "rand() in column `r`" in proc.stderr and 'oracle = "reference"' in proc.stderr, proc.stderr
        assert not out.exists(), sorted(p.name for p in out.iterdir())

    def test_the_reference_oracle_runs_what_the_batch_one_refuses_and_a_job_is_checked_once(self, tmp_path):
        """oracle = "reference" takes a job with rand(); the check of a scenario already checked
        in this process is not run again."""
        scenario = load(_write(tmp_path, [("alias", "reference")]))
        first = job_check.check(scenario)
        assert first[0][2]["refusals"] == [] and first[0][2]["watermark"] == [], first
        assert job_check.check(scenario)[0][2] is first[0][2]


class TestPythonBodies:
    """python_reads: names resolved as Python resolves them (no Spark)."""

    def test_each_alias_of_a_clock_or_generator_is_resolved(self, tmp_path, monkeypatch):
        """`from time import time as now`, an import inside the function, a module-level
        generator, numpy.random, a helper the function calls: each named with what it is."""
        module = _module(tmp_path, monkeypatch, """
            import random as rnd
            import numpy as np
            from time import time as now
            from datetime import datetime as dt
            RNG = rnd.Random(3)
            def a(x): return now()
            def b(x):
                import uuid as u
                return u.uuid4().hex
            def c(x): return RNG.random()
            def d(x): return np.random.rand()
            def e(x): return helper(x)
            def helper(x): return dt.utcnow()
            def f(x): return rnd.Random().random()
            """)
        assert python_reads.reads(module.a) == ["a() calls now() (that is time.time)"]
        assert python_reads.reads(module.b) == ["b() calls u.uuid4() (that is uuid.uuid4)"]
        assert python_reads.reads(module.c) == ["c() calls RNG.random() (that is random.random)"]
        assert python_reads.reads(module.d) == ["d() calls np.random.rand() (that is numpy.random.rand)"]
        assert python_reads.reads(module.e) == [
            "e -> helper() calls dt.utcnow() (that is datetime.datetime.utcnow)"]
        assert python_reads.reads(module.f) == ["f() calls rnd.Random() (that is random.Random)"]

    def test_what_only_looks_like_a_clock_is_not_read(self, tmp_path, monkeypatch):
        """Text, the user's own `random`, a seeded generator per row, a timestamp converted
        (not read) and a name-based uuid are not the clock or the entropy."""
        module = _module(tmp_path, monkeypatch, """
            import logging, random as rnd, time, uuid, datetime
            log = logging.getLogger(__name__)
            def random(x): return x * 2
            def a(x):
                \"\"\"Not time.time(), not rand().\"\"\"
                log.info("datetime.now() is %s", x)
                return random(x)
            def b(x): return rnd.Random(x).random()
            def c(x): return datetime.datetime.fromtimestamp(x / 1000)
            def d(x): return uuid.uuid5(uuid.NAMESPACE_DNS, str(x))
            def e(x): return time.strftime("%Y", time.gmtime(x))
            """)
        assert [python_reads.reads(getattr(module, n)) for n in "abcde"] == [[]] * 5

    def test_a_processor_s_methods_are_read(self, tmp_path, monkeypatch):
        """A transformWithState processor (an object of the user's class) is read method by method."""
        module = _module(tmp_path, monkeypatch, """
            class Processor:
                def handleInputRows(self, key, rows):
                    from datetime import datetime
                    yield datetime.now()
            """)
        assert python_reads.reads(module.Processor()) == [
            "Processor.handleInputRows() calls datetime.now() (that is datetime.datetime.now)"]

    def test_the_harness_s_own_timer_log_is_not_the_job_s_clock(self, tmp_path, monkeypatch):
        """A processor that records its firings in the harness's timer log (TimerLog.fired reads
        the clock for its record, never for the output) is not refused; its own clock still is
        (the shapes' transformWithState job was refused by its driver before this)."""
        module = _module(tmp_path, monkeypatch, """
            import time
            from workloads.pipelines.timer_log import TimerLog
            class Processor:
                def __init__(self): self.log = TimerLog("/nowhere")
                def handleExpiredTimer(self, key, values, info):
                    self.log.fired(key, 0, values)
                    yield from ()
            class Clocked(Processor):
                def handleInputRows(self, key, rows, values):
                    yield time.time()
            """)
        assert python_reads.reads(module.Processor()) == []
        assert python_reads.reads(module.Clocked()) == [
            "Clocked.handleInputRows() calls time.time()"]


class TestRefusal:
    def test_a_job_that_does_not_build_on_an_empty_stream_is_left_to_the_driver(self):
        """A job that needs what the run starts (its error on an empty stream) is not refused
        before start: the driver meets it, or checks its plan, when it starts."""
        spec = JobSpec(kind="job", values={}, build="m:f", event_time="ts")
        job_check._refuse(spec, "pipeline.build", {"error": "ConnectionRefusedError: postgres"})
        with pytest.raises(ScenarioError, match="rand"):
            job_check._refuse(spec, "pipeline.build", {"refusals": ["the job uses rand() in column `r`"]})


def _module(where: Path, monkeypatch, source: str):
    """A module of the user's (outside the standard library and site-packages)."""
    import importlib

    name = f"user_code_{abs(hash(str(where))) % 10**8}"
    (where / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(where))
    return importlib.import_module(name)
