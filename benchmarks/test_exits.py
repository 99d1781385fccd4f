"""Every run ends with its verdict's exit code: a short scenario whose verdict fails, run many
times through the CLI, must exit 1 every time (once it ended with SIGABRT, -6, after writing
its results: a daemon thread was still inside native code when the interpreter exited).

About a minute a run, so it runs only when asked: `BENCH_EXITS=12 tox -e bench` (the count).
"""

from __future__ import annotations

import collections
import os

import pytest

from tests.helpers import REPO, run_cli

RUNS = int(os.environ.get("BENCH_EXITS", "0"))
SCENARIO = REPO / "benchmarks" / "scenarios" / "exits.toml"

pytestmark = pytest.mark.skipif(RUNS < 1,
                                reason="about a minute a run: BENCH_EXITS=N runs the scenario N times")


def test_every_run_exits_with_its_verdict_s_code(tmp_path, benchmark):
    codes: list[int] = []

    def runs():
        for i in range(RUNS):
            proc = run_cli("run", str(SCENARIO), "--out", str(tmp_path / f"run-{i}"), timeout=600)
            codes.append(proc.returncode)
            log = (tmp_path / f"run-{i}" / "harness.log").read_text()
            assert "threads still running at exit" not in log, log[-2000:]

    benchmark.pedantic(runs, rounds=1, iterations=1)
    counted = collections.Counter(codes)
    benchmark.extra_info.update(runs=RUNS, exit_codes=dict(counted))
    assert counted == {1: RUNS}, f"exit codes over {RUNS} runs: {dict(counted)}"
