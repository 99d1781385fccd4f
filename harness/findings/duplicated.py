"""duplicated: output the sink holds more than once.

Witnesses are grouped by the batches that wrote their copies. Copies from one batch id
are a replay: the batch wrote its rows, the driver died before commits/N, and the new
driver ran the batch again with the same offsets. Copies from different batches are told
batch by batch. A sink without batch_id gives only the copies' visibility times.
"""

from __future__ import annotations

from harness.findings import text
from harness.findings.compose import batch_read, commit, finding, name, sink_write, window_text
from harness.findings.history import BatchFacts, History
from harness.findings.inputs import Inputs
from harness.findings.witness import pick
from harness.results.model import Finding


def build(inputs: Inputs, history: History, unit) -> Finding | None:
    count = int(inputs.checked.counts.get("duplicated") or 0)
    if count <= 0:
        return None
    records = pick(unit.duplicated())
    clauses: list[str] = []
    told: set[int] = set()
    for r in records:
        clauses += _told(inputs, history, r, told)
    return finding("duplicated", count, records, history, text.paragraph(clauses))


def _told(inputs: Inputs, history: History, r: dict, told: set[int]) -> list[str]:
    ids = [w.get("batch_id", -1) for w in r.get("written_by", [])]
    what = _what(inputs, r)
    if ids and all(b >= 0 for b in ids) and len(set(ids)) == 1:
        b = ids[0]
        f = history.batch(b)
        if f is None:
            return [f"the sink holds {len(ids)} copies of {what}, all with batch_id {b}, which no "
                    f"checkpoint lists"]
        if b in told:
            return [f"{what} is another of the rows {name(f)} wrote more than once"]
        told.add(b)
        return _replay(history, f) + [f"{what} is one of them"]
    if ids and all(b >= 0 for b in ids):
        return _several(history, r, what)
    times = text.join(text.seconds(w.get("committed_s")) for w in r.get("written_by", []))
    return [f"the sink holds {len(r.get('written_by', []))} copies of {what}, visible at {times}; "
            f"it does not record which batch wrote each"]


def _what(inputs: Inputs, r: dict) -> str:
    bare = window_text(r, inputs.t0_s)
    if bare:
        return f"the row of {bare}"
    if "event_id" in r:
        sent = r.get("_copies_sent", 1)
        again = f", which was sent {sent} times" if sent > 1 else ""
        return f"the row of event {r['event_id']}{again}"
    return f"the row {r.get('row', '')}"


def _replay(history: History, f: BatchFacts) -> list[str]:
    """The batch wrote, the driver died before its commit, the new driver ran it again."""
    distinct, same = _copies(history, f)
    per = distinct if distinct else None
    clauses = [batch_read(f), sink_write(f, per)]
    held = history.held(f)
    if held:
        clauses.append(held)
    rerun = [run for run in f.runs if f.sink_s is None or run[1] > f.sink_s]
    rerun_s = rerun[0][1] if rerun else None
    death = history.death_between(f.sink_s, rerun_s)
    before = f.committed_s is None or (rerun_s is not None and f.committed_s >= rerun_s)
    deleted = history.commit_deleted(f)
    if death and deleted:   # killed after commits/N, which the fault then deleted
        clauses.append(f"{death}, {deleted}")
    elif death:
        clauses.append(death + (f", before commits/{f.local} was written" if before else ""))
    again = ("the same row" if per == 1 else f"the same {per:,} rows") if per and same else "its rows"
    if rerun:
        clauses.append(f"the new driver (run {rerun[0][0][:8]}) ran {name(f)} again at "
                       f"{text.seconds(rerun_s)} with the same offsets, and the sink appended {again}")
    else:
        clauses.append(f"{name(f)} ran again with the same offsets and the sink appended {again}")
    clauses.append(commit(f))
    if per and same:
        each = f"each of its {per:,} rows" if per > 1 else "its row"
        clauses.append(f"the sink holds {text.plural(f.sink_rows, 'row')} of {name(f)}: {each} "
                       f"{_times(f.sink_rows // per)}")
    elif per:
        clauses.append(f"the sink holds {text.plural(f.sink_rows, 'row')} of {name(f)}, "
                       f"{per:,} of them distinct")
    return clauses


def _copies(history: History, f: BatchFacts) -> tuple[int, bool]:
    """How many distinct rows the batch wrote, and whether every one of them is in the sink
    the same number of times (the same rows appended again)."""
    sink = history.inputs.sink
    if "batch_id" not in sink.columns:
        return 0, False
    rows = sink[sink["batch_id"] == f.id]
    cols = [c for c in rows.columns if c not in ("committed_ms", "batch_id")]
    if not len(rows) or not cols:
        return 0, False
    sizes = rows.groupby(cols, dropna=False, sort=False).size()
    return len(sizes), bool(sizes.nunique() == 1 and sizes.iloc[0] > 1)


def _several(history: History, r: dict, what: str) -> list[str]:
    """Copies written by different batches, in the order they became visible."""
    clauses = []
    previous_s = None
    unlisted: list[int] = []
    during: list[BatchFacts] = []
    for k, w in enumerate(r["written_by"]):
        f = history.batch(w["batch_id"])
        if previous_s is not None:
            death = history.death_between(previous_s, w.get("committed_s"))
            if death:
                clauses.append(death)
        wrote = f"wrote {what}" if k == 0 else "wrote it again"
        seen = f"visible at {text.seconds(w.get('committed_s'))}"
        if f is None:
            # the sink's own commit id (a time, a counter): nothing ties it to Spark's batch;
            # the batch in flight when the copy became visible is the one that wrote it
            unlisted.append(w["batch_id"])
            ran = history.in_flight(w.get("committed_s"))
            if ran is not None:
                again = " again" if any(f.id == ran.id for f in during) else ""
                seen += f", while {name(ran)} ran{again}" + (
                    f" (offsets/{ran.local} at {text.seconds(ran.planned_s)})" if not again else "")
                during.append(ran)
            clauses.append(f"the sink {wrote} under its batch id {w['batch_id']}, {seen}")
        else:
            clauses.append(f"{batch_read(f)} and {wrote}, {seen}")
        previous_s = w.get("committed_s")
    for bid in dict.fromkeys(f.id for f in during):
        clauses.append(commit(history.get(bid)))
    if unlisted:
        read = r.get("read_by_batches") or []
        by = f"; its events were read by {_batches(read)}" if read else ""
        clauses.append(f"no checkpoint lists {_ids(unlisted)}: the sink does not record Spark's "
                       f"batch id, so it cannot know a batch it already committed{by}")
    return clauses


def _ids(ids: list[int]) -> str:
    return f"batch id {ids[0]}" if len(ids) == 1 else f"batch ids {text.join(str(i) for i in ids)}"


def _batches(ids: list[int]) -> str:
    return f"batch {ids[0]}" if len(ids) == 1 else f"batches {text.join(str(i) for i in ids)}"


def _times(n: int) -> str:
    return {1: "once", 2: "twice", 3: "three times"}.get(n, f"{n} times")
