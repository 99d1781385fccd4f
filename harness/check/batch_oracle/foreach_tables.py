"""The batch oracle for `sink = "foreach_batch"`: each table the user's `write_batch` wrote,
against its twin, the same function run once over the batch answer.

The stream's tables are what `write_batch(df, batch_id)` made of every batch Spark ran, the
batches it ran again included. Their twins are what it makes of the whole answer in one call
(the batch oracle's `expected`, run by workloads/sinks/foreach_twin.py in a Spark process of its
own, into another PostgreSQL schema or Delta path). A correct, idempotent function leaves the same tables
either way:
  - an appended table (no `key`): the same rows, as multisets (multiset.py): a batch appended
    twice is `duplicated`;
  - a merged table (`key`): the same final row per key: a MERGE a batch run again applied twice
    (`SET total = total + s.n`) leaves another value, a lost and an unexpected row that pair up
    on the key.
Columns in `ignore` (batch ids, write times: the run's own values) are left out.

The end-of-run flush's records are the harness's own: a stateless job writes their outputs,
so the function also runs over the answer with them ("with-flush"), and what only that twin has
is set aside in the stream's table (an appended row as often as the flush gives it; a merged
key whose row then equals that twin's). Where late records' fate is unknown (the PARTIAL
comparison) and they change the answer, which table rows they reach is the function's to say:
UNKNOWN, with the reason.

<case>/oracle/tables/<side>/<name>.parquet holds every side's rows, and
<case>/oracle/tables.json each table's counts and first differences (findings/tables.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from harness.check import multiset
from harness.check.batch_oracle.job_input import EXACT, PARTIAL, Input
from harness.check.batch_oracle.job_result import ROWS, JobCheckResult
from harness.check.batch_oracle.spark_run import BatchFailed, oracle_dir
from harness.check.result import concat, discrepancies, row_text
from harness.paths import REPO_ROOT
from workloads.sinks.foreach_batch import STREAM, Table, described

TWINS = "tables"            # <case>/oracle/tables/: every side's rows, and the twin's log
EVIDENCE = "tables.json"    # <case>/oracle/tables.json
ANSWERS = ("expected", "with-flush")
SHOWN = 5
TIMEOUT_S = 600.0


def applies(sink: pd.DataFrame) -> bool:
    """Whether the case's sink is the user's own write_batch (its read() said so)."""
    return described(sink) is not None


@dataclass(frozen=True)
class Compared:
    """One table against its twin."""

    table: Table
    found: multiset.Comparison
    columns: dict[str, str]          # the compared columns and their canonical types
    stream_rows: int | None          # None: the table does not exist
    twin_rows: int | None
    set_aside: int                   # the flush's own rows, left out

    @property
    def wrong(self) -> bool:
        f = self.found
        return bool(f.lost or f.duplicated or f.unexpected)


def check(case_dir: Path, sink: pd.DataFrame, given: Input, outputs: dict[str, pd.DataFrame],
          columns: dict[str, str]) -> JobCheckResult:
    """The tables' verdict (see the module's docstring); `outputs` are the batch oracle's runs."""
    began = time.perf_counter()
    info = described(sink) or {}
    tables = [Table.of(t) for t in info.get("tables", [])]
    if given.mode == PARTIAL and "without-late" in outputs:
        moved = multiset.compare(outputs["expected"], outputs["without-late"], columns)
        if moved.lost or moved.unexpected or moved.duplicated:
            return _undecided(given, tables, moved.lost + moved.unexpected + moved.duplicated)
    sides = run_twins(case_dir, info)
    compared = [compare(t, *(_side(case_dir, s, t.name) for s in (STREAM, *ANSWERS))) for t in tables]
    result = _result(given, compared)
    _write(case_dir, compared, sides, time.perf_counter() - began)
    return result


