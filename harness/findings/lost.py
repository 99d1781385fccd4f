"""lost: expected output the sink does not hold.

Each lost record has a cause, from the batches that read it:
  unread       no batch's range holds its offset: it fell between a query's last batch and a
               fresh query's first offsets (at-most-once), or after the last batch
  uncommitted  the batch that read it never wrote commits/N, and no later query re-read it
  state        a committed batch read it, but its window was still open when the query ended:
               a fresh query started without that state
  unwritten    a committed batch read it (and, for a window, its watermark closed it), yet the
               sink holds no row of it
  short        a window came out with a smaller count (which pairs are missing is unknown)
The story tells each query's end that a witness points to: what it had committed, its
batch that never committed, the driver's death, and where the next query started.
"""

from __future__ import annotations

from harness.findings import text
from harness.findings.compose import batch_read, finding, name, replanned, sink_write, window_text
from harness.findings.inputs import Inputs
from harness.findings.timeline import History
from harness.findings.witness import pick
from harness.results.model import Finding


def build(inputs: Inputs, history: History, unit) -> Finding | None:
    count = int(inputs.checked.counts.get("lost") or 0)
    if count <= 0:
        return None
    records = pick(unit.lost())
    story = text.paragraph(_story(inputs, history, records))
    if not story:
        story = f"The oracle counted {count:,} lost {unit.unit}; the sink holds no trace of which."
    starts = [f"{nxt[0].checkpoint}/sources/0/0" for q in _queries(history, records)
              for nxt in [history.of_query(q + 1)] if nxt]
    again = {r["read_by_batch"] for r in records if r.get("read_by_batch", -1) >= 0
             and history.get(r["read_by_batch"]).earlier}
    spans = [(fault.started_s, fault.ended_s) for b in sorted(again)
             for fault, _ in history.replanned_by(history.get(b))]
    return finding("lost", count, records, history, story, batches=_ends(history, records), files=starts,
                   spans=spans, causes=[_fix_cause(history, r) for r in records])


def _fix_cause(history: History, r: dict) -> str | None:
    """What would have kept the record, as fix.py names it: a restart on the query's own
    checkpoint (what a fresh one left unread, uncommitted or in its state), a query let run to
    the end, a sink that holds a committed batch's rows, or one that tells a batch id planned
    again over other offsets from the one it committed."""
    cause = r.get("_cause")
    f = history.batch(r["read_by_batch"]) if r.get("read_by_batch", -1) >= 0 else None
    if cause == "unwritten" and f is not None and f.earlier:
        return "replanned"
    if cause in ("unwritten", "short"):
        return "unwritten"
    if cause == "state":
        return "fresh-restart"
    if cause in ("unread", "uncommitted"):
        q = _query_of(history, r)
        return "fresh-restart" if q is not None and history.of_query(q + 1) else "ended"
    return None


def _queries(history: History, records: list[dict]) -> list[int]:
    return sorted({q for q in (_query_of(history, r) for r in records) if q is not None})


def _story(inputs: Inputs, history: History, records: list[dict]) -> list[str]:
    clauses: list[str] = []
    for q in _queries(history, records):
        clauses += _query_end(inputs, history, q)
    return clauses + [_example(inputs, history, r) for r in records]


def _query_of(history: History, r: dict) -> int | None:
    """The query whose end lost the record (None: no query's end explains it)."""
    cause = r.get("_cause")
    if cause in ("uncommitted", "state") and r.get("read_by_batch", -1) >= 0:
        return history.get(r["read_by_batch"]).batch.query
    if cause == "unread" and "partition" in r:
        p, offset = r["partition"], r["offset"]
        before = [q for q in history.queries if _planned_end(history, q).get(p, 0) <= offset]
        return max(before) if before else None
    return None


def _ends(history: History, records: list[dict]) -> list[int]:
    """The batches a query's end involves: its last committed one, those never committed,
    and the next query's first."""
    out = []
    for q in _queries(history, records):
        own = history.of_query(q)
        done = [f for f in own if f.batch.committed]
        out += ([done[-1].id] if done else []) + [f.id for f in own if not f.batch.committed]
        nxt = history.of_query(q + 1)
        out += [nxt[0].id] if nxt else []
    return out


def _planned_end(history: History, q: int) -> dict[int, int]:
    ends: dict[int, int] = {}
    for f in history.of_query(q):
        for p, o in f.batch.end_offsets.items():
            ends[p] = max(ends.get(p, 0), o)
    return ends


