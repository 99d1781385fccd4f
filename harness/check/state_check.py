"""The state as evidence: each stateful operator's state, read offline after the case, against
what the oracle says it must hold at that batch (issue 49, part 1).

After a case, the case's checkpoint is copied (the query has stopped; the copy is what Spark's
state data source reads, so nothing of the case's own is touched) and `python -m
workloads.pipelines.state_read` reads the state after the batches chosen here (`chosen`): the last
committed batch, and the first batch committed after each fault; and the copies made as each
fault came due, before it acted (harness/run/stages.py `state_snapshot`), after their last
committed batch (`_before`: the state the fault found). Then:

  tumbling_count (and its sliding windows)   ground truth, by Spark's rules (batch_reads.py):
        the events the batches up to N read, less those dropped as late, counted and summed
        per (key, window), for the windows batch N's watermark had not closed (Spark evicts a
        window once its end <= the watermark): every batch chosen is checked
  session_count (session_window)             the same rules as its oracle (sessions.py): per
        key and session start, the end, count and sum of the sessions the batches up to N
        opened or merged and batch N's watermark had not closed: every batch chosen is checked
  dedup (dropDuplicatesWithinWatermark)      the same rules as its oracle (dedup.py): the event
        ids the batches up to N let through, each kept with its event time plus the delay (in
        microseconds, as Spark stores it) until batch N's watermark is at or past that: every
        batch chosen is checked
  failed_logins (transformWithState)         the processor's rule as its oracle mirrors it
        (logins.py, `state_after`): each state variable (the list `pending`, the map `seen`, the
        value `raised`) and the registered timers, read one by one, against the failures the
        batches up to N accepted, less those whose timer batch N's watermark had passed (a
        firing forgets them): every batch chosen is checked
  streak_count (transformWithState, a value state with a TTL)   its processor's rule
        (streaks.py, `state_after`): each user's count and its TTL's expiry (the timestamp of
        the batch that last set it + ttl), for the counts batch N's timestamp had not expired;
        a count gone before its expiry is also an early expiry (EXPIRED_EARLY, the finding
        expired-early): every batch chosen is checked
  order_payment_join (a stream-stream join)   Spark's rules (join.py, `state_after`): each
        side's buffered rows (its keyWithIndexToValue store: the row, and whether a row of the
        other side has joined it) and its rows per join key (keyToNumValues), from the rows the
        batches up to N read and did not drop as late, less those behind the side's state
        watermark (the orders' W - bound - 1, the payments' W - 1, from the join's condition and
        batch N's watermark W): every batch chosen is checked
  Nexmark's 15 stateful queries: q5, q7, q8, q12, q15-q17, q19 (their window aggregations),
        q11 (sessions), q3 and q20 (unbounded joins), q4, q6, q9, q18 (transformWithState)
        their oracles' rules (nexmark_state.py): per window and key the
        aggregates' buffers (q5's count per auction, q7's highest price, q12's count per
        bidder, q17's nine buffers per auction and day, q15's and q16's counts, q8's and q19's
        keys), for the windows batch N's watermark had not closed; q11's sessions per bidder;
        each join side's every row read by batch N, with `matched`, and its rows per key; the
        transformWithState processors' variables (Winner in q9, q4, q6; Running in q4, q6;
        Newest in q18); each operator told by its state's columns or variables, the others
        (the operator after q5's, q7's and q8's first) said unchecked
  a job whose one stateful operator is an aggregation (groupBy().agg())   the batch oracle's
        answer over every record the stream read (`<case>/oracle/with-flush.parquet`): its
        aggregate per key is what the final state must hold, for each output column that is a
        count, sum, min or max straight from the aggregation (the state's buffer is then the
        value); after a batch N mid-run, its answer over the records batches 0 to N read
        (`<case>/oracle/state-after-N.parquet`, one more run of the job in the oracle's Spark
        process, for each batch the driver read the state after: oracle.py `state_batches`);
        only when no record was late and the grouping keeps no event time (then no group is
        evicted)

What cannot be known is not guessed: a job's state at a batch mid-run that the driver did not
read (its own reader's reads come after the batch oracle has run), an operator of another
kind, a grouping behind the watermark, a case that restarted on a fresh checkpoint. Each is
said in `notes` and in summary.json's `state_check`.

    check(case_dir, pipeline, truth, batches, faults, t0_s, checkpoints) -> Outcome
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from harness.check.batch_reads import assign_batches, late_watermarks
from harness.check.checkpoint import Batch
from workloads.pipelines.state_read import CHECK_DIR, driver_batches

STATE_DIR = CHECK_DIR              # in the case's directory
DIVERGED = "diverged.parquet"      # the divergences found, for the finding (harness/findings/state.py)
EXPIRED_EARLY = "expired-early.parquet"   # of those, values with a state TTL gone before their expiry
OUTCOME = "outcome.json"           # what was checked, what not, how many diverged in all
TIMEOUT_S = 600.0
# key: the key as text ("key=k1 window_start_ms=0"); key_values: the same as JSON, for the finding
COLUMNS = ["operator", "store", "batch", "after", "key", "key_values", "column", "expected", "held"]
KEEP = 200                         # divergences kept in DIVERGED (all are counted)
# a value that a state TTL removed before its time: its expiry, the batch that set it, and the
# timestamp (batchTimestampMs) of the batch after which the state no longer held it
EARLY_COLUMNS = ["operator", "store", "batch", "after", "key", "key_values", "expires_ms", "set_batch",
                 "batch_timestamp_ms"]
AGGREGATE = "stateStoreSave"       # the state-metadata name of a streaming aggregation's operator
DEDUP = "dedupeWithinWatermark"    # dropDuplicatesWithinWatermark's
SESSIONS = "sessionWindowStateStoreSaveExec"   # a session_window aggregation's
LOGINS = "transformWithStateInPySparkExec"      # failed_logins' (PySpark's groupBy().transformWithState)
# streak_count's count, a value state with a TTL, as the state data source flattens it (the value
# nested beside its expiry) -> the model's names (harness/check/streaks.py `state_after`)
STREAK_VAR = "count"
STREAK_COLUMNS = {"key.user_id": "user_id", "value.value.n": "n", "value.ttlExpirationMs": "expires_ms"}
JOIN = "symmetricHashJoin"                       # a stream-stream join's (StreamingSymmetricHashJoinExec)
# a stream-stream join's stores per side: its buffered rows (each under its join key and an
# index, with whether a row of the other side has joined it), and how many rows each key holds
JOIN_ROWS, JOIN_COUNTS = "{side}-keyWithIndexToValue", "{side}-keyToNumValues"
# failed_logins' state variables as the state data source flattens them: file `var` -> (the
# columns read -> the model's names (harness/check/logins.py `state_after`), the key, the values)
LOGINS_VARS = {
    "pending": ({"key.user_id": "user_id", "list_element.event_time_ms": "event_time_ms",
                 "list_element.event_id": "event_id"}, ["user_id", "event_time_ms", "event_id"], ["copies"]),
    "seen": ({"key.user_id": "user_id", "user_map_key.event_id": "event_id",
              "user_map_value.event_time_ms": "event_time_ms"}, ["user_id", "event_id"], ["event_time_ms"]),
    "raised": ({"key.user_id": "user_id", "value.n": "n"}, ["user_id"], ["n"]),
    "registered-timers": ({"key.user_id": "user_id", "expiration_timestamp_ms": "expiration_timestamp_ms"},
                          ["user_id", "expiration_timestamp_ms"], ["copies"]),
}
DEDUP_KEY, DEDUP_VALUE = {"key.event_id": "event_id"}, {"value.expiresAtMicros": "expiresAtMicros"}
# tumbling_count's state: the grouping (window, key) and the aggregation buffer (count, sum)
WINDOW_KEY = {"key.key": "key", "key.window.start": "window_start_ms", "key.window.end": "window_end_ms"}
WINDOW_VALUE = {"value.count": "count", "value.sum": "sum_amount"}
# session_count's state: the key and the session's start, then the whole row (its window, the key
# again, the buffer); the window's start and the key again are the key's, so they are not compared
SESSION_KEY = {"key.key": "key", "key.sessionStartTime": "session_start_ms"}
SESSION_VALUE = {"value.session_window.end": "session_end_ms", "value.count": "count",
                 "value.sum": "sum_amount"}
SESSION_ALSO = ("value.session_window.start", "value.key")
# a buffer that is the output's value as it is (Spark's Count, Sum of a non-decimal, Min, Max)
SAME_AS_OUTPUT = ("count", "sum", "min", "max")


class ReadFailed(RuntimeError):
    """The state reader's Spark process failed: its log's last lines say why."""


@dataclass
class Outcome:
    """What the state check saw: the divergences (COLUMNS), what it checked and what not."""

    diverged: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=COLUMNS))
    count: int = 0                                   # every divergence, not only those kept
    expired_early: list[dict] = field(default_factory=list)   # EARLY_COLUMNS: TTL values gone early
    checked: list[dict] = field(default_factory=list)   # {"operator", "batch", "after", "keys"}
    notes: list[str] = field(default_factory=list)   # what could not be known, and why
    seconds: dict = field(default_factory=dict)

    def problem(self) -> str | None:
        """The verdict's problem when the state diverged; None when it held what it must."""
        if not self.count:
            return None
        first = self.diverged.iloc[0]
        return (f"the state diverged from the oracle's: {self.count:,} values (first: operator "
                f"{first['operator']}, key {first['key']}, {first['column']} after batch {first['batch']}: "
                f"held {first['held']}, expected {first['expected']})")

    def to_json(self) -> dict:
        return {"diverged": self.count, "expired_early": len(self.expired_early), "checked": self.checked,
                "notes": self.notes, "seconds": self.seconds}