def run_twins(case_dir: Path, info: dict, timeout_s: float = TIMEOUT_S) -> dict:
    """Start the twin program (workloads/sinks/foreach_twin.py) in a process of its own; its
    account (twin.json) back. The harness never runs Spark itself."""
    from harness.services.spark import make_local_dirs, scratch_env

    out = oracle_dir(case_dir) / TWINS
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    request = {"driver": str(Path(case_dir) / "driver.json"), "function": info["function"],
               "sink": info["sink"], "workdir": info["workdir"], "postgres_url": info.get("postgres_url"),
               "tables": info["tables"], "out": str(out),
               "answers": {a: str(oracle_dir(case_dir) / f"{a}.parquet") for a in ANSWERS}}
    (out / "request.json").write_text(json.dumps(request, indent=2) + "\n")
    config = json.loads((Path(case_dir) / "driver.json").read_text())
    scratch = make_local_dirs()
    env = {**os.environ, **scratch_env(scratch)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [*config.get("import_paths", []), str(REPO_ROOT),
                                                      env.get("PYTHONPATH")]))
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log = out / "twin.log"
    try:
        with log.open("w") as sink:
            command = [sys.executable, "-m", "workloads.sinks.foreach_twin", str(out / "request.json")]
            proc = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=out,
                                  timeout=timeout_s, start_new_session=True, check=False)
    finally:
        for path in scratch:
            shutil.rmtree(path, ignore_errors=True)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise BatchFailed(f"write_batch's twin run ({info['function']} over the batch answer) exited with "
                          f"{proc.returncode}; the end of {log}:\n"
                          + "\n".join(f"    {line}" for line in tail))
    return json.loads((out / "twin.json").read_text())


def _side(case_dir: Path, side: str, name: str) -> pd.DataFrame | None:
    path = oracle_dir(case_dir) / TWINS / side / f"{name}.parquet"
    return pd.read_parquet(path) if path.exists() else None


# -- the comparison (pure: unit-tested) ---------------------------------------------------------
def compare(table: Table, stream: pd.DataFrame | None, twin: pd.DataFrame | None,
            with_flush: pd.DataFrame | None = None) -> Compared:
    """`stream` against `twin` (None: no such table), the rows only `with_flush` has set aside."""
    names = [c for c in _names(twin, stream, with_flush) if c not in table.ignore]
    frames = [_conformed(f, names) for f in (stream, twin, with_flush)]
    s, t, f = frames
    types = _types([x for x in (twin, stream) if x is not None], names)
    aside_s, aside_t = np.zeros(len(s), dtype=bool), np.zeros(len(t), dtype=bool)
    if with_flush is not None and table.merged:
        aside_s, aside_t = _flush_keys(s, t, f, list(table.key), names, types)
    elif with_flush is not None:
        aside_s = _flush_rows(s, t, f, names, types)
    found = multiset.compare(t[~aside_t], s[~aside_s], types)
    set_aside = aside_s
    return Compared(table, found, types, None if stream is None else len(stream),
                    None if twin is None else len(twin), int(set_aside.sum()))


def _names(*frames: pd.DataFrame | None) -> list[str]:
    out: list[str] = []
    for frame in frames:
        if frame is not None:
            out += [c for c in frame.columns if c not in out]
    return out


def _conformed(frame: pd.DataFrame | None, names: list[str]) -> pd.DataFrame:
    """The frame's `names` (a column it lacks as nulls; no table as no rows)."""
    if frame is None:
        return pd.DataFrame({n: pd.Series([], dtype=object) for n in names})
    missing = [n for n in names if n not in frame.columns]
    return frame.assign(**dict.fromkeys(missing, None))[names].reset_index(drop=True)


