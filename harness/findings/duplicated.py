"""duplicated: output the sink holds more than once.

Witnesses are grouped by the batches that wrote their copies. Copies from one batch id
are a batch run again: the batch wrote its rows, the driver died before commits/N, and the new
driver ran the batch again with the same offsets. Copies from different batches are told
batch by batch. A sink without batch_id gives only the copies' visibility times.
"""

from __future__ import annotations

from collections import Counter

from harness.findings import text
from harness.findings.compose import batch_read, commit, finding, name, replanned, sink_write, window_text
from harness.findings.inputs import Inputs
from harness.findings.timeline import BatchFacts, History, kills_driver
from harness.findings.witness import pick
from harness.results.model import Finding


def build(inputs: Inputs, history: History, unit) -> Finding | None:
    count = int(inputs.checked.counts.get("duplicated") or 0)
    if count <= 0:
        return None
    records = pick(unit.duplicated())
    clauses: list[str] = []
    told: set[int] = set()   # the batches the story told: with a sink's own ids, the ones it inferred
    causes: list[str] = []   # what brought each record about, as fix.py names it
    for r in records:
        clauses += _told(inputs, history, r, told, causes)
    rows = getattr(unit, "duplicated_rows", None)
    if rows is not None:   # the count is of (event, window) pairs; the story tells rows
        n = rows()
        whose = "1 window's row" if n == 1 else f"{n:,} windows' rows"
        clauses.insert(0, f"the {count:,} duplicated {unit.unit} are the events that the extra copies of "
                          f"{whose} count again")
    return finding("duplicated", count, records, history, text.paragraph(clauses), batches=told,
                   causes=causes)


def _told(inputs: Inputs, history: History, r: dict, told: set[int], causes: list[str]) -> list[str]:
    """The story of one duplicated record, from what the case left behind: the batch ids the
    sink recorded, else the batch whose watermark closed the window; the driver's deaths while
    that batch was under way; when each copy became visible. What the evidence cannot tell, the
    story says it cannot; it never guesses."""
    ids = [w.get("batch_id", -1) for w in r.get("written_by", [])]
    what = _what(inputs, r)
    if ids and all(b >= 0 for b in ids) and len(set(ids)) == 1:
        f = history.batch(ids[0])
        if f is None:
            causes.append("own-ids")
            return [f"the sink holds {len(ids)} copies of {what}, all with batch_id {ids[0]}, which no "
                    f"checkpoint lists"]
        if f.id in told:
            return [f"{what} is another of the rows {name(f)} wrote more than once"]
        told.add(f.id)
        if f.earlier:   # one id over two ranges: each run wrote the rows the ranges share
            causes.append("replanned")
            return [*replanned(history, f), f"{what} is one of the rows both runs wrote"]
        causes.append("run-again" if history.deaths_within(f) else "applied-twice")
        return _one_batch(history, f, r, what, recorded=True)
    if ids and all(b >= 0 for b in ids):
        causes.append("own-ids" if any(history.batch(b) is None for b in ids) else "several")
        return _several(history, r, what)
    closer = _closed_by(inputs, history, r)
    if closer is not None:
        if closer.id in told:
            return [f"{what} is another of the rows {name(closer)} wrote more than once"]
        told.add(closer.id)
        causes.append("no-batch-id" if history.deaths_within(closer) else "applied-twice")
        return _one_batch(history, closer, r, what, recorded=False)
    causes.append("unknown")
    times = text.join(text.seconds(w.get("committed_s")) for w in r.get("written_by", []))
    return [f"the sink holds {len(r.get('written_by', []))} copies of {what}, visible at {times} by its own "
            "commit times; it does not record which batch wrote each, and nothing else tells"]
def _what(inputs: Inputs, r: dict) -> str:
    bare = window_text(r, inputs.t0_s)
    if bare:
        return f"the row of {bare}"
    if "event_id" in r:
        sent = r.get("_copies_sent", 1)
        again = f", which was sent {sent} times" if sent > 1 else ""
        return f"the row of event {r['event_id']}{again}"
    return f"the row {r.get('row', '')}"


def _closed_by(inputs: Inputs, history: History, r: dict) -> BatchFacts | None:
    """For a window's row from a sink that keeps no batch id: the batch that wrote it, the first
    whose watermark reached the window's end (append mode emits a window then, once); None when
    the record is no window, or no batch's watermark reached it."""
    window = r.get("window")
    if not window or inputs.pipeline.trigger == "real-time":
        return None
    end = int(window[1])
    closing = [f for f in history.batches.values() if f.batch.watermark_ms >= end]
    return min(closing, key=lambda f: (f.planned_s is None, f.planned_s or 0.0, f.id), default=None)


