"""`python -m harness check` (harness/run/recheck.py) without services: the case's pipeline
rebuilt from scenario.effective.json as the run had it, and bad input named. The re-check of
real runs is in tests/test_e2e.py (a built-in pipeline) and tests/test_job_recheck_e2e.py (a job)."""

from __future__ import annotations

import json

from harness.results.model import CaseResult, Verdict
from harness.run import recheck
from harness.scenario import load
from tests.helpers import REPO, run_cli
from tests.scenarios.job_planted import clicks

JOB = """
name = "job"
imports = ["{examples}"]

[workload]
kind = "replay"
file = "clicks.jsonl"
event_time = "ts"
key = "user"
speed = 20.0

[pipeline]
kind = "job"
from_kafka = "job:from_kafka"
key = ["user", "session_start"]
fail_on_data_loss = false

[pipeline.columns]
user = "STRING"
session_start = "LONG"
session_end = "LONG"
clicks = "LONG"
last_click_ms = "LONG"

[[cases]]
name = "sessions"
guarantee = "exactly-once"
"""


def _case(name: str, series: str = "") -> CaseResult:
    return CaseResult(name=name, guarantee="exactly-once", pipeline="", sink="postgres", events={},
                      verdict=Verdict("exactly-once", "exactly-once", True, "", "PASS"), throughput_eps={},
                      latency_ms={}, backpressure={}, series=series)


class TestPipelineOf:
    def test_a_built_in_pipeline_is_the_runs(self):
        """The scenario's [pipeline], through JSON and back, equals the one the run checked with."""
        scenario = load(REPO / "tests" / "scenarios" / "retention_skip.toml")
        effective = json.loads(json.dumps(scenario.to_dict()))
        assert recheck.pipeline_of(effective, _case("eo")) == scenario.pipeline

    def test_a_job_is_the_runs_with_its_schema_and_a_repeat_finds_its_series(self, tmp_path):
        """A job's own fields (how it reads, its schema bound from the records, its output mode)
        come back too; `eo-r2` of run --repeat is found by its series."""
        (tmp_path / "clicks.jsonl").write_text("".join(json.dumps(c) + "\n" for c in clicks(300)))
        path = tmp_path / "job.toml"
        path.write_text(JOB.format(examples=REPO / "examples" / "my-job"))
        scenario = load(path).repeated(2)
        effective = json.loads(json.dumps(scenario.to_dict()))
        got = recheck.pipeline_of(effective, _case("sessions-r2", series="sessions"))
        assert got == scenario.pipeline and got.schema and got.params() == scenario.pipeline.params()
        assert got.spark.source_options() == {"failOnDataLoss": "false", "includeHeaders": "true"}


class TestBadInput:
    def test_a_directory_without_a_summary_exits_2_naming_it(self, tmp_path):
        proc = run_cli("check", str(tmp_path))
        assert proc.returncode == 2 and "no summary.json there" in proc.stderr, proc.stderr


class TestCarried:
    def test_a_state_or_timers_failure_of_the_run_fails_the_re_check_too(self):
        """When the state check or the timers' check cannot run again (no reads, no timer log),
        what the run's found is carried into the re-check's verdict, never dropped (the timers
        plant's re-check said PASS)."""
        from dataclasses import replace

        clean = _case("c")
        assert recheck.carried_problems(clean) == []
        diverged = replace(clean, sections={"state_check": {"diverged": 162}, "timers": {"fired_twice": 0}})
        (said,) = recheck.carried_problems(diverged)
        assert said.startswith("the state diverged") and "162" in said
        twice = replace(clean, sections={"timers": {"fired_twice": 5, "never_fired": 0}})
        (said,) = recheck.carried_problems(twice)
        assert "5 fired in more than one committed batch" in said

    def test_checks_that_cannot_run_again_carry_the_run_s_findings(self, tmp_path):
        """A case directory with no state read and no timer log: the run's findings are carried."""
        from dataclasses import replace

        from harness.check.batch_oracle import spark_run
        from harness.results.rundir import RunDir
        from harness.scenario.model import Pipeline

        files = RunDir(tmp_path / "run").case("c")
        files.path.mkdir(parents=True)
        case = replace(_case("c"), sections={"state_check": {"diverged": 3, "checked": []},
                                             "timers": {"fired_twice": 2, "never_fired": 0}})
        with spark_run.rechecking(tmp_path / "check" / "cases"):
            problems, notes = recheck.evidence_again(files, case, Pipeline(kind="tumbling_count"), None, [])
        assert [p.split(":")[0] for p in problems] == ["the state diverged from the oracle's",
                                                       "transformWithState's timers"], problems
        assert notes == []

    def test_a_state_finding_not_judged_again_is_carried(self, tmp_path, monkeypatch):
        """The re-check judged none of the batches the run's state check had (a job whose re-run
        oracle cannot say its state): the run's finding is carried, not dropped to a PASS."""
        from dataclasses import replace

        from harness.check import state_check
        from harness.check.batch_oracle import spark_run
        from harness.results.rundir import RunDir
        from harness.scenario.model import Pipeline

        files = RunDir(tmp_path / "run").case("c")
        files.path.mkdir(parents=True)
        monkeypatch.setattr(state_check, "check", lambda *a, **k: state_check.Outcome(notes=["not checked"]))
        case = replace(_case("c"), sections={"state_check": {"diverged": 4, "checked": [
            {"operator": 0, "batch": 7, "after": "final", "keys": 3}]}})
        with spark_run.rechecking(tmp_path / "check" / "cases"):
            problems, notes = recheck.evidence_again(files, case, Pipeline(kind="tumbling_count"), None, [])
        assert problems and problems[0].startswith("the state diverged from the oracle's: 4 values"), problems
        assert "batch(es) 7 of the run's state check were not judged again" in notes
