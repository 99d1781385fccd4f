"""A Spark program of the checker's, run in a process of its own (the harness never runs Spark
itself): the batch oracle (workloads/pipelines/job_batch.py) and the state reader
(workloads/pipelines/state_read.py), each over a request file in its output directory, on local[2], its
scratch directories made for it and removed after it.

    code, seconds = run("workloads.pipelines.state_read", out / "request.json", out / "state-read.log")
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from harness.jvm import quick_submit_args
from harness.paths import REPO_ROOT


def run(module: str, request: Path, log: Path, imports: Sequence[str] = (), quick: bool = True,
        timeout_s: float = 600.0) -> tuple[int, float]:
    """`python -m <module> <request>` in the request's directory, its output in `log`, with
    `imports` and this checkout on PYTHONPATH; `quick`: its JVM with the client compiler alone
    (harness.jvm.QUICK_JVM), for a process that lives seconds. Its exit code and seconds."""
    from harness.services.spark import make_local_dirs

    scratch = make_local_dirs()
    env = environment(imports, quick, scratch)
    began = time.perf_counter()
    try:
        with log.open("w") as sink:
            proc = subprocess.run([sys.executable, "-m", module, str(request)], stdout=sink,
                                  stderr=subprocess.STDOUT, env=env, cwd=request.parent, timeout=timeout_s,
                                  start_new_session=True, check=False)
    finally:
        for made in scratch:
            shutil.rmtree(made, ignore_errors=True)
    return proc.returncode, time.perf_counter() - began


def environment(imports: Sequence[str], quick: bool, scratch: list[Path]) -> dict[str, str]:
    """A checker's Spark program's environment: `imports` and this checkout on PYTHONPATH, its
    scratch in `scratch`, and with `quick` its JVM on the client compiler alone."""
    from harness.services.spark import scratch_env

    env = {**os.environ, **scratch_env(scratch)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [*imports, str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if quick:
        env.setdefault("PYSPARK_SUBMIT_ARGS", quick_submit_args())
    return env


def failed(what: str, code: int, log: Path, lines: int = 15) -> str:
    """What a failed run says: its exit code and the end of its log."""
    tail = log.read_text(errors="replace").splitlines()[-lines:]
    return (f"{what}'s Spark run exited with {code}; the end of {log}:\n"
            + "\n".join(f"    {line}" for line in tail))
