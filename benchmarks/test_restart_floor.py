"""Recovery that costs what Spark costs: the harness's restart of a killed driver beside
Spark's own floor, the same query resuming the same checkpoint by a plain `spark-submit`.

Setup: the session's Kafka and PostgreSQL (the pytest plugin's `harness_services`), kept up
after the run so that its topic can be read again. Steps:
1. benchmarks/scenarios/restart.toml: the driver is killed 12 s in and started again 1 s
   later; its `recovery.first_batch_after_s` minus that 1 s is the harness's restart as the
   run records it.
2. The case's checkpoint is copied twice, and the newest `commits/N` removed from each
   copy: a checkpoint as a killed driver leaves it, with one batch to run again.
3. The floor: `spark-submit benchmarks/plain_query.py` on one copy (the same master, jars,
   settings, query and sink; no commit gate, progress listener or control channel), timed
   from the process's start to commits/N written.
4. The harness's start alone: a SparkDriver on the other copy, timed the same way.

Records the three figures and the ratios; the goal (issue 21) is the harness's restart
within 1.2 times the floor. Numbers, never asserted: docs/performance.md, "Restart floor".
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.helpers import REPO

SCENARIO = REPO / "benchmarks" / "scenarios" / "restart.toml"
PLAIN = REPO / "benchmarks" / "plain_query.py"
TIMEOUT_S = 240


def _rewound(checkpoint: Path, into: Path) -> tuple[Path, int]:
    """A copy of `checkpoint` without its newest commits/N (and the checksum beside it)."""
    shutil.copytree(checkpoint, into)
    newest = max(int(p.name) for p in (into / "commits").iterdir() if p.name.isdigit())
    (into / "commits" / str(newest)).unlink()
    (into / "commits" / f".{newest}.crc").unlink(missing_ok=True)
    return into, newest


def _until_committed(checkpoint: Path, batch: int, process) -> float:
    """When commits/`batch` appeared (its mtime), waiting up to TIMEOUT_S."""
    path = checkpoint / "commits" / str(batch)
    deadline = time.monotonic() + TIMEOUT_S
    while not path.exists():
        if process.poll() is not None:
            raise AssertionError(f"the process exited with {process.returncode} before commits/{batch}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no commits/{batch} within {TIMEOUT_S}s")
        time.sleep(0.05)
    return path.stat().st_mtime


def _floor(config, checkpoint: Path, batch: int, log: Path) -> float:
    from harness import procs
    from workloads.pipelines.driver import DEFAULT_CONF

    submit = Path(__import__("pyspark").__file__).parent / "bin" / "spark-submit"
    confs = [arg for k, v in {**DEFAULT_CONF, **config.spark_conf}.items() for arg in ("--conf", f"{k}={v}")]
    driver_json = log.with_suffix(".json")
    config.write(driver_json)
    cmd = [str(submit), "--master", config.master, "--jars", ",".join(config.jars), *confs, str(PLAIN),
           str(driver_json), str(checkpoint)]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1",
           "PYTHONPATH": os.pathsep.join([*config.import_paths, str(REPO)])}
    started = time.time()
    process = procs.spawn(cmd, log, env=env)
    try:
        return _until_committed(checkpoint, batch, process) - started
    finally:
        procs.kill_group(process.pid)


def _harness_start(config, checkpoint: Path, batch: int, workdir: Path, registry) -> float:
    from harness.services.spark import SparkDriver

    started = time.time()
    driver = SparkDriver(workdir, replace(config, checkpoint=str(checkpoint)), registry).start()
    try:
        return _until_committed(checkpoint, batch, driver.process) - started
    finally:
        driver.kill()


@pytest.mark.e2e_variation   # a full run and two starts: not with --quick
@pytest.mark.benchmark(group="restart")
def test_the_harness_s_restart_beside_spark_s_floor(harness_services, tmp_path, benchmark):
    from harness import api
    from workloads.pipelines.config import DriverConfig

    registry, stack = harness_services
    run_dir = tmp_path / "run"
    result = benchmark.pedantic(lambda: api.run(SCENARIO, run_dir, registry=registry, stack=stack),
                                rounds=1, iterations=1)
    (case,) = result.cases
    (kill,) = [f for f in case.faults if f.kind == "kill-driver"]
    assert kill.observed, kill.detail
    downtime = kill.spec["downtime_s"]
    in_run = kill.recovery["first_batch_after_s"] - downtime
    case_dir = run_dir / "cases" / case.name
    config = DriverConfig.read(case_dir / "driver.json")
    plain_cp, batch = _rewound(case_dir / "checkpoint", tmp_path / "plain-checkpoint")
    floor = _floor(config, plain_cp, batch, tmp_path / "plain.log")
    ours_cp, _ = _rewound(case_dir / "checkpoint", tmp_path / "harness-checkpoint")
    ours = _harness_start(config, ours_cp, batch, tmp_path / "harness-start", registry)
    benchmark.extra_info.update({
        "floor_s": round(floor, 2), "harness_start_s": round(ours, 2), "in_run_restart_s": round(in_run, 2),
        "in_run": {"downtime_s": kill.recovery.get("downtime_s"), "asked_downtime_s": downtime,
                   "first_batch_after_s": kill.recovery.get("first_batch_after_s")},
        "harness_start_over_floor": round(ours / floor, 3), "in_run_over_floor": round(in_run / floor, 3),
        "rerun_batch": batch})
    print(json.dumps(benchmark.extra_info, indent=1))
    assert case.verdict.holds, case.verdict.detail
