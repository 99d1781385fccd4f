"""Anomalies of Spark's own doing, seen beside the output:

  dropped-late-wrongly  Spark dropped more rows by its watermark than the oracle, applying
                        Spark's rule to ground truth, counts as late (Spark's way: one per
                        batch, key and window); the witnesses are events of the batches where
                        it did, on time by the oracle, whose windows came out short or not at all
  deleted-before-read   offsets Kafka deleted before the query read them (a fault's
                        more["deleted"]: [{"partition", "from", "to"}], `to` exclusive)
  refused-restart       a restart Spark refused (a fault's outcome == "refused"); the
                        story quotes Spark's sentence
  commit-without-offsets  a commits/N in the checkpoint with no offsets/N: Spark logged a
                        batch done whose offsets it never logged (async progress tracking's
                        queued writes after a failed one, SPARK-56720)
"""

from __future__ import annotations

from pathlib import Path

from faults.registry import KINDS
from harness.check.batch_reads import late_watermarks
from harness.check.checkpoint import log_files
from harness.findings import text
from harness.findings.compose import finding, name
from harness.findings.inputs import Inputs
from harness.findings.timeline import BatchFacts, History
from harness.findings.witness import pick
from harness.results.model import FaultRecord, Finding


def dropped_late_wrongly(inputs: Inputs, history: History, unit) -> Finding | None:
    """Spark's late rows above the oracle's, batch by batch; None when there are none, or when
    every batch above it was counted more than once (_counted_again)."""
    spark = judged_dropped(inputs, history)
    ours = inputs.checked.counts.get("dropped_late_spark")
    if spark is None or ours is None or spark <= ours:
        return None
    oracle = unit.late_groups()
    excess = {f.id: (f.dropped, oracle.get(f.id, 0)) for f in history.batches.values()
              if f.batch.committed and f.dropped > oracle.get(f.id, 0)}
    again = _counted_again(excess, history, unit)
    count = spark - ours - sum(s - o for b, (s, o) in excess.items() if b in again)
    excess = {b: so for b, so in excess.items() if b not in again}
    if count <= 0 or (again and not excess):
        return None
    records = pick(unit.on_time_lost(set(excess)))
    if not records:
        records = [{"batch_id": b, "spark_dropped": s, "late_by_oracle": o}
                   for b, (s, o) in sorted(excess.items())][:5]
    clauses = [f"Spark dropped {text.plural(spark, 'row')} by its watermark, where the oracle counts "
               f"{text.plural(ours, 'late row')} (Spark's way)"]
    marks = late_watermarks(inputs.batches)
    for b, (s, o) in sorted(excess.items())[:3]:
        mark = marks.get(b, 0)
        at = (f"the watermark {mark:,} (event time {text.event_time(mark, inputs.t0_s)})" if mark
              else "no watermark yet (0)")
        clauses.append(f"{name(history.get(b))} filtered late rows with {at}: Spark dropped {s:,}, the "
                       f"oracle finds {o:,} late")
    if again:
        clauses.append(text.join(f"{name(history.get(b))}'s count, {k} times the oracle's and its state rows "
                                 f"as many times, is its plan run {k} times, not rows dropped"
                                 for b, k in sorted(again.items())[:3]))
    clauses += [_on_time(inputs, history, r) for r in records if "event_id" in r]
    clauses += [p for p in inputs.checked.problems if "watermark" in p]
    return finding("dropped-late-wrongly", count, records, history, text.paragraph(clauses),
                   batches=excess)


def judged_dropped(inputs: Inputs, history: History) -> int | None:
    """Spark's late rows over the batches the oracle judged: those committed in the checkpoint,
    each once. A batch Spark ran and committed whose commits/N a fault then deleted, and that no
    driver ran again, is in Spark's progress but not among the oracle's batches: its late rows
    are left out on both sides (counted on Spark's alone, 5 of them read as 5 on-time rows
    dropped). Without progress records, Spark's total as the case recorded it."""
    if not inputs.progress:
        return inputs.spark_dropped_by_watermark
    return sum(f.dropped for f in history.batches.values() if f.batch.committed)