# -- which case, which batches ------------------------------------------------------------------
def applies(pipeline) -> bool:
    """Whether the case's pipeline keeps state this check can judge."""
    return pipeline.kind in ("tumbling_count", "session_count", "dedup", "failed_logins",
                             "order_payment_join", "streak_count") or (
        pipeline.kind == "job" and getattr(pipeline, "oracle", "batch") == "batch") or (
        pipeline.kind == "nexmark" and not _nexmark_query(pipeline).stateless)


def _nexmark_query(pipeline):
    from workloads.pipelines import nexmark

    return nexmark.QUERIES[pipeline.params()["query"]]


FRESH_QUERY = ("not checked: the case ran its query on more than one checkpoint (a restart on a fresh "
               "one), and the oracle has no model of what a fresh query's state holds")


def unmodelled(case_dir: Path, pipeline, checkpoints) -> str | None:
    """Why the check has no model of this case's state, known before anything is read or run (a
    query restarted on a fresh checkpoint, a job whose plan is not one aggregation); None when it
    may have one. The harness asks the driver for no read then, and says this, not the case's
    length."""
    if len(checkpoints) != 1:
        return FRESH_QUERY
    if pipeline.kind == "nexmark":
        from harness.check import nexmark_state

        return nexmark_state.unmodelled(pipeline.params()["query"])
    return job_plan_unknowable(Path(case_dir)) if pipeline.kind == "job" else None


def modelled(pipeline) -> str:
    """The state-metadata name of the operator whose state the check has a model of."""
    if pipeline.kind == "nexmark" and _tws_query(pipeline):
        return LOGINS   # Winner, Running, Newest: transformWithState
    if pipeline.kind == "nexmark" and _join_query(pipeline):
        return JOIN     # q3's, q20's unbounded join
    if pipeline.kind == "nexmark" and pipeline.params()["query"] == "q11":
        return SESSIONS
    return {"dedup": DEDUP, "session_count": SESSIONS, "failed_logins": LOGINS, "streak_count": LOGINS,
            "order_payment_join": JOIN}.get(pipeline.kind, AGGREGATE)


def _tws_query(pipeline) -> bool:
    from harness.check.nexmark_state import TWS_QUERIES

    return pipeline.params()["query"] in TWS_QUERIES


def _join_query(pipeline) -> bool:
    from harness.check.nexmark_state import JOINS

    return pipeline.params()["query"] in JOINS


def chosen(batches: list[Batch], faults, t0_s: float) -> dict[int, str]:
    """Batch id -> why it is read: the last committed batch ("final"), and the first batch
    committed after each fault landed ("after <kind> at <s> s")."""
    done = sorted((b for b in batches if b.committed and b.committed_ms is not None),
                  key=lambda b: b.batch_id)
    if not done:
        return {}
    out: dict[int, str] = {}
    for f in faults:
        at_s = f.landed_s if f.landed_s is not None else f.started_s
        if at_s is None:
            continue
        after = [b for b in done if b.committed_ms > (t0_s + at_s) * 1000]
        if after:
            out.setdefault(after[0].batch_id, f"after {f.kind} at {at_s:g} s")
    out.setdefault(done[-1].batch_id, "final")
    return dict(sorted(out.items()))


