"""The batch oracle's Spark run, from the harness: a request file, then the program
`python -m workloads.pipelines.job_batch` in a process of its own (the harness never runs
Spark itself), with the driver's import path and a scratch directory of its own.

    run(case_dir, ranges, runs) -> {run name: pandas DataFrame}, and the times it took
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from harness.paths import REPO_ROOT

ORACLE_DIR = "oracle"
TIMEOUT_S = 600.0


class BatchFailed(RuntimeError):
    """The batch query failed: its log's last lines say why."""


def oracle_dir(case_dir: Path) -> Path:
    return Path(case_dir) / ORACLE_DIR


FIELDS = "late-fields"


def run(case_dir: Path, ranges: list[tuple[int, int, int]], runs: dict[str, pd.DataFrame | None],
        fields: tuple[pd.DataFrame, str] | None = None,
        timeout_s: float = TIMEOUT_S) -> tuple[dict[str, pd.DataFrame], dict]:
    """The job's output as a batch over `ranges`, once per run: name -> the records to leave out
    (a frame of partition, offset; None: none). With `fields` (records, DDL): also those records
    parsed with the DDL, as run FIELDS. Returns each run's output and the times."""
    from harness.services.spark import make_local_dirs, scratch_env

    out = oracle_dir(case_dir)
    out.mkdir(parents=True, exist_ok=True)
    listed = []
    for name, drop in runs.items():
        path = None
        if drop is not None:
            path = out / f"{name}-drop.parquet"
            drop[["partition", "offset"]].astype({"partition": "int32", "offset": "int64"}).to_parquet(path)
        listed.append({"name": name, "drop": None if path is None else str(path)})
    if fields is not None:
        path = out / f"{FIELDS}-only.parquet"
        fields[0][["partition", "offset"]].astype({"partition": "int32", "offset": "int64"}).to_parquet(path)
        listed.append({"name": FIELDS, "only": str(path), "parse": fields[1]})
    request = {"driver": str(Path(case_dir) / "driver.json"), "ranges": [list(r) for r in ranges],
               "runs": listed, "out": str(out)}
    (out / "request.json").write_text(json.dumps(request, indent=2) + "\n")
    config = json.loads((Path(case_dir) / "driver.json").read_text())
    scratch = make_local_dirs()
    env = {**os.environ, **scratch_env(scratch)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [*config.get("import_paths", []), str(REPO_ROOT),
                                                      env.get("PYTHONPATH")]))
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    began = time.perf_counter()
    log = out / "batch.log"
    try:
        with log.open("w") as sink:
            command = [sys.executable, "-m", "workloads.pipelines.job_batch", str(out / "request.json")]
            proc = subprocess.run(command,
                                  stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=out, timeout=timeout_s,
                                  start_new_session=True, check=False)
    finally:
        for path in scratch:
            shutil.rmtree(path, ignore_errors=True)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise BatchFailed(f"the batch oracle's Spark run exited with {proc.returncode}; the end of {log}:\n"
                          + "\n".join(f"    {line}" for line in tail))
    times = json.loads((out / "batch.json").read_text())
    times["process_s"] = round(time.perf_counter() - began, 3)
    return {str(r["name"]): pd.read_parquet(out / f"{r['name']}.parquet") for r in listed}, times