def _counted_again(excess: dict[int, tuple[int, int]], history: History, unit) -> dict[int, int]:
    """The batches whose counts say their plan ran k > 1 times in the run that reported them:
    batch id -> k. A second action on a foreachBatch DataFrame, or a stage Spark ran again
    after losing an executor's shuffle output, runs the stateful operator again, and Spark's
    SQL metrics add up over the runs: every count of the operator is k times what one run
    saw. So a batch counts as run again only when its late rows are k times the oracle's and
    its state rows written (numRowsUpdated) k times the (key, window) groups the oracle says
    it updated; Spark dropping on-time rows would leave fewer state rows, not more."""
    groups = unit.updated_groups()
    out = {}
    for b, (s, o) in excess.items():
        k = s // o if o > 0 and s % o == 0 else 0
        u = groups.get(b, 0)
        if k > 1 and u > 0 and history.get(b).updated == k * u:
            out[b] = k
    return out


def _on_time(inputs: Inputs, history: History, r: dict) -> str:
    f = history.get(r["read_by_batch"])
    window = ""
    if "window" in r:
        a, b = (t / 1000.0 - inputs.t0_s for t in r["window"])
        window = (f", in window {text.window(a, b)}, which ends after the watermark {name(f)} filtered late "
                  "rows with")
    return (f"event {r['event_id']} (key {r.get('key')}, partition {r.get('partition')}, offset "
            f"{r.get('offset', 0):,}) was read by {name(f)}{window}: on time, yet the sink does not count it")


def deleted_before_read(inputs: Inputs, history: History) -> Finding | None:
    deletions = [(f, d) for f in inputs.faults for d in f.details.deleted_ranges()]
    if not deletions:
        return None
    real, records, clauses, total = inputs.real, [], [], 0
    for fault, d in deletions:
        p, a, b = int(d["partition"]), int(d["from"]), int(d["to"])
        # the checker took the deleted events out of ground truth: a truth read whole has them
        inside = real[(real["partition"] == p) & (real["offset"] >= a) & (real["offset"] < b)]
        inside = inside.sort_values("offset")
        total += len(inside) or (b - a)
        if len(inside):
            records.append(_deleted_record(history, inside.iloc[0]))
        clauses.append(_deleted_story(history, fault, p, a, b))
    count = int(inputs.checked.counts.get("deleted_before_read", total))
    planned = [_planned_before(history, f, p) for f, d in deletions for p in [int(d["partition"])]]
    files = [f.file("offsets") for f in planned if f is not None]
    sources = ["delta" if (k := KINDS.get(f.kind)) is not None and k.source == "delta" else "kafka"
               for f, _ in deletions]
    return finding("deleted-before-read", count, records[:5], history, text.paragraph(clauses),
                   spans=[(f.started_s, f.ended_s) for f, _ in deletions], files=files, causes=sources)


def _deleted_record(history: History, event) -> dict:
    rb = history.read_by.loc[event.name]
    return {"event_id": int(event["event_id"]), "key": str(event["key"]),
            "partition": int(event["partition"]), "offset": int(event["offset"]),
            "read_by_batch": int(rb["planned"])}


def _planned_before(history: History, fault: FaultRecord, p: int) -> BatchFacts | None:
    """The newest batch planned before the fault: its offsets/N says how far the query meant
    to read."""
    before = [f for f in history.batches.values() if f.planned_s is not None and p in f.batch.end_offsets
              and (fault.started_s is None or f.planned_s <= fault.started_s)]
    return max(before, key=lambda f: f.planned_s or 0.0) if before else None


def _deleted_story(history: History, fault: FaultRecord, p: int, a: int, b: int) -> str:
    when = f"at {text.seconds(fault.started_s)} " if fault.started_s is not None else ""
    head = (f"{when}{fault.kind} deleted offsets {text.span(a, b - 1)} of partition {p} "
            f"({text.plural(b - a, 'record')})")
    last = _planned_before(history, fault, p)
    if last is not None:
        head += (f", beyond what {name(last)} had planned (offsets/{last.local} ends at "
                 f"{last.batch.end_offsets.get(p, 0):,})")
    said = fault.outcome_detail or ""
    if fault.outcome == "refused":
        return head + f"; Spark failed the query: \u201c{said}\u201d"
    covering = [f for f in history.batches.values()
                if (f.batch.start_offsets or {}).get(p, -1) <= a and f.batch.end_offsets.get(p, 0) >= b]
    kind = KINDS.get(fault.kind)
    gone = ("the table's files holding them were gone" if kind is not None and kind.source == "delta"
            else "Kafka no longer had them")
    after = (f"; {name(covering[0])}'s range ({covering[0].read_text()}) covered them, but {gone}"
             if covering else "; no batch read them")
    return head + (f"; {said}" if said else "") + after


