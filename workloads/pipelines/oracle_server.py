"""The batch oracle's Spark session, kept across a run's cases:
`python -m workloads.pipelines.oracle_server INBOX BASE_REQUEST`.

A batch run of its own (job_batch.py) starts a Spark session for every case: 9-17 s of a job
case's 25-36 s check, measured in the planted bugs' e2e run. This program starts one, with the
settings of the request it was started for (BASE_REQUEST), and runs each request the harness
leaves in INBOX in it, one after the other, as job_batch would in a process of its own:

    INBOX/ready        written once the session is up
    INBOX/<n>.ask      the path of a request.json (job_batch's format), written by the harness
    INBOX/<n>.answer   {"code": 0, "times": {...}}: done, its outputs in the request's `out`
                       {"code": 1, "why": "..."}: the job failed (its traceback is in the log)
                       {"code": 3, "why": "..."}: the request needs a setting this session cannot
                       take (a static one, or the Delta extensions it must be rid of): start anew
    INBOX/STOP         stop the session and exit (as does the harness's exit: its parent's)

What one request leaves could change the next one's answer, and nothing may:
  - settings: each request's own are set, and those a request before it set and it does not are
    put back to Spark's default; one that cannot be set or unset at run time answers code 3;
  - the user's modules (any loaded from a directory the request's imports added) are imported
    again, so module-level values start as they would in a new process;
  - Python workers: a Python worker keeps its module-level values from task to task (a running
    total kept in a dict, the very bug a plant holds), so each request's functions carry an
    environment of their own (SparkContext.environment), which gives them a pool of Python
    workers of their own, and the pools of the requests before are stopped;
  - temporary views and cached tables are dropped.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

from workloads import plugins
from workloads.pipelines import job_batch

POLL_S = 0.05
READY, STOP, ASK, ANSWER = "ready", "STOP", ".ask", ".answer"
REQUEST_ENV = "HARNESS_BATCH_ORACLE_REQUEST"
NEEDS_ANOTHER_SESSION = 3


class Unsettable(Exception):
    """A setting this session cannot take or drop at run time."""


def main(argv: list[str]) -> int:
    inbox, base = Path(argv[1]), Path(argv[2])
    parent = os.getppid()
    _, _, config = job_batch.read_request(base)
    plugins.add_import_paths(config.import_paths)
    job_batch.batch_meanings()
    spark = job_batch.session(config)
    applied = settings(config)
    (inbox / READY).write_text(f"{os.getpid()}\n")
    answered = 0
    try:
        while not (inbox / STOP).exists() and os.getppid() == parent:
            ask = inbox / f"{answered + 1}{ASK}"
            if not ask.exists():
                time.sleep(POLL_S)
                continue
            answered += 1
            print(f"=== batch oracle request {answered}: {ask.read_text().strip()}", flush=True)
            reply, applied = take(spark, Path(ask.read_text().strip()), answered, applied)
            tmp = inbox / f"{answered}{ANSWER}.tmp"
            tmp.write_text(json.dumps(reply) + "\n")
            os.replace(tmp, inbox / f"{answered}{ANSWER}")
            print(f"=== batch oracle answer {answered}: code {reply['code']}", flush=True)
    finally:
        spark.stop()
    return 0


def settings(config) -> dict[str, str]:
    """The request's settings as Spark's runtime config spells their values."""
    from pyspark.sql.utils import to_str

    return {k: str(to_str(v)) for k, v in job_batch.settings(config).items()}


def take(spark, path: Path, n: int, applied: dict[str, str]) -> tuple[dict, dict[str, str]]:
    """Run one request in `spark`: the answer, and the settings now in force."""
    try:
        request_read = job_batch.read_request(path)
        wanted = settings(request_read[2])
        adjust(spark, applied, wanted)
    except Unsettable as exc:
        return {"code": NEEDS_ANOTHER_SESSION, "why": str(exc)}, applied
    try:
        plugins.forget_added()
        fresh_python_workers(spark, n)
        for table in spark.catalog.listTables():
            if table.isTemporary:
                spark.catalog.dropTempView(table.name)
        spark.catalog.clearCache()
        os.chdir(path.resolve().parent)   # where a process of its own would have run
        return {"code": 0, "times": job_batch.answer(path, spark, request_read)}, wanted
    except Exception as exc:  # noqa: BLE001 - the job's own failure is the answer
        traceback.print_exc()
        return {"code": 1, "why": f"{type(exc).__name__}: {exc}"}, wanted


def adjust(spark, applied: dict[str, str], wanted: dict[str, str]) -> None:
    """Set `wanted`, and put back to Spark's default what `applied` set and `wanted` does not;
    Unsettable when Spark refuses either (a static setting: another session is needed)."""
    for key in sorted(applied.keys() - wanted.keys()):
        try:
            spark.conf.unset(key)
        except Exception as exc:  # noqa: BLE001 - Spark's refusal is the reason to start anew
            raise Unsettable(f"{key} was set for an earlier request and cannot be unset now: "
                             f"{str(exc).splitlines()[0]}") from None
    for key, value in sorted(wanted.items()):
        if spark.conf.get(key, None) == value:
            continue
        try:
            spark.conf.set(key, value)
        except Exception as exc:  # noqa: BLE001
            raise Unsettable(f"{key} = {value!r} cannot be set in a running session: "
                             f"{str(exc).splitlines()[0]}") from None


def fresh_python_workers(spark, n: int) -> None:
    """Python functions made from now on run in Python workers that no earlier request's task
    ran in: Spark keeps one pool of workers per environment, and this one is the request's own.
    The earlier requests' pools (their `pyspark.daemon` processes, and the workers forked from
    them) are stopped: nothing uses them again."""
    import psutil

    spark.sparkContext.environment[REQUEST_ENV] = str(n)
    me = psutil.Process()
    pools = []
    for proc in me.children(recursive=True):
        try:
            if "pyspark.daemon" in " ".join(proc.cmdline()):
                pools.append(proc)
        except psutil.Error:
            continue
    for proc in pools:
        try:
            proc.kill()
        except psutil.Error:
            continue
    psutil.wait_procs(pools, timeout=5)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
