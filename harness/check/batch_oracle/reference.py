"""`oracle = "reference"`: the same case without its faults, run first, is the expected output.

For a job the batch engine cannot mirror (non-deterministic expressions, processing-time
timeouts or timers, real-time mode), the harness runs the case twice on the same records
with the same seed: first without faults (`<case>-reference`, harness/run/reference_run.py),
then as written. The reference's sink is what the case's sink must hold, as a multiset, with
one tolerance, stated: where a record came later than its batch's watermark in either run,
the two runs may have decided differently what to drop (their batches cut the stream
elsewhere). Rows of a key with such a record (the records' `key` column, when the output has
it) that differ between the runs are tolerated, counted in the verdict and each listed in
`<case>/oracle/tolerated.parquet`; every other row must match.

A value that differs by nature from run to run (a uuid, the wall clock) cannot match either:
leave such columns out of `columns`.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from harness.check import multiset
from harness.check.batch_oracle import job_result, spark_run
from harness.check.batch_oracle.job_input import Input
from harness.check.checkpoint import read_queries
from workloads.pipelines.job import read_plan

SUFFIX = "-reference"
_CHECKPOINT = re.compile(r"checkpoint(-\d+)?")   # a query's checkpoint (at-most-once restarts fresh ones)


class NoReference(RuntimeError):
    """The reference run left nothing to compare with."""


def reference_dir(case_dir: Path) -> Path:
    return Path(case_dir).with_name(Path(case_dir).name + SUFFIX)


def check(case_dir: Path, truth: pd.DataFrame, sink: pd.DataFrame, batches, pipeline):
    """The case's sink against its reference run's (see the module's docstring)."""
    ref = reference_dir(case_dir)
    if not (ref / "sink.parquet").exists():
        raise NoReference(f"the reference run {ref.name} left no sink.parquet: read its case's log in "
                          f"{ref}")
    expected = pd.read_parquet(ref / "sink.parquet")
    late_keys = _late_keys(case_dir, truth, batches) | _late_keys(ref, *_truth_and_batches(ref))
    columns = dict(pipeline.columns)
    column = getattr(pipeline, "records_key", None)
    keep_e, keep_s, tolerated = tolerance(expected, sink, columns, column, late_keys)
    found = multiset.compare(expected[keep_e], sink[keep_s], columns)
    given = Input.of(truth, batches, read_plan(case_dir))
    out = spark_run.oracle_dir(case_dir)
    out.mkdir(parents=True, exist_ok=True)
    tolerated.to_parquet(out / "tolerated.parquet", index=False)
    found.lost_rows.to_parquet(out / "lost.parquet", index=False)
    found.extra_rows.to_parquet(out / "extra.parquet", index=False)
    (out / "oracle.json").write_text(json.dumps({
        "oracle": "reference", "reference": ref.name, "late_keys": len(late_keys),
        "tolerated": int(len(tolerated)), "expected": found.expected, "lost": found.lost,
        "duplicated": found.duplicated, "unexpected": found.unexpected}, indent=2) + "\n")
    result = job_result.of(found, given, columns, list(pipeline.key), 0)
    result.counts["tolerated"] = int(len(tolerated))
    note = f"compared with the run without faults ({ref.name})"
    if len(tolerated):
        note += (f"; {len(tolerated):,} rows of keys with a record later than its batch's watermark in "
                 "either run differed and were tolerated (listed in oracle/tolerated.parquet)")
    return replace(result, notes=(note,))


def tolerance(expected: pd.DataFrame, sink: pd.DataFrame, columns: dict[str, str], column: str | None,
              late_keys: set[str]) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    """Which rows of each side to compare, and the tolerated ones: rows whose `column` (the
    records' key) is one of `late_keys` and that differ between the two sides."""
    if column is None or column not in columns or not late_keys:
        return np.ones(len(expected), bool), np.ones(len(sink), bool), expected.iloc[:0].assign(side=[])
    in_e = expected[column].astype(str).isin(late_keys).to_numpy()
    in_s = sink[column].astype(str).isin(late_keys).to_numpy()
    differ = multiset.compare(expected[in_e], sink[in_s], columns)
    names = list(columns)
    lost = set(multiset.canonical(differ.lost_rows, names, columns))
    extra = set(multiset.canonical(differ.extra_rows, names, columns))
    drop_e = in_e & multiset.canonical(expected, names, columns).isin(lost).to_numpy()
    drop_s = in_s & multiset.canonical(sink, names, columns).isin(extra).to_numpy()
    tolerated = pd.concat([differ.lost_rows[names].assign(side="reference"),
                           differ.extra_rows[names].assign(side="this run")], ignore_index=True)
    return ~drop_e, ~drop_s, tolerated


def _late_keys(case_dir: Path, truth: pd.DataFrame, batches) -> set[str]:
    given = Input.of(truth, batches, read_plan(case_dir))
    return set(given.late_records["key"].astype(str)) if "key" in given.read else set()


def _truth_and_batches(case_dir: Path):
    from workloads.generator import truth as truth_mod
    from workloads.pipelines.config import DriverConfig

    topic = DriverConfig.read(case_dir / "driver.json").topic
    found = [p for p in case_dir.iterdir() if p.is_dir() and _CHECKPOINT.fullmatch(p.name)]
    checkpoints = sorted(found, key=lambda p: (len(p.name), p.name))
    return truth_mod.read(case_dir / "truth"), read_queries(checkpoints, topic)


def unjudged(sink: pd.DataFrame):
    """The reference run's own result: its sink is the reference, not judged."""
    n = int(len(sink))
    counts = {"produced": n, "expected": n, "delivered": n, "lost": 0, "duplicated": 0, "unexpected": 0,
              "dropped_late": 0}
    none = pd.DataFrame(columns=["kind", "item", "expected", "actual", "batch_id"])
    return job_result.JobCheckResult(counts, np.array([]), np.array([]), [], none, unit="rows",
                          notes=("the reference run: its sink is the reference of the case with faults",))
