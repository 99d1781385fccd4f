"""Bugs planted in a job or a sink, for the batch oracle to catch, each beside a correct twin of
its shape that must PASS (benchmarks/test_jobs.py at 6,000 clicks, three runs; small in tox -e
e2e, tests/test_job_plants_e2e.py):

  AppendingSink           a sink that claims exactly-once and inserts a batch run again twice:
                          under a kill after its write, the batch lands twice (duplicated).
                          Its twin, SkippingSink, skips a batch id it has committed
  RecoveringUpsertSink    an upsert sink that, on recovery, re-applies its last staged batches
                          without comparing batch ids: an older batch's row goes over a newer
                          one (went-backwards), though the final table may end up right. Its
                          twin, RecoveringGuardedUpsertSink, re-applies them with the guard
  totals_in_a_variable    an applyInPandasWithState job that keeps each user's running total in
                          a Python dict instead of its state: right as a batch, where each user
                          is seen once; wrong as a stream, whose Python workers restart and
                          split the users between them (mismatch). Its twin, totals_in_state,
                          keeps the total in Spark's state (update mode, NoTimeout), both behind
                          a watermark as teams write them
The twins are correct shapes of their own: groupBy().agg() in update mode without a watermark
(clicks_per_user) and applyInPandasWithState NoTimeout behind a watermark (totals_in_state);
tests/test_job_shapes_e2e.py runs the other shapes.
and the correct jobs beside them (clicks_per_user, pages). `scenario()` writes the runs'
scenario, every plant and its twin a case of its own under one kill-driver after the sink's
write; `did_not_bite()` reads from a case's record whether that kill did what the plants need.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa

from workloads.sinks.postgres import PostgresSink
from workloads.sinks.upsert import PostgresUpsertSink

RECOVERED_BATCHES = 3
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TOTALS: dict[str, int] = {}   # the bug: per Python worker, lost with it


def clicks(rows: int) -> list[dict]:
    """`rows` clicks of the sessions example's generator (examples/my-job/make_data.py)."""
    spec = importlib.util.spec_from_file_location("sessions_data", EXAMPLES / "my-job" / "make_data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.clicks(rows)


def pages(df):
    """A stateless job: each click's user and page."""
    return df.select("user", "page", "ts")


def clicks_per_user(df):
    """An update-mode job: each user's running count of clicks."""
    from pyspark.sql import functions as F

    return df.groupBy("user").agg(F.count("*").alias("clicks"))


def _count(key, frames, state):
    user = key[0]
    for frame in frames:
        TOTALS[user] = TOTALS.get(user, 0) + len(frame)
    yield pd.DataFrame({"user": [user], "clicks": [TOTALS[user]]})


def _timed(df):
    """A watermark before the state, as teams write it to bound state (it drops no record of a
    NoTimeout state, and the drain must not wait for it: issue 47's false FAIL)."""
    from pyspark.sql import functions as F

    return df.withColumn("at", F.timestamp_millis("ts")).withWatermark("at", "20 seconds")


def totals_in_a_variable(df):
    """Each user's running count of clicks, kept in a Python dict (the bug) instead of `state`."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    return _timed(df).groupBy("user").applyInPandasWithState(_count, "user STRING, clicks LONG", "n LONG",
                                                             "update", GroupStateTimeout.NoTimeout)


def _count_in_state(key, frames, state):
    total = (state.get[0] if state.exists else 0) + sum(len(frame) for frame in frames)
    state.update((total,))
    yield pd.DataFrame({"user": [key[0]], "clicks": [total]})


def totals_in_state(df):
    """Each user's running count of clicks, kept in Spark's state: the twin of totals_in_a_variable."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    return _timed(df).groupBy("user").applyInPandasWithState(_count_in_state, "user STRING, clicks LONG",
                                                             "n LONG", "update", GroupStateTimeout.NoTimeout)


class AppendingSink(PostgresSink):
    """PostgreSQL INSERTs without the batch id check, though the case claims exactly-once."""

    skips_committed = False


class RecoveringUpsertSink(PostgresUpsertSink):
    """Stages each batch before upserting it, and on recovery (setup, in a new driver)
    re-applies the last RECOVERED_BATCHES staged batches, oldest first, with no guard."""

    guarded = False

    def setup(self) -> None:
        super().setup()
        cols = ", ".join(f'"{c}" {t}' for c, t in (("user", "text"), ("clicks", "bigint")))
        conn = self._connection()
        conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table}_staging (batch_id bigint, {cols})")
        staged = conn.execute(f"SELECT DISTINCT batch_id FROM {self.table}_staging ORDER BY batch_id DESC "
                              f"LIMIT {RECOVERED_BATCHES}").fetchall()
        for (batch_id,) in sorted(staged):
            rows = conn.execute(f'SELECT "user", clicks FROM {self.table}_staging WHERE batch_id = %s',
                                (batch_id,)).fetchall()
            self.upsert(pa.table({"user": [r[0] for r in rows], "clicks": [r[1] for r in rows]}), batch_id)

    def write_rows(self, rows, batch_id: int) -> None:
        conn = self._connection()
        with conn.transaction():
            users, clicks = rows.column("user").to_pylist(), rows.column("clicks").to_pylist()
            for user, n in zip(users, clicks, strict=True):
                conn.execute(f"INSERT INTO {self.table}_staging VALUES (%s, %s, %s)", (batch_id, user, n))
        self.upsert(rows, batch_id)


class SkippingSink(PostgresSink):
    """AppendingSink's twin: the same INSERTs, and a batch id run again that it has committed is skipped."""

    skips_committed = True


