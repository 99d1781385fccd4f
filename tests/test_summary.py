"""summary.json: the schema, the verdict rules, the result model, and writing without
losing results."""

import json
from dataclasses import asdict

import pytest

from harness.results import summary
from harness.results.model import RunResult
from harness.results.verdict import guarantee_holds, observed_guarantee, verdict
from tests.helpers import REPO

V1_RUN = REPO / "tests" / "golden" / "report-run" / "summary.json"   # a real run, written as version 1


def sample_summary(**overrides):
    case = {
        "name": "c", "guarantee": "exactly-once", "pipeline": "windowed_count", "sink": "postgres",
        "faults": [{"kind": "kill_executor", "at_s": 5.0, "started_s": 5.1, "ended_s": None,
                    "target": "executor 1", "observed": True}],
        "events": {"produced": 10, "expected": 9, "delivered": 9, "lost": 0, "duplicated": 0,
                   "unexpected": 0, "dropped_late": 1},
        "verdict": asdict(verdict("exactly-once", 0, 0, 0, expected_count=9)),
        "throughput_eps": {"offered": 100.0, "processed": 99.5},
        "latency_ms": {"event_time": {"p50": 1.0, "p90": 2.0, "p99": 3.0, "p999": 4.0, "max": 5.0},
                       "processing_time": {"p50": None, "p90": None, "p99": None, "p999": None,
                                           "max": None}},
        "backpressure": {"max_lag_records": 3, "max_lag_s": 0.5, "recovery_s": None},
    }
    result = {
        "schema_version": 2, "run_id": "r1", "status": "completed",
        "scenario": {"name": "smoke", "path": "/x/smoke.toml"},
        "environment": {"harness": "0.1.0", "python": "3.11", "java": "17", "spark": "4.2.0",
                        "kafka": "4.3.1", "spark_master": "local-cluster[2,1,1024]", "cpus": 2,
                        "memory_bytes": 1, "git_sha": None},
        "cases": [case],
    }
    result.update(overrides)
    return result


class TestValidate:
    def test_a_complete_summary_validates(self):
        """The sample, with a null latency and a fault, follows the schema."""
        summary.validate(sample_summary())

    def test_a_missing_field_is_named_with_its_path(self):
        """Dropping events.lost fails, and the message says where."""
        broken = sample_summary()
        del broken["cases"][0]["events"]["lost"]
        with pytest.raises(ValueError, match="cases/0/events: 'lost' is a required property"):
            summary.validate(broken)

    def test_an_unknown_observed_guarantee_fails(self):
        """observed is one of four words."""
        broken = sample_summary()
        broken["cases"][0]["verdict"]["observed"] = "twice"
        with pytest.raises(ValueError, match="observed"):
            summary.validate(broken)

    def test_later_fields_may_be_added(self):
        """Additive evolution: an unknown extra field at the top or in a case is allowed."""
        extended = sample_summary(resources={"cpu": 1})
        extended["cases"][0]["batches"] = 7
        summary.validate(extended)


class TestVerdict:
    @pytest.mark.parametrize("lost, dup, observed", [(0, 0, "exactly-once"), (0, 2, "at-least-once"),
                                                     (2, 0, "at-most-once"), (1, 1, "none")])
    def test_observed_guarantee_from_counts(self, lost, dup, observed):
        """Only duplicates is at-least-once, only losses at-most-once, both none."""
        assert observed_guarantee(lost, dup) == observed

    @pytest.mark.parametrize("expected, observed, holds", [
        ("exactly-once", "at-least-once", False), ("at-least-once", "exactly-once", True),
        ("at-least-once", "at-most-once", False), ("at-most-once", "exactly-once", True),
        ("at-most-once", "at-least-once", False), ("exactly-once", "none", False)])
    def test_a_stronger_observation_satisfies_a_weaker_promise(self, expected, observed, holds):
        """exactly-once satisfies every guarantee; the others satisfy only themselves."""
        assert guarantee_holds(expected, observed) is holds

    def test_unexplained_output_never_holds(self):
        """Output that ground truth cannot explain fails even an at-least-once promise."""
        v = verdict("at-least-once", 0, 0, 3, expected_count=10)
        assert not v.holds and "3 unexpected" in v.detail

    def test_a_failed_verdict_says_what_failed_first(self):
        """Right counts but a wrong sum: the detail starts with FAILED and the reason, never
        with 'held'."""
        v = verdict("exactly-once", 0, 0, 0, expected_count=10,
                            problems=["16 windows have the right count but a wrong sum"])
        assert not v.holds
        assert v.detail.startswith("FAILED: 16 windows have the right count but a wrong sum")
        assert "held" not in v.detail

    def test_a_broken_guarantee_is_named_before_the_counts(self):
        """exactly-once with duplicates: the failure sentence comes first."""
        v = verdict("exactly-once", 0, 4, 0, expected_count=10)
        assert v.detail.startswith("FAILED: exactly-once did not hold (observed at-least-once)")

    def test_a_held_verdict_reads_as_held(self):
        v = verdict("at-least-once", 0, 4, 0, expected_count=10)
        assert v.holds and v.detail.startswith("at-least-once held (observed at-least-once)")