def _query_end(inputs: Inputs, history: History, q: int) -> list[str]:
    """What query q had done when it ended, how it ended, where the next one began."""
    own = history.of_query(q)
    done = [f for f in own if f.batch.committed]
    cp = own[0].checkpoint if own else "checkpoint"
    clauses: list[str | None] = []
    if done:
        last = done[-1]
        upto = {p: o - 1 for p, o in last.batch.end_offsets.items() if o > 0}
        which = f"{'batch' if len(done) == 1 else 'batches'} {text.ids(f.local for f in done)}"
        clauses.append(f"query {q} ({cp}/) committed {which}, which read up to {text.positions(upto)}; "
                       f"commits/{last.local} was written at {text.seconds(last.committed_s)}")
    pending = [f for f in own if not f.batch.committed]
    for f in pending:
        clauses += [batch_read(f), sink_write(f), history.held(f)]
    times = [t for f in own for t in (f.committed_s, f.sink_s, f.planned_s) if t is not None]
    start_s = _started_s(history, q + 1)
    death = history.deaths_between(max(times, default=None), start_s)
    never = text.join(f"commits/{f.local}" for f in pending)
    never = f"{never} {'was' if len(pending) == 1 else 'were'} never written" if pending else ""
    clauses.append(f"{death}, so {never}" if death and never else death or never)
    nxt = history.of_query(q + 1)
    if nxt:
        first = nxt[0]
        clauses.append(f"a new query started on a fresh checkpoint ({first.checkpoint}/) at "
                       f"{text.seconds(start_s)}, at {text.positions(first.batch.start_offsets or {})} "
                       f"({first.checkpoint}/sources/0/0)")
        gap = _gap(_planned_end(history, q), first.batch.start_offsets or {})
        if gap:
            starts, ends = {p: a for p, (a, _) in gap.items()}, {p: b for p, (_, b) in gap.items()}
            n = _events_in(inputs, gap)
            clauses.append(f"so {text.offset_ranges(starts, ends)} ({text.plural(n, 'event')}) were read "
                           f"by no batch")
    return [c for c in clauses if c]


def _started_s(history: History, q: int) -> float | None:
    own = history.of_query(q)
    times = [r.start_s for r in history.runs if r.query == q] + ([own[0].planned_s] if own else [])
    return min((t for t in times if t is not None), default=None)


def _gap(ends: dict[int, int], starts: dict[int, int]) -> dict[int, tuple[int, int]]:
    """Partition -> [from, to) that neither query read."""
    return {p: (ends.get(p, 0), s) for p, s in starts.items() if s > ends.get(p, 0)}


def _events_in(inputs: Inputs, gap: dict[int, tuple[int, int]]) -> int:
    real, n = inputs.real, 0
    for p, (a, b) in gap.items():
        n += int(((real["partition"] == p) & (real["offset"] >= a) & (real["offset"] < b)).sum())
    return n


def _example(inputs: Inputs, history: History, r: dict) -> str:
    """One witness told: where it was read, and what the sink lacks."""
    cause, t0 = r.get("_cause"), inputs.t0_s
    bare = window_text(r, t0)
    none = f"its {bare} has no row in the sink" if bare else "the sink holds no row of it"
    if "event_id" in r and "partition" in r:
        event = (f"event {r['event_id']} (key {r.get('key')}, partition {r['partition']}, "
                 f"offset {r['offset']:,})")
        if cause == "unread":
            return f"{event} is one of those no batch read, and {none}"
        f = history.get(r["read_by_batch"]) if r.get("read_by_batch", -1) >= 0 else None
        if cause == "uncommitted" and f is not None:
            return f"{event} was read by {name(f)}, which never committed; {none}"
        if cause == "state" and f is not None:
            mark = history.last_watermark(f.batch.query)
            return (f"{event} was read by {name(f)}, committed at {text.seconds(f.committed_s)}; its {bare} "
                    f"ended after query {f.batch.query}'s last watermark (event time "
                    f"{text.event_time(mark, t0)}), so it was still open in the state that died with the "
                    f"query, and no row of it is in the sink")
        if cause == "unwritten" and f is not None:
            held = (f"the sink holds {text.plural(f.sink_rows, 'row')} of that batch" if f.sink_rows
                    else "the sink holds no row of that batch at all")
            told = (f"{event} was read by {name(f)}, committed at {text.seconds(f.committed_s)}, yet {none} "
                    f"({held})")
            return "; ".join([told, *replanned(history, f)]) if f.earlier else told
    if cause == "short":
        got, by = r["actual"], r.get("written_by", [])
        who = text.join(dict.fromkeys(f"batch {w['batch_id']}" for w in by if "batch_id" in w))
        return (f"{bare} came out short: the sink's {text.plural(got['rows'], 'row')}"
                f"{' (written by ' + who + ')' if who else ''} count {got['count']:,} of the "
                f"{r['expected']['count']:,} events sent in it")
    if "row" in r:
        expected = r.get("_expected", "one")
        return f"the sink holds no row {r['row']} (expected {expected})" + _readers(history, r)
    return ""


def _readers(history: History, r: dict) -> str:
    """", though batch 0 (committed at 1.0 s) read its events" for a keyed row whose events
    are known."""
    said = []
    for b in r.get("read_by_batches", []):
        f = history.batch(b) if b >= 0 else None
        if f is None:
            said.append("no batch")
        else:
            said.append(f"{name(f)} (" + (f"committed at {text.seconds(f.committed_s)}" if f.batch.committed
                                          else "never committed") + ")")
    return f", though {text.join(said)} read its events" if said else ""