# -- the read -----------------------------------------------------------------------------------
def ask(control_dir: Path, case_dir: Path, checkpoint: Path, after_ms: list[float], job: bool) -> None:
    """Ask the case's driver to read the state once its query has stopped (written just before
    the harness asks it to stop; workloads/pipelines/state_read.py `serve`): the first batch
    committed after each of `after_ms` (each fault's landing, wall-clock ms) and the last (for a
    job, with its aggregates' fields). Its reads cost no JVM of their own; `read` uses them when
    they cover what `chosen` wants, and the batch oracle answers a job's mid-run batches from
    the list it read (batch_oracle/oracle.py `state_batches`)."""
    from workloads.pipelines.state_read import REQUEST

    request = {"checkpoint": str(checkpoint), "after_ms": [float(t) for t in after_ms], "last_only": False,
               "driver": str(Path(case_dir) / "driver.json") if job else None,
               "out": str(Path(case_dir) / STATE_DIR)}
    (Path(control_dir) / REQUEST).write_text(json.dumps(request, indent=2) + "\n")


def in_driver(out: Path, batch_ids: list[int]) -> tuple[dict, pd.DataFrame] | None:
    """The driver's own reads in `out`, when it read every batch of `batch_ids`; else None."""
    found = kept_reads(out, batch_ids)
    return found if found is not None and found[0].get("in_driver") else None


def kept_reads(where: Path, batch_ids: list[int]) -> tuple[dict, pd.DataFrame] | None:
    """The reads a run left in `where` (its driver's or its own reader's), when they cover every
    batch of `batch_ids`: what a re-check judges again, with no Spark process; else None."""
    from workloads.pipelines.state_read import ANSWER

    try:
        answer = json.loads((where / ANSWER).read_text())
        metadata = pd.read_parquet(where / "metadata.parquet")
    except (OSError, ValueError):
        return None
    read_ = {int(f["batch"]) for f in [*answer.get("files", []), *answer.get("failed", [])]}
    if not set(batch_ids) <= (set(answer.get("batches", [])) | read_):
        return None
    return answer, metadata


def read(out: Path, checkpoint: Path, batch_ids: list[int], driver: Path | None = None,
         timeout_s: float = TIMEOUT_S, kept: Path | None = None) -> tuple[dict, pd.DataFrame, Path]:
    """The state after `batch_ids`: the reads in `kept` (a re-check's: the run's) when they cover
    them, else the case's driver's own reads when they do (`ask`), else
    workloads/pipelines/state_read.py run over a copy of `checkpoint` in `out`; returns the
    answer (state.json: files, failed reads, times), the state-metadata rows, and the directory
    the answer's files are in."""
    from harness.check import spark_program

    if kept is not None:
        done = kept_reads(kept, batch_ids)
        if done is not None:
            return (*done, kept)
    done = in_driver(out, batch_ids)
    if done is not None:
        return (*done, out)
    out.mkdir(parents=True, exist_ok=True)
    from workloads.pipelines.state_read import copy_checkpoint

    copy = copy_checkpoint(checkpoint, out / "checkpoint")
    request = {"checkpoint": copy.name, "batches": [int(b) for b in batch_ids], "out": "."}
    if driver is not None:
        request["driver"] = os.path.relpath(driver, out)
    (out / "request.json").write_text(json.dumps(request, indent=2) + "\n")
    try:
        code, seconds = spark_program.run("workloads.pipelines.state_read", out / "request.json",
                                          out / "state-read.log", timeout_s=timeout_s)
    finally:
        shutil.rmtree(copy, ignore_errors=True)   # read: the copy has served
    if code != 0:
        raise ReadFailed(spark_program.failed("the state reader", code, out / "state-read.log"))
    answer = json.loads((out / "state.json").read_text())
    answer["process_s"] = round(seconds, 3)
    return answer, pd.read_parquet(out / "metadata.parquet"), out


# -- what the state must hold ------------------------------------------------------------------
def expected_windows(truth: pd.DataFrame, batches: list[Batch], batch: int, window_ms: int,
                     slide_ms: int) -> pd.DataFrame:
    """tumbling_count's state after `batch`, by Spark's rules on ground truth: per (key,
    window_start_ms, window_end_ms), `count` and `sum_amount` of the events (the harness's
    control events too: the query reads them) that batches up to `batch` read and did not drop
    as late, for the windows whose end is past `batch`'s watermark (the others were evicted)."""
    from harness.check.windows import assign_windows

    events = truth[["key", "event_time_ms", "amount", "partition", "offset"]].copy()
    events["key"] = events["key"].astype(str)
    events["batch"] = assign_batches(events, batches).to_numpy()
    events = events[(events["batch"] >= 0) & (events["batch"] <= batch)]
    pairs = assign_windows(events, window_ms, slide_ms)
    marks = late_watermarks(batches)
    late_wm = pairs["batch"].map(marks).fillna(-1).astype(np.int64)
    pairs = pairs[pairs["window_end_ms"] > late_wm]   # Spark drops a row whose window ended (batch_reads.py)
    evict_wm = {b.batch_id: b.watermark_ms for b in batches}.get(batch, -1)
    pairs = pairs[pairs["window_end_ms"] > evict_wm]
    grouped = pairs.groupby(["key", "window_start_ms", "window_end_ms"], observed=True)
    return grouped.agg(count=("amount", "size"), sum_amount=("amount", "sum")).reset_index()


