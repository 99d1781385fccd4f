"""The batch oracle's Spark run, from the harness: the records the committed batches read, taken
from the case's recording (`<case>/records/`, workloads/recorder.py: saved while the case ran, so
nothing here reads Kafka), a request file, then the program `python -m workloads.pipelines.job_batch`
in a process of its own (the harness never runs Spark itself), with the driver's import path and a
scratch directory of its own.

    run(case_dir, ranges, runs) -> {run name: pandas DataFrame}, and the times it took

A record the committed batches read that the recording lacks (deleted before the recorder read
it, or a recording cut short) leaves the oracle without its input: RecordsMissing, which the
case's check turns into an UNKNOWN verdict naming it, never a verdict over other records.

Every path the request holds is relative to the oracle's directory, and the case's files are
found from its directory: a run directory moved elsewhere is checked again the same way
(`python -m harness check`, which writes its oracle's files under RUN_DIR/check/: `rechecking`).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from harness.check import spark_program
from harness.check.batch_oracle import server
from workloads import records
from workloads.pipelines.config import DriverConfig

ORACLE_DIR = "oracle"
RECORDS = "records.parquet"   # in the oracle's directory: the records the job runs on
TIMEOUT_S = 600.0
# up to this many records the batch oracle's JVM starts with the client compiler alone
# (harness.jvm.QUICK_JVM): its session starts in about half the time and a batch this small
# does not gain from C2; above it, a long batch does
QUICK_RECORDS = 200_000


class BatchFailed(RuntimeError):
    """The batch query failed: its log's last lines say why."""


class RecordsMissing(RuntimeError):
    """The case's recording lacks records the committed batches read: no batch run over them."""


@dataclass(frozen=True)
class Recheck:
    """`python -m harness check`: where each case's oracle writes (`out`/<case>/oracle, not the
    case's own oracle/ of the run), and where the user's code is, when not where the run had it."""

    out: Path
    imports: tuple[str, ...] = ()


_RECHECK: contextvars.ContextVar[Recheck | None] = contextvars.ContextVar("recheck", default=None)


@contextlib.contextmanager
def rechecking(out: Path, imports: tuple[str, ...] = ()) -> Iterator[None]:
    """Within: every oracle directory is under `out`, and `imports` come before the run's own."""
    token = _RECHECK.set(Recheck(Path(out), tuple(imports)))
    try:
        yield
    finally:
        _RECHECK.reset(token)


def written_dir(case_dir: Path) -> Path:
    """Where the checks of a case write their files: the case's directory; under a re-check,
    `<out>/<case>`, so that a re-check never writes over what the run left."""
    again = _RECHECK.get()
    return again.out / Path(case_dir).name if again is not None else Path(case_dir)


def oracle_dir(case_dir: Path) -> Path:
    """Where a case's oracle writes: `<case>/oracle`; under a re-check, `<out>/<case>/oracle`."""
    return written_dir(case_dir) / ORACLE_DIR


FIELDS = "late-fields"


def recorded(case_dir: Path, ranges: list[tuple[int, int, int]], out: Path) -> int:
    """The records in `ranges`, from the case's recording, to `out`/records.parquet; how many.
    Raises RecordsMissing, naming them, when the recording lacks any."""
    where = records.records_dir(case_dir)
    account = records.state(where)
    if account is None:
        raise RecordsMissing(f"the case has no recording of the records its stream read ({where} holds no "
                             f"{records.STATE}): a run made before the harness recorded them, or a "
                             "recorder that never started; the batch oracle reads no other copy")
    table, missing = records.select(where, ranges)
    if missing:
        how = "" if account.get("caught_up", True) else (
            f"; the recorder did not catch up with the topic's end when it stopped (behind: "
            f"{account.get('behind')})")
        raise RecordsMissing(f"the recording ({where}) lacks {records.describe(missing)}, which the "
                             f"committed batches read{how}: Kafka deleted them before the recorder read "
                             "them, or the recording was cut short; the batch oracle cannot run the job "
                             "over what the stream read")
    pq.write_table(table, out / RECORDS)
    return table.num_rows


def run(case_dir: Path, ranges: list[tuple[int, int, int]], runs: dict[str, pd.DataFrame | None],
        fields: tuple[pd.DataFrame, str] | None = None,
        timeout_s: float = TIMEOUT_S) -> tuple[dict[str, pd.DataFrame], dict]:
    """The job's output as a batch over `ranges`, once per run: name -> the records to leave out
    (a frame of partition, offset; None: none). With `fields` (records, DDL): also those records
    parsed with the DDL, as run FIELDS. Returns each run's output and the times."""

    out = oracle_dir(case_dir)
    out.mkdir(parents=True, exist_ok=True)
    count = recorded(case_dir, ranges, out)
    listed: list[dict] = []
    for name, drop in runs.items():
        path: str | None = None
        if drop is not None:
            path = f"{name}-drop.parquet"
            _keys(drop).to_parquet(out / path)
        listed.append({"name": name, "drop": path})
    if fields is not None:
        only = f"{FIELDS}-only.parquet"
        _keys(fields[0]).to_parquet(out / only)
        listed.append({"name": FIELDS, "only": only, "parse": fields[1]})
    config = DriverConfig.read(Path(case_dir) / "driver.json")
    again = _RECHECK.get()
    imports = [*(again.imports if again else ()), *config.import_paths]
    # relative to the request's directory: nothing recorded at run time names where a run lies
    request = {"driver": os.path.relpath(Path(case_dir) / "driver.json", out), "records": RECORDS,
               "record_count": count, "ranges": [list(r) for r in ranges], "runs": listed, "out": ".",
               "imports": imports, "jars": [j for j in config.jars if Path(j).exists()]}
    (out / "request.json").write_text(json.dumps(request, indent=2) + "\n")
    served = server.current()   # a run's cases share one session (server.py); else one each
    code, seconds = (served.run if served is not None else _own)(
        out / "request.json", out / "batch.log", imports, count <= QUICK_RECORDS, timeout_s)
    if code != 0:
        raise BatchFailed(spark_program.failed("the batch oracle", code, out / "batch.log"))
    times = json.loads((out / "batch.json").read_text())
    times["process_s"] = round(seconds, 3)
    return {str(r["name"]): pd.read_parquet(out / f"{r['name']}.parquet") for r in listed}, times


def _own(request: Path, log: Path, imports: list[str], quick: bool, timeout_s: float) -> tuple[int, float]:
    return spark_program.run("workloads.pipelines.job_batch", request, log, imports, quick=quick,
                             timeout_s=timeout_s)


def _keys(frame: pd.DataFrame) -> pd.DataFrame:
    """The (partition, offset) pairs of `frame`, typed as job_batch reads them."""
    return frame[["partition", "offset"]].astype({"partition": "int32", "offset": "int64"})