def refused_restart(inputs: Inputs, history: History) -> Finding | None:
    refused = [f for f in inputs.faults if f.outcome == "refused"]
    if not refused:
        return None
    records: list[dict] = []
    clauses: list[str] = []
    batches: list[int] = []
    for fault in refused:
        at, said = fault.started_s, fault.outcome_detail or ""
        done = [f for f in history.batches.values() if f.committed_s is not None
                and (at is None or f.committed_s <= at)]
        last = max(done, key=lambda f: f.committed_s or 0.0) if done else None
        rec: dict = {"fault": fault.kind, "at_s": at, "outcome": "refused", "outcome_detail": said}
        if last is not None:
            rec["batch_id"] = last.id
            batches.append(last.id)
            clauses.append(f"{name(last)} was the last committed before it (commits/{last.local} at "
                           f"{text.seconds(last.committed_s)})")
        changed = _relative(fault.details.changed_file(), inputs.checkpoints)
        if changed:
            rec["checkpoint_file"] = changed
        records.append(rec)
        told = getattr(fault.details, "told", None)   # what the fault did to the checkpoint
        if callable(told) and (clause := told()):
            clauses.append(f"{fault.kind} at {text.seconds(at)} crashed {fault.target}, and {clause}")
            clauses.append(f"Spark refused to run the query on the new driver: \u201c{said}\u201d")
        else:
            clauses.append(f"{fault.kind} at {text.seconds(at)} ({fault.target}) restarted the driver, and "
                           f"Spark refused to run the query: \u201c{said}\u201d")
        later = [r for r in history.runs if at is not None and r.start_s > at]
        clauses.append(f"a later driver ran from {text.seconds(later[0].start_s)}" if later
                       else "no batch ran after it")
    files = [r["checkpoint_file"] for r in records if r.get("checkpoint_file")]
    return finding("refused-restart", len(refused), records[:5], history, text.paragraph(clauses),
                   batches=batches, spans=[(f.started_s, f.ended_s) for f in refused], files=files)


def commit_without_offsets(inputs: Inputs, history: History) -> Finding | None:
    """Each commits/N of the case's checkpoints with no offsets/N beside it, and the faults in
    effect when Spark wrote it."""
    records: list[dict] = []
    clauses: list[str] = []
    files: list[str] = []
    for cp in inputs.checkpoints:
        logged = {d: set(log_files(Path(cp) / d)) for d in ("offsets", "commits")}
        for n in sorted(logged["commits"] - logged["offsets"]):
            path = Path(cp) / "commits" / str(n)
            try:
                at = inputs.rel_s(path.stat().st_mtime_ns / 1e6)
            except OSError:
                at = None
            where = f"{Path(cp).name}/commits/{n}"
            records.append({"checkpoint_file": where, "batch": n, "at_s": at})
            files.append(where)
            clause = (f"{where} was written at {text.seconds(at)}, and {Path(cp).name}/offsets/{n} never "
                      f"was: Spark logged batch {n} done though it never logged the offsets it read")
            during = [f for f in inputs.faults if at is not None and f.started_s is not None
                      and f.started_s - 0.5 <= at <= (f.ended_s or f.started_s) + 1]
            if during:
                clause += "; " + text.join(f"{f.kind} at {text.seconds(f.started_s)} ({f.target}) was in "
                                           "effect" for f in during)
            clauses.append(clause)
    if not records:
        return None
    last_offsets = max((f.id for f in history.batches.values()), default=None)
    if last_offsets is not None:
        newest = name(history.batches[last_offsets])
        clauses.append(f"a restart reads the offsets log's newest batch ({newest}) against a commit log that "
                       "is ahead of it")
    return finding("commit-without-offsets", len(records), records[:5], history, text.paragraph(clauses),
                   files=files)


def _relative(path: str | None, checkpoints: list[Path]) -> str | None:
    """A checkpoint file as the case's directory names it ("checkpoint/offsets/7")."""
    if not path:
        return None
    for cp in checkpoints:
        try:
            return str(Path(path).relative_to(Path(cp).parent))
        except ValueError:
            continue
    return path
