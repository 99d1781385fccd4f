"""Your own job, end to end (issue 42; docs/your-job.md): the three examples exact under
kill-driver, fail-task and kill-executor; the planted bugs caught by the batch oracle with
their finding and story; what the batch oracle costs of a run; the replay's speed.

Setup: each example's make_data.py writes its dataset (no download); the planted bugs run
on 6,000 clicks of the my-job (sessions) example's generator, with tests/scenarios/job_planted.py.
Steps: one `python -m harness run` per example (with --quick: its [quick] overrides) and per
planted bug (three times, --repeat 3, without --quick), then the run's summary and the
batch oracle's own account (<case>/oracle/oracle.json). Speed is recorded, never asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import REPO, run_cli

pytestmark = pytest.mark.integration

EXAMPLES = ["my-job", "dedup", "enrichment"]
FAULTS = {"kill-driver", "fail-task", "kill-executor"}


def _make_data(example: str, *args: str) -> None:
    subprocess.run([sys.executable, str(REPO / "examples" / example / "make_data.py"), *args], check=True,
                   capture_output=True)


def _run(scenario: Path, out: Path, *options: str) -> tuple[subprocess.CompletedProcess, dict, float]:
    began = time.perf_counter()
    proc = run_cli("run", str(scenario), "--out", str(out), *options, timeout=1800)
    wall_s = time.perf_counter() - began
    summary = json.loads((out / "summary.json").read_text())
    return proc, summary, wall_s


def _oracle(out: Path, case: str) -> dict:
    return json.loads((out / "cases" / case / "oracle" / "oracle.json").read_text())


@pytest.mark.benchmark(group="jobs")
@pytest.mark.parametrize("example", EXAMPLES)
def test_each_example_is_exact_under_faults(benchmark, example, tmp_path, request):
    """The example's job, into an exactly-once sink, under kill-driver, fail-task and
    kill-executor: every fault landed, and the sink holds exactly the rows the same function
    writes as a batch over the records the stream read. Records the run's wall time and the
    batch oracle's share of it (the goal: at most 30%)."""
    _make_data(example)
    quick = ("--quick",) if request.config.getoption("--quick") else ()
    out = tmp_path / "run"
    proc, summary, wall_s = benchmark.pedantic(
        _run, args=(REPO / "examples" / example / "scenario.toml", out, *quick), rounds=1, iterations=1)
    case = summary["cases"][0]
    e = case["events"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert case["verdict"]["status"] == "PASS", case["verdict"]
    assert e["lost"] == e["duplicated"] == e["unexpected"] == 0 and e["delivered"] == e["expected"] > 0, e
    assert {f["kind"] for f in case["faults"] if f.get("landed")} == FAULTS, case["faults"]
    oracle = _oracle(out, case["name"])
    benchmark.extra_info.update({
        "example": example, "rows_expected": e["expected"], "records_read": oracle["records_read"],
        "mode": oracle["mode"], "late_records": oracle["late_records"], "run_wall_s": round(wall_s, 1),
        "oracle_s": oracle["seconds"], "oracle_spark_s": oracle["spark"]["process_s"],
        "oracle_share": round(oracle["seconds"] / wall_s, 3), "goal_oracle_share": 0.3})


PLANTED = """
name = "planted-{name}"
imports = ["{here}", "{scenarios}"]
drain_timeout = "180s"

[workload]
kind = "replay"
file = "clicks.jsonl"
event_time = "ts"
key = "user"
rate = {{ eps = 200 }}
partitions = 2

[pipeline]
kind = "job"
build = "job_planted:{job}"
schema = "user STRING, page STRING, ts BIGINT"
columns = {columns}
key = {key}
output_mode = "{mode}"

[[cases]]
name = "{name}"
guarantee = "exactly-once"
sink = "{sink}"
{sink_class}

[[faults]]
kind = "kill-driver"
at = "6s"
{point}
"""
BUGS = {
    # a sink that inserts a replayed batch again, under a kill after its write: duplicated
    "appending-sink": dict(job="pages", columns='{ user = "STRING", page = "STRING", ts = "LONG" }',
                           key='["user", "ts"]', mode="append", sink="custom",
                           sink_class='sink_class = "job_planted:AppendingSink"',
                           point='point = "after-write"',
                           finding="duplicated"),
    # an upsert sink re-applying its staged batches on recovery, unguarded: went-backwards
    "recovering-upsert": dict(job="clicks_per_user", columns='{ user = "STRING", clicks = "LONG" }',
                              key='["user"]', mode="update", sink="custom",
                              sink_class='sink_class = "job_planted:RecoveringUpsertSink"', point="",
                              finding="went-backwards"),
    # a running total in a Python variable instead of state: mismatch
    "total-in-a-variable": dict(job="totals_in_a_variable", columns='{ user = "STRING", clicks = "LONG" }',
                                key='["user"]', mode="update", sink="postgres_upsert", sink_class="",
                                point="",
                                finding="mismatch"),
}


@pytest.mark.benchmark(group="planted")
@pytest.mark.parametrize("bug", list(BUGS))
def test_a_planted_bug_is_caught_with_its_story(benchmark, bug, tmp_path, request):
    """A planted bug under kill-driver: every run FAILs (three of three without --quick), with
    the bug's finding, whose story names the cause (the batch written twice, the older batch
    written over the newer one, the column whose values differ)."""
    spec = BUGS[bug]
    from tests.scenarios.job_planted import clicks

    (tmp_path / "clicks.jsonl").write_text("".join(json.dumps(c) + "\n" for c in clicks(6_000)))
    scenario = tmp_path / "planted.toml"
    scenarios = REPO / "tests" / "scenarios"
    scenario.write_text(PLANTED.format(name=bug, here=tmp_path, scenarios=scenarios, **spec))
    repeat = 1 if request.config.getoption("--quick") else 3
    out = tmp_path / "run"
    proc, summary, _ = benchmark.pedantic(_run, args=(scenario, out, "--repeat", str(repeat)), rounds=1,
                                          iterations=1)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    caught = 0
    for case in summary["cases"]:
        found = {f["class"]: f for f in case.get("findings", [])}
        assert case["verdict"]["status"] == "FAIL", case["verdict"]
        assert spec["finding"] in found, (case["name"], list(found), case["verdict"])
        caught += 1
    story = found[spec["finding"]]["story"]
    benchmark.extra_info.update({"bug": bug, "runs": repeat, "caught": caught, "finding": spec["finding"],
                                 "story": story[:600]})
    assert caught == repeat


@pytest.mark.benchmark(group="replay-speed")
def test_replay_speed_from_json_lines(benchmark, kafka, new_topic, tmp_path, sizes):
    """The replay's unpaced rate from a JSON lines file, measured as the generator's is
    (docs/generator.md, "Throughput"): sizes.throughput_events records of about 117 bytes into
    4 partitions, first produce() to last acknowledgement (the report's acked_eps), each round
    on a fresh topic. The goal: at least 100,000 records/s."""
    from workloads.replay import send
    from workloads.replay.spec import parse

    rows = sizes.throughput_events
    with (tmp_path / "r.jsonl").open("w") as f:
        for i in range(rows):
            f.write(json.dumps({"id": i, "user": f"u{i % 1000:04d}", "page": f"/p/{i % 97}",
                                "ts": 1_714_564_800_000 + i, "price": i % 10_000 / 100,
                                "note": "x" * 14}, separators=(",", ":")) + "\n")
    spec = parse({"kind": "replay", "file": "r.jsonl", "event_time": "ts", "key": "user", "partitions": 4,
                  "rate": {"eps": 1_000_000}}, base_dir=tmp_path)
    rates: list[float] = []

    def one_round(topic):
        report = send.replay(spec, kafka.bootstrap_servers, tmp_path / f"truth-{len(rates)}", topic=topic,
                             pace=False)
        assert report["events"] == rows and report["failed"] == 0, report
        rates.append(report["acked_eps"])

    benchmark.pedantic(one_round, setup=lambda: ((new_topic("replay"),), {}), rounds=sizes.rounds,
                       iterations=1)
    value_bytes = (tmp_path / "r.jsonl").stat().st_size / rows - 1
    benchmark.extra_info.update({"records": rows, "partitions": 4, "value_bytes_mean": round(value_bytes, 1),
                                 "replay_eps_runs": rates, "replay_eps": sorted(rates)[len(rates) // 2],
                                 "goal_replay_eps": 100_000})
