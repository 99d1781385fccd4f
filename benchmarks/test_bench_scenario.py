"""The benchmark scenario end to end: `python -m harness run bench.toml` as a pytest-benchmark
case, so that `tox -e bench` writes one pytest-benchmark JSON with the scenario's figures in
`extra_info` (and pytest-benchmark's own --benchmark-compare works on it), beside the run
directory's summary.json and report.html.

The run's live progress (rate sent, lag, faults) goes straight to the terminal. `tox -e
bench -- --quick` applies bench.toml's [quick] overrides, `--out DIR` names the run
directory and `--repeat N` runs each case N times (for compare's noise).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.paths import results_dir
from harness.results.rundir import new_run_id
from tests.helpers import REPO

SCENARIO = REPO / "harness" / "scenario" / "scenarios" / "bench.toml"


def figures(summary: dict) -> dict:
    """The scenario's numbers per case, flat, for extra_info."""
    out: dict = {"run_id": summary["run_id"], "status": summary["status"]}
    for c in summary["cases"]:
        measured = c.get("latency_measured_ms") or c["latency_ms"]
        eps = c["throughput_eps"]
        out.update({f"{c['name']}.{k}": v for k, v in {
            "verdict": {True: "PASS", False: "FAIL"}.get(c["verdict"]["holds"]),
            "offered_eps": eps.get("offered"), "processed_eps": eps.get("processed"),
            "measured_processed_eps": (eps.get("measured") or {}).get("processed"),
            "event_time_p50_ms": measured["event_time"]["p50"],
            "event_time_p99_ms": measured["event_time"]["p99"],
            "processing_time_p99_ms": measured["processing_time"]["p99"],
            "lost": c["events"].get("lost"), "duplicated": c["events"].get("duplicated"),
            "max_lag_records": c["backpressure"].get("max_lag_records"),
            "batch_p50_ms": ((c.get("batch_time") or {}).get("phases_ms") or {}).get("triggerExecution", {})
            .get("median")}.items()})
    return out


@pytest.mark.benchmark(group="scenario")
def test_bench_scenario(benchmark, request, capsys):
    quick, repeat = request.config.getoption("--quick"), request.config.getoption("--repeat")
    out = request.config.getoption("--out") or str(results_dir() / new_run_id("bench"))
    cmd = [sys.executable, "-m", "harness", "run", str(SCENARIO), "--out", out,
           *(["--quick"] if quick else []), *(["--repeat", str(repeat)] if repeat > 1 else [])]

    def run() -> int:
        with capsys.disabled():   # live progress, as `python -m harness run` shows it
            print(f"\n$ {' '.join(cmd)}", flush=True)
            return subprocess.run(cmd, cwd=REPO).returncode

    code = benchmark.pedantic(run, rounds=1, iterations=1)
    summary_path = f"{out}/summary.json"
    with open(summary_path) as f:
        summary = json.load(f)
    benchmark.extra_info.update({"run_dir": out, "quick": quick, "repeat": repeat, **figures(summary)})
    assert code == 0, f"python -m harness run exited {code}: see {out}/report.html and {summary_path}"