def compare(expected: pd.DataFrame, held: pd.DataFrame, key: list[str], values: list[str]) -> pd.DataFrame:
    """Each (key, column) whose value the state holds otherwise than expected, a key the state
    lacks (held None) and a key it should not hold (expected None): columns key, column,
    expected, held (as text)."""
    both = expected[[*key, *values]].merge(held[[*key, *values]], on=key, how="outer",
                                           suffixes=("_e", "_h"), indicator=True)
    out = []
    for v in values:
        # as text, each side as _text writes it: an outer merge makes a column with a gap a float
        e = pd.Series([_text(x) for x in both[f"{v}_e"]], index=both.index, dtype=object)
        h = pd.Series([_text(x) for x in both[f"{v}_h"]], index=both.index, dtype=object)
        differs = (both["_merge"] != "both") | (e != h)
        rows = both[differs]
        out.append(pd.DataFrame({"key": _key_text(rows, key), "key_values": _key_json(rows, key), "column": v,
                                 "expected": e[differs].to_list(), "held": h[differs].to_list()}))
    found = (pd.concat(out, ignore_index=True) if out
             else pd.DataFrame(columns=["key", "key_values", "column", "expected", "held"]))
    # a key missing on one side differs in every column: say it once
    absent = found["expected"].eq("none") | found["held"].eq("none")
    return pd.concat([found[~absent], found[absent].drop_duplicates("key").assign(column="(the key)")],
                     ignore_index=True)


def _key_text(rows: pd.DataFrame, key: list[str]) -> list[str]:
    return [" ".join(f"{k}={r[k]}" for k in key) for r in rows[key].to_dict("records")]


def _key_json(rows: pd.DataFrame, key: list[str]) -> list[str]:
    return [json.dumps({k: _plain(r[k]) for k in key}) for r in rows[key].to_dict("records")]


def _plain(value):
    return value.item() if hasattr(value, "item") else value


def _text(value) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "none"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def held_state(out: Path, answer: dict, operator: int, batch: int,
               var: str | None = None, store: str = "default") -> pd.DataFrame | None:
    """The flattened state the reader wrote for (operator, store, batch), or one of a
    transformWithState operator's state variables (`var`); None when it has none."""
    for f in answer.get("files", []):
        if (f["operator"] == operator and f["batch"] == batch and f.get("var") == var
                and f.get("store", "default") == store):
            return pd.read_parquet(out / f["file"])
    return None


# -- the check ----------------------------------------------------------------------------------
def check(case_dir: Path, pipeline, truth: pd.DataFrame, batches: list[Batch], faults, t0_s: float,
          checkpoints: list[Path], wanted: dict[int, str] | None = None,
          no_reader: str | None = None) -> Outcome | None:
    """The state check of one finished case (see the module's docstring); None when its
    pipeline keeps no state this check judges. Writes `<case>/state-check/` (the reader's files,
    DIVERGED). Raises ReadFailed when the reader's Spark process failed.

    Under a re-check (`python -m harness check`), `wanted` is the batches the run checked, with
    why; the run's reads are judged again when they cover them (no Spark process; else a
    reader of its own reads the run's checkpoint, as in a run), and the files are written in the
    re-check's case directory, never over the run's.

    `no_reader` says why no reader of its own may start (the cost gate of `[measure] state_check
    = "auto"` on a short case, harness/run/collect.py): then only the batches the case's driver
    read are checked, and the others are said unchecked with it."""
    from harness.check.batch_oracle.spark_run import written_dir

    if not applies(pipeline):
        return None
    began = time.perf_counter()
    outcome = Outcome()
    if len(checkpoints) != 1:
        outcome.notes.append(FRESH_QUERY)
        return outcome
    no_model = unmodelled(case_dir, pipeline, checkpoints) if pipeline.kind == "nexmark" else None
    if no_model:
        outcome.notes.append(no_model)
        return outcome
    wanted = dict(wanted) if wanted is not None else chosen(batches, faults, t0_s)
    if not wanted:
        outcome.notes.append("not checked: no batch was committed")
        return outcome
    if not (Path(checkpoints[0]) / "state").is_dir():
        return None   # the query kept no state
    is_job = pipeline.kind == "job"
    why_not = _job_unknowable(Path(case_dir)) if is_job else _too_large(truth)
    if why_not:   # said before any Spark process starts: nothing it could read would be checked
        outcome.notes.append(why_not)
        return outcome
    if is_job:   # a batch mid-run only where the batch oracle answered up to it
        skipped = {b: why for b, why in wanted.items() if why != "final" and not _answered(case_dir, b)}
        wanted = {b: why for b, why in wanted.items() if b not in skipped}
        if skipped:
            outcome.notes.append(f"not checked mid-run ({_listed(skipped)}): the batch oracle gave no answer "
                                 "over the records up to it (the driver did not read the state there)")
    out, run = written_dir(case_dir) / STATE_DIR, Path(case_dir) / STATE_DIR
    if no_reader is not None and run == out:   # a run's check, not a re-check of the run's reads
        covered = set(driver_batches(out))
        left = {b: why for b, why in wanted.items() if b not in covered}
        wanted = {b: why for b, why in wanted.items() if b in covered}
        if left:
            outcome.notes.append(f"{no_reader} (for {_listed(left)}: the driver did not read it)")
        if not wanted:
            return outcome
    driver = Path(case_dir) / "driver.json" if is_job else None
    answer, metadata, source = read(out, checkpoints[0], sorted(wanted), driver,
                                    kept=run if run != out else None)
    if source != out:   # a re-check: nothing read now
        outcome.notes.append(f"judged again from the state the run read ({source})")
    elif answer.get("in_driver"):   # read by the case's driver at its end: no JVM of its own
        outcome.seconds = {"in_driver_s": answer.get("total_s"), "spark_session_s": 0.0}
    else:
        outcome.seconds = {"read_s": answer.get("process_s"), "spark_session_s": answer.get("session_s")}
    outcome.notes += [f"operator {f['operator']} ({f['store']}) after batch {f['batch']} not read: {f['why']}"
                      for f in answer.get("failed", [])]
    name = modelled(pipeline)
    operators = sorted(set(metadata.loc[metadata["operatorName"] == name, "operatorId"]))   # a row per store
    others = sorted(set(metadata["operatorName"]) - {name})
    if pipeline.kind == "nexmark" and not (_tws_query(pipeline) or _join_query(pipeline)):
        # the operators whose state has a model's columns; the others said
        operators, others = _nexmark_operator(source, answer, metadata, operators, sorted(wanted), pipeline,
                                              outcome)
    if others:
        outcome.notes.append(f"not checked: the state of {', '.join(others)} (no model of it here yet)")
    # q8's two aggregations, q4's and q6's Winner and Running: each modelled
    several = pipeline.kind == "nexmark" and len(operators) > 1
    if len(operators) != 1 and not several:
        whose = " whose state has a model's columns" if pipeline.kind == "nexmark" else ""
        outcome.notes.append(f"not checked: {len(operators)} {name} operators{whose} (one is modelled)")
    else:
        found = []
        for operator in (int(op) for op in operators):
            found += [_one_batch(Path(case_dir), source, answer, operator, batch, why, pipeline, truth,
                                 batches, outcome) for batch, why in wanted.items()]
            found += _before(Path(case_dir), source, answer, operator, pipeline, truth, batches, outcome)
        outcome.diverged = pd.concat([f for f in found if f is not None and len(f)] or [outcome.diverged],
                                     ignore_index=True)
    outcome.count = int(len(outcome.diverged))
    outcome.notes = list(dict.fromkeys(outcome.notes))   # a copy not read is said once, not per operator
    _count_each(outcome)
    outcome.diverged = outcome.diverged.head(KEEP)
    out.mkdir(parents=True, exist_ok=True)
    outcome.diverged.to_parquet(out / DIVERGED, index=False)
    pd.DataFrame(outcome.expired_early, columns=EARLY_COLUMNS).to_parquet(out / EXPIRED_EARLY, index=False)
    (out / OUTCOME).write_text(json.dumps(outcome.to_json(), indent=2) + "\n")
    outcome.seconds["total_s"] = round(time.perf_counter() - began, 3)
    return outcome


