"""summary.json: the schema, the verdict rules, and writing without losing results."""

import copy
import json

import pytest

from harness.report import summary


def sample_summary(**overrides):
    case = {
        "name": "c", "guarantee": "exactly-once", "pipeline": "windowed_count", "sink": "postgres",
        "faults": [{"kind": "kill_executor", "at_s": 5.0, "started_s": 5.1, "ended_s": None,
                    "target": "executor 1", "observed": True}],
        "events": {"produced": 10, "expected": 9, "delivered": 9, "lost": 0, "duplicated": 0,
                   "unexpected": 0, "dropped_late": 1},
        "verdict": summary.verdict("exactly-once", 0, 0, 0, expected_count=9),
        "throughput_eps": {"offered": 100.0, "processed": 99.5},
        "latency_ms": {"event_time": {"p50": 1.0, "p90": 2.0, "p99": 3.0, "p999": 4.0, "max": 5.0},
                       "processing_time": {"p50": None, "p90": None, "p99": None, "p999": None,
                                           "max": None}},
        "backpressure": {"max_lag_records": 3, "max_lag_s": 0.5, "recovery_s": None},
    }
    result = {
        "schema_version": 1, "run_id": "r1", "status": "completed",
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
        assert summary.observed_guarantee(lost, dup) == observed

    @pytest.mark.parametrize("expected, observed, holds", [
        ("exactly-once", "at-least-once", False), ("at-least-once", "exactly-once", True),
        ("at-least-once", "at-most-once", False), ("at-most-once", "exactly-once", True),
        ("at-most-once", "at-least-once", False), ("exactly-once", "none", False)])
    def test_a_stronger_observation_satisfies_a_weaker_promise(self, expected, observed, holds):
        """exactly-once satisfies every guarantee; the others satisfy only themselves."""
        assert summary.guarantee_holds(expected, observed) is holds

    def test_unexplained_output_never_holds(self):
        """Output that ground truth cannot explain fails even an at-least-once promise."""
        v = summary.verdict("at-least-once", 0, 0, 3, expected_count=10)
        assert not v["holds"] and "3 unexpected" in v["detail"]

    def test_a_failed_verdict_says_what_failed_first(self):
        """Right counts but a wrong sum: the detail starts with FAILED and the reason, never
        with 'held'."""
        v = summary.verdict("exactly-once", 0, 0, 0, expected_count=10,
                            problems=["16 windows have the right count but a wrong sum"])
        assert not v["holds"]
        assert v["detail"].startswith("FAILED: 16 windows have the right count but a wrong sum")
        assert "held" not in v["detail"]

    def test_a_broken_guarantee_is_named_before_the_counts(self):
        """exactly-once with duplicates: the failure sentence comes first."""
        v = summary.verdict("exactly-once", 0, 4, 0, expected_count=10)
        assert v["detail"].startswith("FAILED: exactly-once did not hold (observed at-least-once)")

    def test_a_held_verdict_reads_as_held(self):
        v = summary.verdict("at-least-once", 0, 4, 0, expected_count=10)
        assert v["holds"] and v["detail"].startswith("at-least-once held (observed at-least-once)")


class TestWriteAndLoad:
    def test_write_then_load_round_trips(self, tmp_path):
        """What is written is what is read."""
        summary.write(tmp_path, sample_summary())
        assert summary.load(tmp_path / "summary.json") == sample_summary()

    def test_write_refuses_another_runs_summary(self, tmp_path):
        """Results are never overwritten by a different run."""
        summary.write(tmp_path, sample_summary())
        with pytest.raises(FileExistsError):
            summary.write(tmp_path, sample_summary(run_id="r2"))

    def test_write_refuses_an_invalid_summary_and_keeps_the_old_one(self, tmp_path):
        """Validation comes before the file is touched."""
        summary.write(tmp_path, sample_summary())
        broken = copy.deepcopy(sample_summary(status="finished"))
        with pytest.raises(ValueError):
            summary.write(tmp_path, broken)
        assert json.loads((tmp_path / "summary.json").read_text())["status"] == "completed"

    def test_load_refuses_an_unknown_schema_version(self, tmp_path):
        """A summary from a newer harness is not misread."""
        (tmp_path / "summary.json").write_text(json.dumps(sample_summary(schema_version=2)))
        with pytest.raises(ValueError, match="schema_version 2"):
            summary.load(tmp_path / "summary.json")