def _types(frames: list[pd.DataFrame], names: list[str]) -> dict[str, str]:
    """Each column's canonical kind (multiset.py) from its dtype: doubles to 12 digits."""
    out = {}
    for name in names:
        dtype = next((f[name].dtype for f in frames if name in f.columns), np.dtype(object))
        if pd.api.types.is_bool_dtype(dtype):
            out[name] = "BOOLEAN"
        elif pd.api.types.is_integer_dtype(dtype):
            out[name] = "LONG"
        elif pd.api.types.is_float_dtype(dtype):
            out[name] = "DOUBLE"
        else:
            out[name] = "STRING"
    return out


def _flush_rows(s, t, f, names, types) -> np.ndarray:
    """Appended: the stream rows that are the flush's own, as many copies as only its twin has."""
    only = multiset.compare(t, f, types).extra_rows
    if not len(only) or not len(s):
        return np.zeros(len(s), dtype=bool)
    theirs = multiset.canonical(only, names, types).value_counts()
    text = multiset.canonical(s, names, types)
    rank = text.groupby(text.to_numpy(), sort=False).cumcount().to_numpy()
    return (rank < text.map(theirs).fillna(0).to_numpy()).astype(bool)


def _flush_keys(s, t, f, key, names, types) -> tuple[np.ndarray, np.ndarray]:
    """Merged: a stream row is the flush's when its key's row differs between the twins (or only
    the flush's twin has it) and it equals the flush's twin's row; that key's row in the twin
    `t` is set aside with it. Returns both masks (stream, twin)."""
    none_s, none_t = np.zeros(len(s), dtype=bool), np.zeros(len(t), dtype=bool)
    if not len(s) or not len(f):
        return none_s, none_t
    whole_t, whole_f = (set(multiset.canonical(x, names, types)) for x in (t, f))
    moved = multiset.canonical(f, key, types)[~multiset.canonical(f, names, types).isin(whole_t)]
    s_rows = multiset.canonical(s, names, types)
    mask = (multiset.canonical(s, key, types).isin(set(moved)) & s_rows.isin(whole_f)).to_numpy()
    if not mask.any():
        return none_s, none_t
    keys = set(multiset.canonical(s[mask], key, types))
    return mask, (multiset.canonical(t, key, types).isin(keys).to_numpy() if len(t) else none_t)


# -- the result ---------------------------------------------------------------------------------
def _result(given: Input, compared: list[Compared]) -> JobCheckResult:
    real = int((~given.read["control"]).sum()) if "control" in given.read else len(given.read)
    total = {k: sum(getattr(c.found, k) for c in compared)
             for k in ("expected", "delivered", "lost", "duplicated", "unexpected")}
    counts = {"produced": real, **total, "dropped_late": int(given.late.sum()) if given.mode == EXACT else 0,
              "late_records": int(given.late.sum()), "left_out": 0,
              "tables": len(compared), "tables_differ": sum(c.wrong for c in compared)}
    problems, notes, rows = [], [], []
    for c in compared:
        if c.wrong and (c.table.merged or c.found.unexpected):
            problems.append(sentence(c))
        elif c.wrong:
            notes.append(sentence(c))
        rows.append(_discrepancies(c))
    return JobCheckResult(counts, np.array([]), np.array([]), problems, concat(rows), unit=ROWS,
                          notes=tuple(notes))


def sentence(c: Compared) -> str:
    """What differs in one table, naming it, its store and how it is compared."""
    t, f = c.table, c.found
    how = f"merged on {', '.join(t.key)}" if t.merged else "appended"
    head = f"table {t.name} ({t.store}, {how})"
    if c.stream_rows is None and c.twin_rows:
        return (f"{head}: the stream never created it; write_batch over the batch answer writes "
                f"{c.twin_rows:,} rows")
    if t.merged:
        pairs = _pairs(c)
        parts = [f"{len(pairs):,} of {f.expected:,} keys end in another state than write_batch run once "
                 f"over the batch answer leaves" + (f" ({pairs[0]})" if pairs else "")] if pairs else []
        lost, extra = f.lost - len(pairs), f.unexpected + f.duplicated - len(pairs)
        parts += [f"{lost:,} keys missing"] if lost > 0 else []
        parts += [f"{extra:,} rows of keys the batch answer does not leave"] if extra > 0 else []
        return f"{head}: " + "; ".join(parts) + ": a MERGE not idempotent under Spark's replay of a batch"
    parts = [f"{n:,} {what}" for n, what in ((f.duplicated, "rows written twice"), (f.lost, "rows lost"),
                                              (f.unexpected, "rows unexpected")) if n]
    return f"{head}: {', '.join(parts)} of {f.expected:,} that write_batch over the batch answer writes"