def _count_each(outcome: Outcome) -> None:
    """Each `checked` entry's own count of divergences ("diverged"), from all of them (DIVERGED
    keeps the first few hundred): what a story says of a read that held what it must."""
    d = outcome.diverged
    for entry in outcome.checked:
        hit = ((d["batch"] == entry["batch"]) & (d["after"] == entry["after"])
               & (d["operator"] == entry["operator"]))
        if "store" in entry:
            hit &= d["store"] == entry["store"]
        entry["diverged"] = int(hit.sum())


def _before(case_dir: Path, source: Path, main: dict, operator: int, pipeline, truth, batches,
            outcome: Outcome) -> list[pd.DataFrame | None]:
    """The state each fault found: the copy made as it came due, before it acted (harness/run/
    stages.py `state_snapshot`), read after its last committed batch (state_read.py
    `read_before`), judged as any read is. Its `checked` entry has "before": true."""
    from workloads.pipelines.state_read import ANSWER, BEFORE, FAULT

    found: list[pd.DataFrame | None] = []
    for where in sorted((source / BEFORE).glob("*/"), key=lambda p: int(p.name) if p.name.isdigit() else -1):
        try:
            fault = json.loads((where / FAULT).read_text())
            answer = json.loads((where / ANSWER).read_text())
        except (OSError, ValueError):
            error = where / "error.txt"
            said = ((error.read_text().strip().splitlines() or [""])[-1] if error.exists()
                    else "its copy was not read")
            outcome.notes.append(f"the state before fault {where.name} not read: {said[:300]}")
            continue
        batch, kind = int(fault["batch"]), fault["kind"]
        why = f"before {kind} at {float(fault['at_s']):g} s"
        if pipeline.kind == "job" and not _answered(case_dir, batch):
            outcome.notes.append(f"not checked {why} (batch {batch}): the batch oracle gave no answer over "
                                 "the records up to it")
            continue
        outcome.notes += [f"operator {f['operator']} ({f['store']}) {why} not read: {f['why']}"
                          for f in answer.get("failed", [])]
        answer.setdefault("aggregates", main.get("aggregates"))   # a job's: which field holds which output
        seen = len(outcome.checked)
        found.append(_one_batch(case_dir, where, answer, operator, batch, why, pipeline, truth, batches,
                                outcome))
        for entry in outcome.checked[seen:]:
            entry["before"] = True
    return found


def _nexmark_operator(source: Path, answer: dict, metadata: pd.DataFrame, operators: list, batches: list[int],
                     pipeline, outcome: Outcome) -> tuple[list, list[str]]:
    """Of a Nexmark query's aggregations, those modelled (nexmark_state.py): each whose state,
    at the first of `batches` it was read after, has the columns of one of the query's models,
    each model matched once; and the other operators, each named with its id. Two operators with
    one model's columns are said, and neither is judged."""
    from harness.check import nexmark_state

    query = pipeline.params()["query"]
    by_model: dict[str, list] = {}
    for op in operators:
        reads = (held_state(source, answer, int(op), b) for b in batches)
        held = next((h for h in reads if h is not None), None)
        m = nexmark_state.matching(query, held.columns) if held is not None else None
        if m is not None:
            by_model.setdefault(m.what, []).append(op)
    mine = sorted(ops[0] for ops in by_model.values() if len(ops) == 1)
    outcome.notes += [f"not checked: operators {', '.join(str(int(o)) for o in ops)} all have the columns of "
                      f"{what}" for what, ops in by_model.items() if len(ops) > 1]
    named = metadata[["operatorId", "operatorName"]].drop_duplicates()
    others = [f"operator {int(r.operatorId)} ({r.operatorName})" for r in named.itertuples()
              if r.operatorId not in mine]
    return mine, sorted(others)


def _nexmark(held: pd.DataFrame, pipeline, truth, batches, batch: int, outcome: Outcome):
    """A Nexmark query's modelled window aggregation or sessions (nexmark_state.py), by its
    state's columns."""
    from harness.check import nexmark_state

    query = pipeline.params()["query"]
    m = nexmark_state.matching(query, held.columns)
    if m is None:
        wanted = " or ".join(f"{x.what} ({sorted(x.names)})" for x in nexmark_state.models(query))
        outcome.notes.append(f"not checked: the state's columns are {sorted(held.columns)}, not those of "
                             f"{wanted or 'a modelled query'}")
        return None
    expected = m.expected(truth, batches, pipeline.params(), batch)
    return expected, m.held(held), list(m.key), list(m.values)