def _one_batch(history: History, f: BatchFacts, r: dict, what: str, recorded: bool) -> list[str]:
    """Copies written by one batch (`recorded`: the sink's batch_id says so; else the batch
    whose watermark closed the window): two runs of it, before and after a driver death while
    it was under way, or one run that applied its write more than once."""
    copies = [w.get("committed_s") for w in r.get("written_by", [])]
    deaths = history.deaths_within(f)
    how = "its rows in the sink carry its batch id" if recorded else (
        f"its watermark was the first to reach the window's end ({name(f)} wrote the window; the sink "
        "records no batch id)")
    if not deaths:
        known = [c for c in copies if c is not None]
        seen = _visible_at(known)
        times = _times(len(copies))
        why = [clause for fault, clause in history.explained(f) if not kills_driver(fault)]
        return [batch_read(f), how, *why, f"the driver did not die while it ran, so {name(f)} ran once, and "
                f"its one run wrote {what} {times}{seen}: a write applied {times}", commit(f)]
    return _run_again(history, f, copies, deaths, what, recorded)


def _visible_at(known: list[float]) -> str:
    """", visible at 11.3 s and 14.0 s"; copies visible at one time are named once, with how many:
    ", all visible at 11.3 s", ", visible at 11.3 s (100 times) and 14.0 s"."""
    if not known:
        return ""
    counts = Counter(text.seconds(c) for c in known)
    if len(counts) == 1 and len(known) > 1:
        return f", all visible at {next(iter(counts))}"
    return ", visible at " + text.join(t if n == 1 else f"{t} ({n} times)" for t, n in counts.items())


def _run_again(history: History, f: BatchFacts, copies: list, deaths: list, what: str,
               recorded: bool) -> list[str]:
    """The batch wrote, the driver died before commits/N, the new driver ran it again."""
    at, death = deaths[0]
    distinct, same = _copies(history, f) if recorded else (0, False)
    per = distinct if distinct else None
    clauses = [batch_read(f)]
    clauses.append(sink_write(f, per) if recorded else
                   f"its watermark was the first to reach the end of the window of {what} (the sink records "
                   "no batch id)")
    held = history.held(f)
    if held:
        clauses.append(held)
    before = [c for c in copies if c is not None and c <= at]
    after = [c for c in copies if c is not None and c > at]
    deleted = history.commit_deleted(f)
    clauses.append(f"{death}, {deleted}" if deleted else
                   death + (f", before commits/{f.local} was written" if f.committed_s is None
                            or f.committed_s > at else ""))
    rerun = [run for run in f.runs if run[1] > at]
    again = ("the same row" if per == 1 else f"the same {per:,} rows") if per and same else "its rows"
    if rerun:
        clauses.append(f"the new driver (run {rerun[0][0][:8]}) ran {name(f)} again at "
                       f"{text.seconds(rerun[0][1])} with the same offsets, and the sink appended {again}")
    else:
        clauses.append(f"{name(f)} ran again with the same offsets after it, and the sink appended {again}")
    clauses.append(commit(f))
    if recorded and per and same:
        each = f"each of its {per:,} rows" if per > 1 else "its row"
        clauses.append(f"the sink holds {text.plural(f.sink_rows, 'row')} of {name(f)}: {each} "
                       f"{_times(f.sink_rows // per)}")
    elif recorded and per:
        clauses.append(f"the sink holds {text.plural(f.sink_rows, 'row')} of {name(f)}, "
                       f"{per:,} of them distinct")
    if before and after:
        clauses.append(f"{what} is one of them: the copies came from two runs of {name(f)}, visible at "
                       f"{text.join(text.seconds(c) for c in before + after)}, before and after the driver "
                       f"died at {text.seconds(at)}")
    elif copies and all(c is not None for c in copies) and len(set(copies)) == 1:
        clauses.append(f"{what} is one of them: the copies came from two runs of {name(f)}, before and after "
                       f"the driver died at {text.seconds(at)} (the sink gives them one commit time, "
                       f"{text.seconds(copies[0])}, so it cannot tell them apart)")
    else:
        clauses.append(f"{what} is one of them")
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
