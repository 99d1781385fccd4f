"""The benchmark scenario end to end: `python -m harness run bench.toml` as a pytest-benchmark
case, so that `tox -e bench` writes one pytest-benchmark JSON with the scenario's figures in
`extra_info` (and pytest-benchmark's own --benchmark-compare works on it), beside the run
directory's summary.json and report.html.

The run's live progress (rate sent, lag, faults) goes straight to the terminal. `tox -e
bench -- --quick` applies bench.toml's [quick] overrides, `--out DIR` names the run
directory and `--repeat N` runs each case N times (for compare's noise).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.paths import results_dir
from harness.results import summary
from harness.results.rundir import new_run_id
from tests.helpers import REPO

SCENARIO = REPO / "harness" / "scenario" / "scenarios" / "bench.toml"


# the keys this benchmark wrote before the registry named its figures -> the figure: kept, with
# the same values (a key is added, never renamed)
LEGACY = {"measured_processed_eps": "throughput", "event_time_p50_ms": "p50", "event_time_p99_ms": "p99",
          "processing_time_p99_ms": "processing_p99", "max_lag_records": "max_lag",
          "batch_p50_ms": "batch_p50"}


def figures(result) -> dict:
    """The scenario's numbers per case, flat, for extra_info: each case's verdict and every
    figure of the registry by its name (harness/results/figures.py), as the pytest plugin
    writes them; beside them the keys of before, and the whole run's offered and processed
    rates (`offered_eps`, `processed_eps`: no figure, the registry's are over the measured window)."""
    from harness.pytest_plugin import extra_info
    from harness.results.figures import figure

    out: dict = {"status": result.status, **extra_info(result)}
    for c in result.cases:
        out[f"{c.name}.verdict"] = c.verdict.status
        out.update({f"{c.name}.{old}": figure(name).value(c) for old, name in LEGACY.items()})
        out.update({f"{c.name}.offered_eps": c.throughput_eps.get("offered"),
                    f"{c.name}.processed_eps": c.throughput_eps.get("processed")})
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
    benchmark.extra_info.update({"run_dir": out, "quick": quick, "repeat": repeat,
                                 **figures(summary.load(summary_path))})
    assert code == 0, f"python -m harness run exited {code}: see {out}/report.html and {summary_path}"