def _one_batch(case_dir: Path, source: Path, answer: dict, operator: int, batch: int, why: str, pipeline,
               truth, batches, outcome: Outcome) -> pd.DataFrame | None:
    if pipeline.kind == "failed_logins":
        return _logins(source, answer, operator, batch, why, pipeline, truth, batches, outcome)
    if pipeline.kind == "order_payment_join":
        return _join(source, answer, operator, batch, why, pipeline, truth, batches, outcome)
    if pipeline.kind == "streak_count":
        return _streaks(source, answer, operator, batch, why, pipeline, truth, batches, outcome)
    if pipeline.kind == "nexmark" and _tws_query(pipeline):
        return _nexmark_tws(source, answer, operator, batch, why, pipeline, truth, batches, outcome)
    if pipeline.kind == "nexmark" and _join_query(pipeline):
        return _nexmark_join(source, answer, operator, batch, why, pipeline, truth, batches, outcome)
    held = held_state(source, answer, operator, batch)
    if held is None:
        return None
    if pipeline.kind == "tumbling_count":
        mapped = _windows(held, pipeline, truth, batches, batch, outcome)
    elif pipeline.kind == "session_count":
        mapped = _sessions(held, pipeline, truth, batches, batch, outcome)
    elif pipeline.kind == "dedup":
        mapped = _dedup(held, pipeline, truth, batches, batch, outcome)
    elif pipeline.kind == "nexmark":
        mapped = _nexmark(held, pipeline, truth, batches, batch, outcome)
    else:
        mapped = _job(case_dir, answer, held, pipeline, outcome, None if why == "final" else batch)
    if mapped is None:
        return None
    expected, got, key, values = mapped
    outcome.checked.append({"operator": operator, "batch": batch, "after": why, "keys": int(len(expected)),
                            "columns": values})
    found = compare(expected, got, key, values)
    return found.assign(operator=operator, store="default", batch=batch, after=why)[COLUMNS]


def _logins(source: Path, answer: dict, operator: int, batch: int, why: str, pipeline, truth, batches,
            outcome: Outcome) -> pd.DataFrame | None:
    """failed_logins' state after `batch`, each state variable and the registered timers against
    the processor's model (harness/check/logins.py `state_after`); `store` names the variable."""
    from harness.check import logins

    params = pipeline.params()
    expected = logins.state_after(truth, batches, params["attempts"], params["within_ms"], batch)
    return _variables(source, answer, operator, batch, why, expected, LOGINS_VARS, "failed_logins'", outcome,
                      exact=True)


def _nexmark_tws(source: Path, answer: dict, operator: int, batch: int, why: str, pipeline, truth, batches,
                 outcome: Outcome) -> pd.DataFrame | None:
    """A Nexmark transformWithState operator's state after `batch`, each state variable (and
    the registered timers) against its processor's rules (nexmark_state.py): Winner's
    (`winner_state_after`; its value states hold more fields than the model compares), q4's and
    q6's Running (`running_state_after`), q18's Newest (`newest_state_after`). The processor is
    told by the variables the reader found; `store` names the variable."""
    from harness.check import nexmark_state as ns

    query = pipeline.params()["query"]
    read = {f.get("var") for f in answer.get("files", []) if f["operator"] == operator}
    if read & {"auction", "best", "pending"}:
        return _variables(source, answer, operator, batch, why, ns.winner_state_after(truth, batches, batch),
                          ns.WINNER_VARS, "Winner's", outcome, exact=False)
    if "totals" in read and query in ns.RUNNING:
        return _variables(source, answer, operator, batch, why,
                          ns.running_state_after(query, truth, batches, batch), ns.running_vars(query),
                          "Running's", outcome, exact=True)
    if "last" in read and query == "q18":
        return _variables(source, answer, operator, batch, why, ns.newest_state_after(truth, batches, batch),
                          ns.NEWEST_VARS, "Newest's", outcome, exact=True)
    found = ", ".join(sorted(str(v) for v in read)) or "none read"
    outcome.notes.append(f"not checked: operator {operator}'s state variables after batch {batch} ({found}) "
                         "are no modelled processor's")
    return None


def _variables(source: Path, answer: dict, operator: int, batch: int, why: str, expected: dict,
               variables: dict, whose: str, outcome: Outcome, exact: bool) -> pd.DataFrame | None:
    """A transformWithState operator's state variables after `batch` against the model's
    (`expected`, by variable): `variables` maps each to (the state's columns -> the model's
    names, the key, the values), a list element or timer held twice counted as copies. `exact`:
    the state has those columns and no other, else at least those."""
    found = []
    for var, (names, key, values) in variables.items():
        held = held_state(source, answer, operator, batch, var)
        if held is None:
            outcome.notes.append(f"not checked: {var} after batch {batch} was not read")
            continue
        columns = set(held.columns) - {"partition_id"}
        if (columns != set(names)) if exact else not set(names) <= columns:
            outcome.notes.append(f"not checked: {var}'s columns are {sorted(held.columns)}, not {whose} "
                                 f"{sorted(names)}")
            continue
        got = held.rename(columns=names)[list(names.values())]
        types = pd.api.types
        got = got.astype({c: "int64" for c in got.columns
                          if types.is_numeric_dtype(got[c]) and not types.is_bool_dtype(got[c])})
        if "copies" in values:
            got = got.groupby(key).size().rename("copies").reset_index()
        outcome.checked.append({"operator": operator, "store": var, "batch": batch, "after": why,
                                "keys": int(len(expected[var])), "columns": values})
        differ = compare(expected[var], got, key, values)
        found.append(differ.assign(operator=operator, store=var, batch=batch, after=why)[COLUMNS])
    return pd.concat(found, ignore_index=True) if found else None


def _streaks(source: Path, answer: dict, operator: int, batch: int, why: str, pipeline, truth, batches,
             outcome: Outcome) -> pd.DataFrame | None:
    """streak_count's count state after `batch`, each user's count and its TTL's expiry, against
    the processor's rule (harness/check/streaks.py `state_after`); a count the state lost though
    its TTL had not run out is also an early expiry (`_expired_early`)."""
    from harness.check import streaks

    held = held_state(source, answer, operator, batch, STREAK_VAR)
    if held is None:
        outcome.notes.append(f"not checked: {STREAK_VAR} after batch {batch} was not read")
        return None
    if set(held.columns) - {"partition_id"} != set(STREAK_COLUMNS):
        outcome.notes.append(f"not checked: {STREAK_VAR}'s columns are {sorted(held.columns)}, not "
                             f"streak_count's {sorted(STREAK_COLUMNS)}")
        return None
    expected = streaks.state_after(truth, batches, pipeline.params()["ttl_ms"], batch)
    got = held.rename(columns=STREAK_COLUMNS)[list(STREAK_COLUMNS.values())].astype("int64")
    values = ["n", "expires_ms"]
    outcome.checked.append({"operator": operator, "store": STREAK_VAR, "batch": batch, "after": why,
                            "keys": int(len(expected)), "columns": values})
    differ = compare(expected, got, ["user_id"], values)
    found = differ.assign(operator=operator, store=STREAK_VAR, batch=batch, after=why)[COLUMNS]
    outcome.expired_early += _expired_early(found, expected, batch, batches)
    return found