class RecoveringGuardedUpsertSink(RecoveringUpsertSink):
    """RecoveringUpsertSink's twin: the same staging and recovery, each upsert guarded by the batch
    id, so that a re-applied older batch leaves a newer row as it is."""

    guarded = True


@dataclass(frozen=True)
class Plant:
    """A planted bug and its twin: the job, its output, each one's sink, and the bug's finding."""

    bug: str
    twin: str
    job: str
    twin_job: str
    columns: str
    key: str
    mode: str
    sink: str
    twin_sink: str
    finding: str


def _custom(cls: str) -> str:
    return f'sink = "custom"\nsink_class = "job_planted:{cls}"'


_COUNTS = '{ user = "STRING", clicks = "LONG" }'
PLANTS = (
    Plant("appending-sink", "skipping-sink", "pages", "pages",
          '{ user = "STRING", page = "STRING", ts = "LONG" }', '["user", "ts"]', "append",
          _custom("AppendingSink"), _custom("SkippingSink"), "duplicated"),
    Plant("recovering-upsert", "recovering-guarded-upsert", "clicks_per_user", "clicks_per_user", _COUNTS,
          '["user"]', "update", _custom("RecoveringUpsertSink"), _custom("RecoveringGuardedUpsertSink"),
          "went-backwards"),
    Plant("total-in-a-variable", "total-in-state", "totals_in_a_variable", "totals_in_state", _COUNTS,
          '["user"]', "update", 'sink = "postgres_upsert"', 'sink = "postgres_upsert"', "mismatch"),
)
BY_NAME = {p.bug: p for p in PLANTS}

_HEAD = """
name = "planted"
imports = ["{here}", "{scenarios}"]
drain_timeout = "{drain}"
{spark}
[workload]
kind = "replay"
file = "clicks.jsonl"
event_time = "ts"
key = "user"
rate = {{ eps = {eps} }}
partitions = 2
{limits}{pipeline}
# one kill after the sink's write of the next batch with rows once three have committed: the
# batch runs again (the appending sink inserts it twice), the new driver's sink re-applies its
# staged batches (the unguarded upsert goes back), its Python workers start with no dict
[[faults]]
kind = "kill-driver"
at = "batch 3"
point = "after-write"
"""
_PIPELINE = """
[{table}]
kind = "job"
build = "job_planted:{job}"
schema = "user STRING, page STRING, ts BIGINT"
columns = {columns}
key = {key}
output_mode = "{mode}"
"""
_CASE = """
[[cases]]
name = "{name}"
guarantee = "exactly-once"
{sink}
"""


def scenario(directory: Path, rows: int, eps: int = 200, plants=PLANTS, local: bool = False,
             drain: str = "180s", duration_s: float | None = None) -> Path:
    """Write `rows` clicks and a scenario sending them at `eps` and running each plant and its twin
    as cases of their own (each with its own pipeline) into `directory`; the scenario's path.
    `local`: Spark on local[2] (the small runs in tox -e e2e). The loader wants 23 s of workload
    at least (the kill's 3 s and 20 s for the new driver to show it is back): rows / eps >= 23.
    `duration_s`: send that long, then the rest of the file only while the kill is pending (not
    come, landed, or read past: docs/scenario.md, "A workload that waits for its faults"), so
    that a slow machine still has records to send when its third batch comes, and a fast one
    sends no more than it needs."""
    (directory / "clicks.jsonl").write_text("".join(json.dumps(c) + "\n" for c in clicks(rows)))
    first = plants[0]
    limits = ("" if duration_s is None
              else f'duration = "{duration_s:g}s"\nmax_duration = "{rows / eps:g}s"\n')
    text = _HEAD.format(here=directory, scenarios=Path(__file__).parent, drain=drain, eps=eps, limits=limits,
                        spark='\n[services.spark]\nmaster = "local[2]"\n' if local else "",
                        pipeline=_PIPELINE.format(table="pipeline", job=first.job, columns=first.columns,
                                                  key=first.key, mode=first.mode))
    for p in plants:
        for name, job, sink in ((p.bug, p.job, p.sink), (p.twin, p.twin_job, p.twin_sink)):
            text += _CASE.format(name=name, sink=sink)
            text += _PIPELINE.format(table="cases.pipeline", job=job, columns=p.columns, key=p.key,
                                     mode=p.mode)
    path = directory / "planted.toml"
    path.write_text(text)
    return path


def did_not_bite(case: dict) -> str | None:
    """Why the kill-driver of a plant's case (summary.json's record) did not do what the plants
    need, or None when it did: it was killed after the sink's write of a batch with rows, once
    three batches with input had committed, a new driver ran the query again, and ran that batch
    again with its rows. (Then an appending sink has inserted it twice, a recovering sink has
    re-applied staged batches, a Python dict has started empty.)"""
    kills = [f for f in case.get("faults", []) if f["kind"] == "kill-driver"]
    if len(kills) != 1:
        return f"case {case['name']} has {len(kills)} kill-driver faults, not 1"
    (f,) = kills
    recovery = f.get("recovery") or {}
    if f.get("at_s") is None or not f["observed"]:
        return f"the kill did not come: {f.get('missed') or f.get('detail')}"
    if not f.get("landed"):
        return f"the kill missed the window after the sink's write: {f.get('landed_detail') or f['detail']}"
    if f.get("outcome") != "accepted":
        return f"no new driver ran the query: {f.get('outcome')}: {f.get('outcome_detail') or f['detail']}"
    if not recovery.get("batches_reexecuted") or not recovery.get("events_reread"):
        return (f"the new driver ran no batch with rows again (batches_reexecuted "
                f"{recovery.get('batches_reexecuted')}, events_reread {recovery.get('events_reread')}): "
                f"{f.get('detail')}")
    return None