def _pairs(c: Compared) -> list[str]:
    """Merged: "user=u3: total=18, expected total=12", for each lost row whose key the stream
    holds with other values."""
    key = list(c.table.key)
    values = [n for n in c.columns if n not in key]
    lost, extra = c.found.lost_rows, c.found.extra_rows
    if not len(lost) or not len(extra):
        return []
    got = dict(zip(multiset.canonical(extra, key, c.columns), row_text(extra, values), strict=True))
    out = []
    for k, shown, want in zip(multiset.canonical(lost, key, c.columns), row_text(lost, key),
                              row_text(lost, values), strict=True):
        if k in got:
            out.append(f"{shown}: {got[k]}, expected {want}")
    return out


def _discrepancies(c: Compared) -> pd.DataFrame:
    key = list(c.table.key) or list(c.columns)
    values = [n for n in c.columns if n not in key]
    lost, extra = c.found.lost_rows, c.found.extra_rows
    dup, unexpected = extra[extra["extra"] == "duplicated"], extra[extra["extra"] == "unexpected"]

    def item(frame):
        return ("table=" + c.table.name + " " + row_text(frame, key)).reset_index(drop=True)

    return concat([
        discrepancies("lost", item(lost), row_text(lost, values), pd.Series(["none"] * len(lost))),
        discrepancies("duplicated", item(dup), pd.Series(["1 row"] * len(dup)), row_text(dup, values)),
        discrepancies("unexpected", item(unexpected), pd.Series(["no row"] * len(unexpected)),
                      row_text(unexpected, values))])


def _undecided(given: Input, tables: list[Table], moved: int) -> JobCheckResult:
    why = (f"late records change {moved:,} rows of the job's batch answer ({given.why}), and which rows "
           f"of write_batch's tables ({', '.join(t.name for t in tables)}) they reach is the function's to "
           "say: give the watermark a delay that keeps every record on time (python -m harness "
           "replay-preview FILE), or use oracle = \"reference\"")
    counts = dict.fromkeys(("expected", "delivered", "lost", "duplicated", "unexpected", "dropped_late"), 0)
    counts.update(produced=int(len(given.read)), late_records=int(given.late.sum()), left_out=0)
    return JobCheckResult(counts, np.array([]), np.array([]), unit=ROWS, unknowns=(why,))


def _write(case_dir: Path, compared: list[Compared], sides: dict, seconds: float) -> None:
    """<case>/oracle/tables.json: each table's counts and first differences (the finding's evidence)."""
    tables = []
    for c in compared:
        f = c.found
        tables.append({**c.table.describe(), "stream_rows": c.stream_rows, "twin_rows": c.twin_rows,
                       "set_aside": c.set_aside, "expected": f.expected, "delivered": f.delivered,
                       "lost": f.lost, "duplicated": f.duplicated, "unexpected": f.unexpected,
                       "differs": c.wrong, "sentence": sentence(c) if c.wrong else "",
                       "pairs": _pairs(c)[:SHOWN] if c.table.merged else [],
                       "places": {side: p.get(c.table.name) for side, p in sides.get("places", {}).items()}})
    (oracle_dir(case_dir) / EVIDENCE).write_text(json.dumps(
        {"tables": tables, "twin": sides.get("times", {}), "seconds": round(seconds, 3)}, indent=2) + "\n")