def _run(**overrides) -> RunResult:
    return RunResult.from_json(sample_summary(**overrides))


class TestWriteAndLoad:
    def test_write_then_load_round_trips(self, tmp_path):
        """What is written is what is read, field for field."""
        summary.write(tmp_path, _run())
        again = summary.load(tmp_path / "summary.json")
        assert again.to_json(2) == _run().to_json(2)

    def test_write_refuses_another_runs_summary(self, tmp_path):
        """Results are never overwritten by a different run."""
        summary.write(tmp_path, _run())
        with pytest.raises(FileExistsError):
            summary.write(tmp_path, _run(run_id="r2"))

    def test_write_refuses_an_invalid_summary_and_keeps_the_old_one(self, tmp_path):
        """Validation comes before the file is touched."""
        summary.write(tmp_path, _run())
        with pytest.raises(ValueError):
            summary.write(tmp_path, _run(status="finished"))
        assert json.loads((tmp_path / "summary.json").read_text())["status"] == "completed"

    def test_load_refuses_an_unknown_schema_version(self, tmp_path):
        """A summary from a newer harness is not misread."""
        newer = summary.SCHEMA_VERSION + 1
        (tmp_path / "summary.json").write_text(json.dumps(sample_summary(schema_version=newer)))
        with pytest.raises(ValueError, match=f"schema_version {newer}"):
            summary.load(tmp_path / "summary.json")

    def test_a_version_1_summary_is_read_and_follows_its_own_schema(self):
        """A real version-1 run (the report's golden run) validates against the version-1
        schema and reads into the model: cases, verdicts, faults."""
        raw = json.loads(V1_RUN.read_text())
        assert raw["schema_version"] == 1
        summary.validate(raw)
        result = summary.load(V1_RUN)
        assert [c.name for c in result.cases] == [c["name"] for c in raw["cases"]]
        assert all(c.verdict.holds for c in result.cases) and result.cases[0].faults


class TestHeadline:
    """One accessor per headline figure, read the same way from either version."""

    def test_p99_is_the_measured_one_when_the_run_has_it(self):
        s = sample_summary()
        s["cases"][0]["latency_measured_ms"] = {"event_time": {"p99": 7.0}, "processing_time": {}}
        assert RunResult.from_json(s).cases[0].p99_ms == 7.0
        assert _run().cases[0].p99_ms == 3.0   # without it: the whole run's

    def test_throughput_is_the_measured_processed_rate(self):
        s = sample_summary()
        s["cases"][0]["throughput_eps"]["measured"] = {"processed": 42.0}
        assert RunResult.from_json(s).cases[0].throughput == 42.0
        assert _run().cases[0].throughput == 99.5

    def test_recovery_is_the_longest_lag_recovery_of_the_faults(self):
        s = sample_summary()
        s["cases"][0]["faults"][0]["recovery"] = {"lag_recovered_s": 4.5, "first_batch_after_s": 20.0}
        s["cases"][0]["faults"].append({**s["cases"][0]["faults"][0], "recovery": {"lag_recovered_s": 2.0}})
        assert RunResult.from_json(s).cases[0].recovery_s == 4.5

    def test_the_v1_golden_run_reads_its_figures(self):
        """The same accessors on a version-1 file: the values its report showed."""
        case = summary.load(V1_RUN).cases[0]
        raw = json.loads(V1_RUN.read_text())["cases"][0]
        assert case.p99_ms == raw["latency_measured_ms"]["event_time"]["p99"]
        assert case.recovery_s == max(f["recovery"]["lag_recovered_s"] for f in raw["faults"]
                                      if f["recovery"]["lag_recovered_s"] is not None)

    def test_the_headline_is_written_beside_its_sources(self):
        case = _run().to_json(2)["cases"][0]
        assert case["headline"] == {"throughput_eps": 99.5, "p99_ms": 3.0, "recovery_s": None}


def test_a_version_3_summary_still_loads():
    """The committed baselines were written as version 3 (before UNKNOWN, the workload that
    waits for its faults and the sustain bracket changed meanings): version 4 reads them."""
    for name in ("bench-quick.summary.json", "bench.summary.json"):
        path = REPO / "results" / "baseline" / name
        assert json.loads(path.read_text())["schema_version"] == 3
        summary.validate(json.loads(path.read_text()))   # against summary.schema.v3.json
        assert summary.load(path).cases, name