def _expired_early(differ: pd.DataFrame, expected: pd.DataFrame, batch: int, batches) -> list[dict]:
    """Of a TTL'd variable's divergences, the values the state no longer held though their TTL
    had not run out at `batch` (the model keeps a value only while its expiry is past the
    batch's timestamp): EARLY_COLUMNS rows."""
    gone = differ[(differ["held"] == "none") & (differ["expected"] != "none")]
    if not len(gone):
        return []
    by_user = expected.set_index("user_id")
    stamp = {b.batch_id: b.timestamp_ms for b in batches}.get(batch)
    out = []
    for row in gone.to_dict("records"):
        user = int(json.loads(row["key_values"])["user_id"])
        if user in by_user.index:
            out.append({**{c: row[c] for c in ("operator", "store", "batch", "after", "key", "key_values")},
                        "expires_ms": int(by_user.at[user, "expires_ms"]),
                        "set_batch": int(by_user.at[user, "set_batch"]), "batch_timestamp_ms": stamp})
    return out


def _join(source: Path, answer: dict, operator: int, batch: int, why: str, pipeline, truth, batches,
          outcome: Outcome) -> pd.DataFrame | None:
    """order_payment_join's state after `batch`: each side's buffered rows with `matched`, and
    its rows per join key, against Spark's rules (harness/check/join.py `state_after`); `store`
    names the store."""
    from harness.check import join

    expected = join.state_after(truth, batches, pipeline.params()["bound_ms"], batch)
    found = []
    for side, (_kind, _source, prefix) in join.SIDES.items():
        rows_ = expected[side]
        counts = rows_.groupby("user_id")["copies"].sum().rename("count").reset_index()
        named = join.NAMED[side]
        for store, want, names, key, values in (
                (JOIN_ROWS.format(side=side), rows_,
                 {f"value.{prefix}_user": "user_id", f"value.{prefix}_id": named["id"],
                  f"value.{prefix}_time_ms": named["time_ms"], "value.matched": "matched"},
                 ["user_id", named["id"], named["time_ms"]], ["copies", "matched"]),
                (JOIN_COUNTS.format(side=side), counts, {"key.field0": "user_id", "value.value": "count"},
                 ["user_id"], ["count"])):
            found.append(_join_store(source, answer, operator, batch, why, store, want, names, key, values,
                                     "order_payment_join's", outcome))
    found = [f for f in found if f is not None]
    return pd.concat(found, ignore_index=True) if found else None


def _join_store(source: Path, answer: dict, operator: int, batch: int, why: str, store: str,
                want: pd.DataFrame, names: dict, key: list[str], values: list[str], whose: str,
                outcome: Outcome) -> pd.DataFrame | None:
    """One store of a stream-stream join after `batch` against the model's rows (`want`): its
    columns renamed (`names`), a row buffered twice two entries under its key (`copies`)."""
    held = held_state(source, answer, operator, batch, store=store)
    if held is None:
        outcome.notes.append(f"not checked: {store} after batch {batch} was not read")
        return None
    if not set(names) <= set(held.columns):
        outcome.notes.append(f"not checked: {store}'s columns are {sorted(held.columns)}, not {whose} "
                             f"{sorted(names)}")
        return None
    got = held.rename(columns=names)
    if "copies" in values:
        got = got.groupby(key, dropna=False).agg(copies=("matched", "size"), matched=("matched", "all"))
        got = got.reset_index()
    outcome.checked.append({"operator": operator, "store": store, "batch": batch, "after": why,
                            "keys": int(len(want)), "columns": values})
    differ = compare(want, got, key, values)
    return differ.assign(operator=operator, store=store, batch=batch, after=why)[COLUMNS]


def _nexmark_join(source: Path, answer: dict, operator: int, batch: int, why: str, pipeline, truth,
                  batches, outcome: Outcome) -> pd.DataFrame | None:
    """q3's or q20's unbounded join after `batch`: each side's buffered rows with `matched`, and
    its rows per join key, against every row the side read by then (nexmark_state.py
    `join_state_after`); `store` names the store."""
    from harness.check import nexmark_state

    join = nexmark_state.JOINS[pipeline.params()["query"]]
    expected = nexmark_state.join_state_after(join, truth, batches, batch)
    found = []
    for side_name, side in join.sides.items():
        rows_names = {"key.field0": "join_key", **{f"value.{c}": c for c in side.names},
                      "value.matched": "matched"}
        for store, names, key, values in (
                (JOIN_ROWS.format(side=side_name), rows_names, ["join_key", *side.names],
                 ["copies", "matched"]),
                (JOIN_COUNTS.format(side=side_name), {"key.field0": "join_key", "value.value": "count"},
                 ["join_key"], ["count"])):
            found.append(_join_store(source, answer, operator, batch, why, store, expected[store], names, key,
                                     values, f"{join.what}'s", outcome))
    found = [f for f in found if f is not None]
    return pd.concat(found, ignore_index=True) if found else None


def _windows(held: pd.DataFrame, pipeline, truth, batches, batch: int, outcome: Outcome):
    names = {**WINDOW_KEY, **WINDOW_VALUE}
    if set(held.columns) - {"partition_id"} != set(names):
        outcome.notes.append(f"not checked: the window state's columns are {sorted(held.columns)}, not the "
                             f"built-in pipeline's {sorted(names)} (a build of the scenario's own?)")
        return None
    params = pipeline.params()
    expected = expected_windows(truth, batches, batch, params["window_ms"], params.get("slide_ms")
                                or params["window_ms"])
    got = held.rename(columns=names)
    got["key"] = got["key"].astype(str)
    return expected, got, list(WINDOW_KEY.values()), list(WINDOW_VALUE.values())


