"""A finding from its witness records and its story: the faults in effect and the
checkpoint files involved follow from the batches the records name."""

from __future__ import annotations

from collections.abc import Iterable

from harness.findings import fix, text
from harness.findings.timeline import BatchFacts, History
from harness.findings.witness import public
from harness.results.model import Finding


def batches_of(records: Iterable[dict]) -> set[int]:
    """Every batch a record names: the one that read it, the ones that wrote it (a window's
    many readers, read_by_batches, are context, not evidence)."""
    out: set[int] = set()
    for r in records:
        if r.get("read_by_batch", -1) >= 0:
            out.add(int(r["read_by_batch"]))
        out.update(int(w["batch_id"]) for w in r.get("written_by", []) if w.get("batch_id", -1) >= 0)
        if r.get("batch_id", -1) >= 0:
            out.add(int(r["batch_id"]))
    return out


def finding(cls: str, count: int, records: list[dict], history: History, story: str,
            batches: Iterable[int] = (), spans: Iterable[tuple] = (), files: Iterable[str] = (),
            causes: Iterable[str | None] = (None,)) -> Finding:
    """The Finding: its witness as plain JSON, the faults in effect over the batches the
    records and `batches` name (and over `spans`), their offsets/N and commits/N; its story
    ends with what to fix for the `causes` it told (fix.py)."""
    involved = batches_of(records) | {int(b) for b in batches}
    windows = [history.span(b) for b in sorted(involved)] + list(spans)
    listed = history.files(involved) + [f for f in files if f]
    return Finding(cls=cls, count=int(count), witness=[public(r) for r in records],
                   faults=_unique(history.faults_during(windows)), checkpoint_files=_unique(listed),
                   story=" ".join(s for s in (story, fix.advice(cls, causes)) if s))


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def batch_read(f: BatchFacts) -> str:
    """"batch 4 read offsets 1,115-1,600 of partition 0 (offsets/4 at 5.5 s)"."""
    when = f" (offsets/{f.local} at {text.seconds(f.planned_s)})" if f.planned_s is not None else ""
    return f"batch {f.local}{_of_query(f)} read {f.read_text()}{when}"


def _of_query(f: BatchFacts) -> str:
    return f" of query {f.batch.query}" if f.batch.query else ""


def name(f: BatchFacts) -> str:
    """"batch 4", or "batch 2 of query 1" for a later query's (its own numbering)."""
    return f"batch {f.local}{_of_query(f)}"


def sink_write(f: BatchFacts, rows: int | None = None) -> str:
    """"its 49 rows were committed to the sink at 6.8 s" (what the sink's batch_id says)."""
    n = f.sink_rows if rows is None else rows
    if n == 0:
        return "it wrote no row to the sink"
    when = f" at {text.seconds(f.sink_s)}" if f.sink_s is not None else ""
    return f"its {text.plural(n, 'row')} were committed to the sink{when}" if n != 1 else \
        f"its 1 row was committed to the sink{when}"


def commit(f: BatchFacts) -> str:
    if not f.batch.committed:
        return f"commits/{f.local} was never written"
    return f"commits/{f.local} was written at {text.seconds(f.committed_s)}"


def window_text(r: dict, t0_s: float) -> str | None:
    """"window [9.4 s, 11.4 s) of key k06" (event time from the first event sent)."""
    if "window" not in r:
        return None
    a, b = r["window"]
    key = f" of key {r['key']}" if "key" in r else ""
    return f"window {text.window(a / 1000.0 - t0_s, b / 1000.0 - t0_s)}{key}"


def replanned(history: History, f: BatchFacts) -> list[str]:
    """Batch `f`'s id run twice over different offsets, in time order: its first plan and commit,
    the fault that removed its offsets/N (what the fault's record says it did, else the faults in
    effect in between), its second plan, and whose rows the sink holds."""
    first_s, ends, done_s = f.earlier[0]
    start = f.batch.start_offsets or {}
    committed = f", committed at {text.seconds(done_s)}" if done_s is not None else ""
    clauses = [f"{name(f)} ran twice over different offsets: first over {text.offset_ranges(start, ends)} "
               f"(offsets/{f.local} at {text.seconds(first_s)}{committed})"]
    for fault, did in history.replanned_by(f):
        at = text.seconds(fault.started_s)
        clauses.append(f"{fault.kind} at {at} ({fault.target}): {did}" if did else
                       f"{fault.kind} at {at} ({fault.target}) was in effect before it was planned again")
    clauses.append(f"then the query planned {name(f)} again over {f.read_text()} (offsets/{f.local} at "
                   f"{text.seconds(f.planned_s)})")
    first, second = _rows_by_run(history, f)
    if first and not second:
        clauses.append(f"the sink's {text.plural(first, 'row')} of {name(f)} became visible in its first "
                       "run, none in its second: it took the second run for a batch it had committed")
    elif first and second:
        clauses.append(f"the sink holds {text.plural(first, 'row')} of {name(f)} from its first run and "
                       f"{second:,} from its second")
    return clauses


def _rows_by_run(history: History, f: BatchFacts) -> tuple[int, int]:
    """The sink's rows with batch `f`'s id, visible before and after its second plan."""
    sink = history.inputs.sink
    if "batch_id" not in sink.columns or f.planned_s is None:
        return 0, 0
    at = sink.loc[sink["batch_id"] == f.id, "committed_ms"] / 1000.0 - history.inputs.t0_s
    return int((at < f.planned_s).sum()), int((at >= f.planned_s).sum())
