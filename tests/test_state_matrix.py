"""[matrix]'s state and checkpoint axes (harness/scenario/state_matrix.py): the expansion and its
names, the values and combinations Spark refuses (each with Spark's reason, before anything
starts), the settings reaching the driver, and the state column of the table, report and compare."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.errors import ScenarioError
from harness.results.model import CaseResult, RunResult, Verdict
from harness.scenario import load
from harness.scenario.model import CHECKPOINT_FORMAT_KEY, Case, SparkSettings
from tests.helpers import REPO

pytestmark = pytest.mark.unit

HEAD = """
name = "t"

[workload]
duration = "1s"

[workload.rate]
eps = 10
"""
SESSIONS = '[pipeline]\nkind = "session_count"\ngap = "2s"\nwatermark = "1s"\n'
PASSTHROUGH = '[pipeline]\nkind = "passthrough"\n'
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"


def _load(tmp_path: Path, pipeline: str, matrix: str):
    path = tmp_path / "scenario.toml"
    path.write_text(HEAD + pipeline + "\n[matrix]\n" + matrix)
    return load(path)


def _refused(tmp_path: Path, pipeline: str, matrix: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        _load(tmp_path, pipeline, matrix)
    return info.value


class TestExpansion:
    def test_store_changelog_and_format_give_each_combination_spark_takes(self, tmp_path):
        """hdfs x rocksdb x changelog x format: five cases (HDFS takes neither a changelog nor
        format 2), each named by its settings and carrying them."""
        s = _load(tmp_path, SESSIONS, 'guarantee = ["exactly-once"]\nstate_store = ["hdfs", "rocksdb"]\n'
                  "changelog = [false, true]\ncheckpoint_format = [1, 2]\n")
        got = {c.name: c.pipeline.spark.state_settings() for c in s.cases}
        assert list(got) == ["exactly-once-postgres-hdfs", "exactly-once-postgres-rocksdb",
                             "exactly-once-postgres-rocksdb-ckpt2", "exactly-once-postgres-rocksdb-changelog",
                             "exactly-once-postgres-rocksdb-changelog-ckpt2"]
        assert got["exactly-once-postgres-rocksdb-changelog-ckpt2"] == {
            "state_store": "rocksdb", "changelog": True, "checkpoint_format": 2, "async_progress": False}
        assert got["exactly-once-postgres-hdfs"] == {
            "state_store": "hdfs", "changelog": False, "checkpoint_format": 1, "async_progress": False}

    def test_each_guarantee_is_crossed_with_each_setting(self, tmp_path):
        """The state axes multiply the guarantees, as the sink axis does."""
        s = _load(tmp_path, SESSIONS, 'guarantee = ["at-least-once", "exactly-once"]\nstate_store = ["hdfs", '
                  '"rocksdb"]\n')
        assert [c.name for c in s.cases] == ["at-least-once-postgres-hdfs", "at-least-once-postgres-rocksdb",
                                             "exactly-once-postgres-hdfs", "exactly-once-postgres-rocksdb"]

    def test_without_state_keys_the_matrix_is_what_it_was(self, tmp_path):
        """No state axis: the same names, no pipeline of the case's own, and the default settings
        describe themselves as before (a scenario's fingerprint stays the same)."""
        s = _load(tmp_path, SESSIONS, 'guarantee = ["at-least-once", "exactly-once"]\n')
        assert [(c.name, c.pipeline) for c in s.cases] == [("at-least-once-postgres", None),
                                                          ("exactly-once-postgres", None)]
        described = set(SparkSettings().describe())
        assert described == {"state_store", "shuffle_partitions", "conf", "source_options",
                             "max_offsets_per_trigger", "fail_on_data_loss"}

    def test_a_changelog_axis_alone_takes_the_pipeline_s_rocksdb(self, tmp_path):
        """changelog without state_store: the pipeline's own RocksDB store, with and without; the
        name gains -changelog only where it is on."""
        s = _load(tmp_path, SESSIONS + 'state_store = "rocksdb"\n', 'guarantee = ["exactly-once"]\n'
                  "changelog = [false, true]\n")
        assert [c.name for c in s.cases] == ["exactly-once-postgres", "exactly-once-postgres-changelog"]
        assert [c.pipeline.spark.state_store for c in s.cases] == ["rocksdb", "rocksdb-changelog"]

    def test_async_progress_runs_a_stateless_query_into_kafka(self, tmp_path):
        """The one place Spark takes async progress tracking here: no state, Spark's Kafka sink, a
        processing-time trigger; the combinations with the postgres sink are left out."""
        s = _load(tmp_path, PASSTHROUGH, 'guarantee = ["at-least-once"]\nsink = ["postgres", "kafka"]\n'
                  "async_progress = [false, true]\n")
        assert [c.name for c in s.cases] == ["at-least-once-postgres", "at-least-once-kafka",
                                             "at-least-once-kafka-async"]
        assert s.cases[-1].pipeline.spark.writer_options() == {"asyncProgressTrackingEnabled": "true"}
        assert s.cases[0].pipeline.spark.writer_options() == {}


class TestUnknownValues:
    @pytest.mark.parametrize("matrix, field, fix", [
        ('state_store = ["memory"]', "matrix.state_store[0]", "'hdfs' or 'rocksdb'"),
        ('state_store = ["rocksdb-changelog"]', "matrix.state_store[0]", "changelog = [true]"),
        ("checkpoint_format = [3]", "matrix.checkpoint_format[0]", "checkpoint_format = [1, 2]"),
        ('changelog = ["yes"]', "matrix.changelog[0]", "changelog = [false, true]"),
        ("async_progress = []", "matrix.async_progress", "async_progress = [false, true]"),
        ('state_store = ["hdfs", "hdfs"]', "matrix.state_store", "each value once"),
    ])
    def test_a_bad_value_is_refused_with_its_field_and_fix(self, tmp_path, matrix, field, fix):
        err = _refused(tmp_path, SESSIONS, matrix + "\n")
        assert field in err.problem and fix in err.fix, (err.problem, err.fix)


class TestRefusedCombinations:
    def test_hdfs_with_a_changelog(self, tmp_path):
        """Changelog checkpointing is RocksDB's: on HDFS the case would run without one."""
        err = _refused(tmp_path, SESSIONS, 'state_store = ["hdfs"]\nchangelog = [true]\n')
        assert "no case of the matrix can take it" in err.problem and "RocksDB" in err.problem, err.problem
        assert '"rocksdb"' in err.fix

    def test_hdfs_with_checkpoint_format_2(self, tmp_path):
        """Spark's own sentence: the HDFS-backed store has no checkpoint ids."""
        err = _refused(tmp_path, SESSIONS, 'state_store = ["hdfs"]\ncheckpoint_format = [2]\n')
        assert "does not support checkpointFormatVersion > 1" in err.problem, err.problem

    def test_async_progress_with_state(self, tmp_path):
        """A stateful query under async progress tracking: refused before start, not failed at its
        first batch."""
        err = _refused(tmp_path, SESSIONS, 'guarantee = ["at-least-once"]\nsink = ["kafka"]\n'
                       "async_progress = [true]\n")
        assert "Stateful streaming queries does not support async progress tracking" in err.problem
        assert "session_count keeps state" in err.problem and "stateless" in err.fix

    def test_async_progress_into_a_foreach_batch_sink(self, tmp_path):
        err = _refused(tmp_path, PASSTHROUGH, 'guarantee = ["exactly-once"]\nasync_progress = [true]\n')
        assert "does not support async progress tracking" in err.problem and "postgres" in err.problem
        assert 'sink = "kafka"' in err.fix

    @pytest.mark.parametrize("trigger, said", [
        ('trigger = "available-now"', "cannot be used with AvailableNow trigger"),
        ('trigger = "real-time"', "not supported in real-time mode"),
    ])
    def test_async_progress_with_another_trigger(self, tmp_path, trigger, said):
        matrix = 'guarantee = ["at-least-once"]\nsink = ["kafka"]\nasync_progress = [true]\n'
        err = _refused(tmp_path, PASSTHROUGH + trigger + "\n", matrix)
        assert said in err.problem, err.problem

    def test_transform_with_state_on_hdfs(self, tmp_path):
        """failed_logins runs on RocksDB only."""
        err = _refused(tmp_path, '[pipeline]\nkind = "failed_logins"\nwithin = "10s"\nwatermark = "1s"\n',
                       'state_store = ["hdfs"]\n')
        assert "runs only on rocksdb" in err.problem, err.problem

    def test_a_state_axis_over_a_stateless_pipeline(self, tmp_path):
        """passthrough keeps no state: two stores would run the same query twice."""
        err = _refused(tmp_path, PASSTHROUGH, 'state_store = ["hdfs", "rocksdb"]\n')
        assert "matrix.state_store" in err.problem and "keeps no state" in err.problem

    def test_a_combination_is_left_out_when_another_takes_its_value(self, tmp_path):
        """hdfs x changelog: the combination is left out, the values stay (rocksdb takes them)."""
        s = _load(tmp_path, SESSIONS, 'guarantee = ["exactly-once"]\nstate_store = ["hdfs", "rocksdb"]\n'
                  "changelog = [false, true]\n")
        assert [c.name for c in s.cases] == ["exactly-once-postgres-hdfs", "exactly-once-postgres-rocksdb",
                                             "exactly-once-postgres-rocksdb-changelog"]

    def test_a_stateful_job_under_async_progress_is_refused_by_its_plan(self):
        """A job's state is known from its plan (the check before start): a stateful operator
        there, with async_progress, is refused with Spark's sentence."""
        from harness.run.job_check import _refuse_async_state
        from harness.scenario.job import JobSpec

        job = JobSpec(kind="job", build="my_job:transform", spark=SparkSettings(async_progress=True))
        case = Case(name="alo-kafka-async", guarantee="at-least-once", sink="kafka")
        scenario = SimpleNamespace(pipeline=job, cases=(case,))
        with pytest.raises(ScenarioError) as info:
            _refuse_async_state(scenario, [(job, "pipeline.build", {"facts": {"operators": ["aggregate"]}})])
        assert "alo-kafka-async" in info.value.problem and "aggregate" in info.value.problem
        assert "Stateful streaming queries does not support" in info.value.problem
        # a stateless plan runs
        _refuse_async_state(scenario, [(job, "pipeline.build", {"facts": {"operators": []}})])


class TestTheDriverGetsThem:
    def test_a_case_s_spark_conf_holds_its_settings(self, tmp_path):
        """The SparkConf a case's driver starts with: the provider, the changelog and the format."""
        from harness.run.case import Case as RunCase

        s = _load(tmp_path, SESSIONS, 'guarantee = ["exactly-once"]\nstate_store = ["rocksdb"]\n'
                  "changelog = [true]\ncheckpoint_format = [2]\n")
        (spec,) = s.cases
        conf = RunCase(s, spec, None, "r1", tmp_path, None, None).spark_conf()   # type: ignore[arg-type]
        assert conf[PROVIDER].endswith("RocksDBStateStoreProvider")
        assert conf[CHANGELOG] == "true" and conf[CHECKPOINT_FORMAT_KEY] == "2"

    def test_the_default_settings_add_nothing_to_the_conf(self):
        assert CHECKPOINT_FORMAT_KEY not in SparkSettings(state_store="rocksdb").conf()
        assert SparkSettings().writer_options() == {}

    def test_the_bench_scenario_loads_with_its_five_cases(self, monkeypatch):
        """(FUSE counts as installed: the unit lane runs where fusermount3 is not, and a fresh
        clone's CI run failed here with "kill-executor needs fuse"; tests/test_scenario.py pins
        that refusal.)"""
        from harness.services import fuse_mount

        monkeypatch.setattr(fuse_mount, "fuse_problem", lambda: None)
        s = load(REPO / "benchmarks" / "scenarios" / "state_matrix.toml", quick=True)
        assert len(s.cases) == 5
        assert {f.kind for f in s.faults} == {"fail-task", "kill-driver", "kill-executor"}


def _result(*settings: dict) -> RunResult:
    cases = [CaseResult(name=f"c{i}", guarantee="exactly-once", pipeline="session_count", sink="postgres",
                        events={}, verdict=Verdict("exactly-once", "exactly-once", True, "", "PASS"),
                        throughput_eps={"processed": 100.0, "measured": {"processed": 100.0}}, latency_ms={},
                        backpressure={}, sections={"state_settings": s})
             for i, s in enumerate(settings)]
    return RunResult(run_id="r1", status="completed", scenario={}, environment={}, started_at="", cases=cases)


HDFS = {"state_store": "hdfs", "changelog": False, "checkpoint_format": 1, "async_progress": False}
ROCKS = {"state_store": "rocksdb", "changelog": True, "checkpoint_format": 2, "async_progress": False}


class TestTheStateColumn:
    def test_the_table_shows_it_beside_the_guarantee_when_swept(self):
        from harness.report.table import render

        head = render(_result(HDFS, ROCKS)).splitlines()[0].split()
        assert head[:3] == ["case", "guarantee", "state"]
        assert "rocksdb+changelog ckpt2" in render(_result(HDFS, ROCKS))

    def test_a_run_that_swept_nothing_has_no_state_column(self):
        from harness.report.table import render

        assert "state" not in render(_result(HDFS, HDFS)).splitlines()[0].split()

    def test_report_html_shows_it_beside_the_guarantee(self):
        from harness.report.html import _comparison

        html = _comparison(_result(HDFS, ROCKS).cases)
        assert "<th>state</th>" in html.replace(' class="text"', "") or ">state<" in html
        assert "rocksdb+changelog ckpt2" in html

    def test_compare_shows_it_beside_each_case(self):
        """compare's table: each case's settings beside its name when the new run swept them."""
        from harness.report import compare

        base, new = _result(HDFS, ROCKS), _result(HDFS, ROCKS)
        lines = compare.render(base, new, compare.compare(base, new, [])).splitlines()
        head = next(line for line in lines if line.startswith("case"))
        assert head.split()[:3] == ["case", "state", "figure"]
        assert any(line.startswith("c1") and "rocksdb+changelog ckpt2" in line for line in lines)


class TestTheHuntsMinimalFile:
    def test_a_matrix_case_is_written_with_its_state_settings(self, tmp_path):
        """A hunt's minimal.toml reruns the case it hunted: a [matrix] case over state settings
        is written as that one combination, so the rerun has the same store, changelog and format."""
        from harness.hunt.search import minimal_toml

        s = _load(tmp_path, SESSIONS, 'guarantee = ["exactly-once"]\nstate_store = ["hdfs", "rocksdb"]\n'
                  "changelog = [false, true]\ncheckpoint_format = [1, 2]\n")
        case = next(c for c in s.cases if c.name == "exactly-once-postgres-rocksdb-changelog-ckpt2")
        path = tmp_path / "minimal.toml"
        path.write_text(minimal_toml(s, case, [{"kind": "kill-driver", "at": "5s"}], 40.0))
        (again,) = load(path).cases
        assert again.name == case.name
        assert again.pipeline.spark.state_settings() == case.pipeline.spark.state_settings()