def _sessions(held: pd.DataFrame, pipeline, truth, batches, batch: int, outcome: Outcome):
    """session_count's state: per key and session start, the session's end, count and sum."""
    from harness.check import sessions

    names = {**SESSION_KEY, **SESSION_VALUE}
    if set(held.columns) - {"partition_id"} != {*names, *SESSION_ALSO}:
        outcome.notes.append(f"not checked: the session state's columns are {sorted(held.columns)}, not the "
                             f"built-in pipeline's {sorted({*names, *SESSION_ALSO})}")
        return None
    expected = sessions.state_after(truth, batches, pipeline.params()["gap_ms"], batch)
    got = held.rename(columns=names)
    got["key"] = got["key"].astype(str)
    expected["key"] = expected["key"].astype(str)
    return expected, got, list(SESSION_KEY.values()), list(SESSION_VALUE.values())


def _dedup(held: pd.DataFrame, pipeline, truth, batches, batch: int, outcome: Outcome):
    """dedup's state: the event ids kept within the watermark, each with its expiry."""
    from harness.check import dedup

    names = {**DEDUP_KEY, **DEDUP_VALUE}
    if set(held.columns) - {"partition_id"} != set(names):
        outcome.notes.append(f"not checked: the dedup state's columns are {sorted(held.columns)}, not the "
                             f"built-in pipeline's {sorted(names)}")
        return None
    expected = dedup.state_after(truth, batches, pipeline.params()["watermark_ms"], batch)
    got = held.rename(columns=names)
    return expected, got, list(DEDUP_KEY.values()), list(DEDUP_VALUE.values())


def _too_large(truth: pd.DataFrame) -> str | None:
    """A windowed count's model builds a frame of (event, window) pairs: not of a large run's."""
    from harness.check.large import LARGE_ROWS

    if len(truth) < LARGE_ROWS:
        return None
    return (f"not checked: {len(truth):,} events of ground truth, past the {LARGE_ROWS:,} the window "
            "state's model holds in memory")


def job_plan_unknowable(case_dir: Path) -> str | None:
    """Why a job's state cannot be checked, known from its plan alone (before its oracle ran)."""
    try:
        plan = json.loads((case_dir / "plan.json").read_text())
    except (OSError, ValueError):
        return "not checked: the job's plan (plan.json) was not written"
    operators = plan.get("operators") or []
    if operators != ["aggregate"]:
        return (f"not checked: the job's stateful operators are {', '.join(operators) or 'none'}; one "
                "aggregation is modelled so far")
    return None


def _job_unknowable(case_dir: Path) -> str | None:
    """Why a job's state cannot be checked, known from its files alone; None when it may be."""
    from harness.check.batch_oracle.spark_run import oracle_dir

    said_so = job_plan_unknowable(case_dir)
    if said_so:
        return said_so
    oracle = oracle_dir(case_dir)   # under a re-check, the re-check's own answer
    said = json.loads((oracle / "oracle.json").read_text()) if (oracle / "oracle.json").exists() else {}
    if said.get("mode") != "whole" or not (oracle / "with-flush.parquet").exists():
        return ("not checked: the batch oracle's answer is not over exactly the records the stream "
                f"aggregated (its mode: {said.get('mode') or 'none'}; late records change the state)")
    return None


def _answered(case_dir: Path, batch: int) -> bool:
    """Whether the batch oracle wrote its answer over the records batches 0 to `batch` read."""
    from harness.check.batch_oracle.oracle import STATE_AFTER
    from harness.check.batch_oracle.spark_run import oracle_dir

    return (oracle_dir(Path(case_dir)) / f"{STATE_AFTER}{batch}.parquet").exists()


def _job(case_dir: Path, answer: dict, held: pd.DataFrame, pipeline, outcome: Outcome,
         batch: int | None = None):
    """A job's aggregation state against the batch oracle's answer: over every record the stream
    read (the last batch), or over the records batches 0 to `batch` read (mid-run)."""
    from harness.check.batch_oracle.oracle import STATE_AFTER
    from harness.check.batch_oracle.spark_run import oracle_dir

    oracle = oracle_dir(case_dir)   # under a re-check, the re-check's own answer
    keys = [c for c in held.columns if c.startswith("key.")]
    columns = dict(pipeline.columns)
    plain = [c[4:] for c in keys if c[4:] in columns and "." not in c[4:]]
    if len(plain) != len(keys) or _evicts(case_dir, plain):
        outcome.notes.append(f"not checked: the state's key ({', '.join(keys)}) is not the output's own "
                             "columns, or holds the event time (the state evicts such groups behind the "
                             "watermark)")
        return None
    mapping = _values(answer.get("aggregates"), held, columns, outcome)
    if not mapping:
        return None
    answer_file = "with-flush.parquet" if batch is None else f"{STATE_AFTER}{batch}.parquet"
    expected = pd.read_parquet(oracle / answer_file)
    got = held.rename(columns={**{f"key.{k}": k for k in plain}, **{v: o for v, o in mapping.items()}})
    return expected, got, plain, list(mapping.values())


def _values(aggregates, held: pd.DataFrame, columns: dict, outcome: Outcome) -> dict[str, str]:
    """State value field -> the output column it must equal: an output that is one count, sum,
    min or max with a one-field buffer whose name no other buffer field shares."""
    if not isinstance(aggregates, list):
        outcome.notes.append(f"not checked: which state field holds which output is not known ({aggregates})")
        return {}
    fields = [c for c in held.columns if c.startswith("value.")]
    shared = pd.Series([b for agg in aggregates for b in agg["buffer"]]).value_counts()
    mapping = {}
    for agg in aggregates:
        one = agg["buffer"][0] if len(agg["buffer"]) == 1 else None
        if (agg["function"] in SAME_AS_OUTPUT and agg["output"] in columns and f"value.{one}" in fields
                and shared.get(one, 0) == 1):
            mapping[f"value.{one}"] = agg["output"]
    if not mapping:
        outcome.notes.append("not checked: no output column is one count, sum, min or max whose state field "
                             f"is unambiguous (the state's value: {', '.join(fields)})")
    return mapping


def _evicts(case_dir: Path, key: list[str]) -> bool:
    """Whether a grouping column is the watermark's: its groups leave the state behind it."""
    try:
        plan = json.loads((case_dir / "plan.json").read_text())
    except (OSError, ValueError):
        return True
    return any(m.get("column") in key for m in plan.get("watermarks", []))


def _listed(batches: dict[int, str]) -> str:
    return "; ".join(f"batch {b} {why}" for b, why in batches.items())
