"""Nexmark on Structured Streaming (docs/pipelines-and-sinks.md, "Nexmark"): every query the
harness runs, exactly-once into PostgreSQL, checked against its oracle (harness/check/nexmark.py),
first without faults (nexmark.toml), then under kill-executor, fail-task and kill-driver after
the write (nexmark-faults.toml), and q0's throughput against its two ceilings (about 5
minutes). Together they take about 25 minutes with --quick and 45 without, so they run only
when asked: `tox -e bench -- --nexmark [--quick] -k nexmark`.

Setup: nothing; each run starts its own Kafka, PostgreSQL and Spark local-cluster.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers import REPO, assert_nothing_left, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.nexmark]

SCENARIOS = REPO / "harness" / "scenario" / "scenarios"


def _run(tmp_path, request, name: str, codes: tuple[int, ...] = (0,)) -> dict:
    run_dir = tmp_path / "run"
    quick = ["--quick"] if request.config.getoption("--quick") else []
    proc = run_cli("run", str(SCENARIOS / name), *quick, "--out", str(run_dir), timeout=3 * 3600)
    summary = json.loads((run_dir / "summary.json").read_text())
    failed = {c["name"]: (c["verdict"]["detail"], c.get("findings")) for c in summary["cases"]
              if c["verdict"]["status"] == "FAIL"}   # UNKNOWN: a fault missed, said by its own test
    assert proc.returncode in codes and not failed, failed or proc.stdout[-3000:] + proc.stderr[-3000:]
    assert_nothing_left(run_dir)
    return summary


def test_every_query_matches_its_oracle(tmp_path, request):
    """nexmark.toml: each query's rows equal its oracle's, and some windowed query dropped late
    bids as Spark does (1% of the events come 10 s late)."""
    summary = _run(tmp_path, request, "nexmark.toml")
    for case in summary["cases"]:
        events = case["events"]
        assert events["lost"] == events["duplicated"] == events["unexpected"] == 0, (case["name"], events)
        assert events["expected"] > 0, (case["name"], events)
    assert any(c["events"].get("dropped_late", 0) > 0 for c in summary["cases"])


def test_every_query_holds_under_faults(tmp_path, request):
    """nexmark-faults.toml: each query stays exact through an executor killed, a task failed
    after the sink took a row, and the driver killed between a batch's write and its commit;
    every fault is seen, but a fail-task on a query whose batches write one row to each sink
    partition (q7's window maximum, q15's one row a day), which is missed with that reason
    (the run's status schedule-missed, that case's verdict UNKNOWN, exit 4)."""
    summary = _run(tmp_path, request, "nexmark-faults.toml", codes=(0, 4))
    for case in summary["cases"]:
        for f in case["faults"]:
            assert f["observed"] or (f["kind"] == "fail-task" and "wrote one row to each sink partition"
                                     in (f.get("missed") or "")), (case["name"], f)


# the kinds that attack the process and the commit window, not the data: under them an
# exactly-once query must hold (retention and a corrupted checkpoint destroy input or state,
# and a verdict of loss is then right)
HUNT_KINDS = "kill-driver,kill-executor,fail-task,fail-batch,replay-batch,delay-commit,pause,restart-broker"


@pytest.mark.parametrize("query", ["q5", "q20"], ids=["windowed-q5", "join-q20"])
def test_the_hunt_on_a_windowed_and_a_join_query_holds(query, tmp_path, request):
    """`hunt --quick` from seed 1 on q5 (two chained window aggregations) and q20 (an
    unbounded stream-stream join): 3 plans each of the process and commit-window kinds; each
    run holds exactly-once, or the hunt stops with a finding and its story."""
    run_dir = tmp_path / "hunt"
    proc = run_cli("hunt", str(SCENARIOS / "nexmark-faults.toml"), "--case", query, "--seed", "1",
                   "--runs", "3", "--kinds", HUNT_KINDS, "--quick", "--out", str(run_dir), timeout=3600)
    hunt = json.loads((run_dir / "hunt.json").read_text())
    assert proc.returncode == 0 and hunt["found"] is None, (hunt.get("found"), proc.stdout[-3000:])
    assert len(hunt["tried"]) == 3, hunt["tried"]
    assert_nothing_left(run_dir)


def test_a_stateless_query_s_throughput_against_both_ceilings(tmp_path, request):
    """benchmarks/nexmark_throughput.py on q0 (every bid written, exactly-once into PostgreSQL),
    one search doubling from 4,000 events/s: it finds a sustained rate, and both
    ceilings of the same run, Spark's own (rate source into noop; per second and per core
    Spark used) and the one on the stack (the most rows per second of batch time a trial
    showed). The table for every query, three
    repeats each, is in docs/performance.md ("Nexmark throughput per core")."""
    from benchmarks import nexmark_throughput

    quick = ["--quick"] if request.config.getoption("--quick") else []
    out = tmp_path / "throughput"
    # from 4,000 doubling, no bisection: the first rate low enough for a slow shared machine
    # (a first trial that fails ends a search with nothing), the doubling finds this one's
    assert nexmark_throughput.main(["--out", str(out), "--queries", "q0", "--start-eps", "4000",
                                    "--steps", "0", *quick]) == 0
    (row,) = json.loads((out / "throughput.json").read_text())
    assert row["sustained_eps"] and row["ceiling_eps"] and row["busy_ceiling_eps"], row
    assert 0 < row["of_ceiling"] and 0 < row["of_busy_ceiling"] <= 1.5, row
    # the ceiling per core Spark used, from its processes' CPU times: measured, not left out
    assert row["ceiling_eps_per_spark_core"] and 0 < row["of_ceiling_per_core"], row
    print(nexmark_throughput.table([row]))
    assert_nothing_left(out / "q0")
