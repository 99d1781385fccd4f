"""Every built-in pipeline, and a user's own build, pipeline and sink, end to end (in
`tox -e bench`: the oracles' unit tests and the short end-to-end runs are in `tox -e test`).

Setup: tests/scenarios/pipelines.toml, one case per pipeline over the same short
workload (out of order, 3% very late, 5% of events re-sent), no faults; the user's code
is tests/scenarios/my_job.py, beside the scenario. One case writes into Delta Lake, and
one runs on the available-now trigger. Steps: one run through the CLI, then
each case's summary: the oracle and Spark agree exactly, the watermark is the declared
one, and the late rows the oracle drops are the ones Spark reports dropping.
"""

import json

import pandas as pd
import pytest

from harness.results import summary
from tests.helpers import REPO, run_cli

# an end-to-end variation: tox -e bench runs it (about 5 minutes), not with --quick
pytestmark = [pytest.mark.integration, pytest.mark.e2e_variation]

SCENARIO = REPO / "tests" / "scenarios" / "pipelines.toml"
# Spark's Kafka sink runs end to end in the bench (sinks.toml); its reader in test_kafka_sink.py
CASES = ["passthrough-parquet", "sliding-top-n", "sessions", "dedup", "failed-logins", "order-payment-join",
         "user-build", "user-pipeline-and-sink"]


@pytest.fixture(scope="module")
def pipelines_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("pipelines") / "run"
    proc = run_cli("run", str(SCENARIO), "--out", str(run_dir))
    cases = {c["name"]: c for c in json.loads((run_dir / "summary.json").read_text())["cases"]}
    return proc, run_dir, cases


def test_the_run_passes_and_follows_the_schema(pipelines_run):
    proc, run_dir, cases = pipelines_run
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert sorted(cases) == sorted(CASES)
    summary.validate(json.loads((run_dir / "summary.json").read_text()))


@pytest.mark.parametrize("name", CASES)
def test_the_oracle_and_spark_agree_exactly(pipelines_run, name):
    """Nothing lost, duplicated, unexpected or wrong, and the watermark oracle agrees."""
    _, run_dir, cases = pipelines_run
    case = cases[name]
    assert case["verdict"]["holds"], case["verdict"]["detail"]
    assert case["discrepancies"] == {}, case["discrepancies"]
    assert case["events"]["delivered"] == case["events"]["expected"] > 0, case["events"]
    assert pd.read_parquet(run_dir / "cases" / name / "discrepancies.parquet").empty


@pytest.mark.parametrize("name", ["sliding-top-n", "sessions", "dedup", "failed-logins", "order-payment-join",
                                  "user-build"])
def test_late_rows_are_dropped_as_spark_counts_them(pipelines_run, name):
    """The oracle's count of late rows, counted Spark's way, equals numRowsDroppedByWatermark."""
    case = pipelines_run[2][name]
    assert case["events"]["dropped_late_spark"] == case["spark_dropped_by_watermark"], case


def test_the_run_had_late_rows_to_drop(pipelines_run):
    """The comparison above is not vacuous: Spark dropped late rows, and the oracles agreed.
    (One short case may see none; over all of them some are sure.)"""
    stateful = ["sliding-top-n", "sessions", "dedup", "failed-logins", "order-payment-join", "user-build"]
    assert sum(pipelines_run[2][name]["spark_dropped_by_watermark"] for name in stateful) > 0


def test_dedup_had_copies_to_drop(pipelines_run):
    events = pipelines_run[2]["dedup"]["events"]
    assert events["resent"] > 0 and events["delivered"] == events["expected"]


def test_the_user_sink_and_build_are_named_in_the_summary(pipelines_run):
    cases = pipelines_run[2]
    assert cases["user-pipeline-and-sink"]["sink_class"] == "my_job:JsonLinesSink"
    assert cases["user-build"]["build"] == "my_job:count_per_window"


def test_the_parquet_sink_is_read_through_its_log(pipelines_run):
    """Spark's file sink: every committed file is in _spark_metadata, none outside it."""
    report = pipelines_run[2]["passthrough-parquet"]["sink_report"]
    assert report["files_in_log"] > 0 and report["files_outside_log"] == 0, report


def test_delta_is_read_through_its_log(pipelines_run):
    """An idempotent foreachBatch into Delta: rows come from committed versions only. Delta
    writes an empty batch's empty file but leaves it out of the commit: no rows outside."""
    case = pipelines_run[2]["dedup"]
    report = case["sink_report"]
    assert case["sink"] == "delta_batch" and report["versions"] > 1 and report["files_in_log"] > 0, report
    assert report["rows_outside_log"] == 0 and report["files_unreadable"] == 0, report


def test_available_now_runs_the_query_again_and_again(pipelines_run):
    """The available-now case is a scheduled job: several runs of one query on one checkpoint."""
    proc, run_dir, cases = pipelines_run
    assert cases["user-build"]["spark_settings"]["trigger"] == "available-now"
    records = [json.loads(line) for line in (run_dir / "cases" / "user-build" / "progress.jsonl").open()]
    assert len({r["runId"] for r in records}) > 2 and len({r["id"] for r in records}) == 1
