"""unexpected (a row that nothing sent explains) and wrong-value (a row whose key and
window are right and whose values are not): both are rows the sink holds, told with the
batch that wrote them and what ground truth has for their key."""

from __future__ import annotations

from harness.findings import text
from harness.findings.compose import batch_read, finding, window_text
from harness.findings.inputs import Inputs
from harness.findings.timeline import History
from harness.findings.witness import pick
from harness.results.model import Finding


def unexpected(inputs: Inputs, history: History, unit) -> Finding | None:
    count = int(inputs.checked.counts.get("unexpected") or 0)
    if count <= 0:
        return None
    records = pick(unit.unexpected())
    clauses = []
    for r in records:
        clauses += _written(history, r) + [_why_unexpected(inputs, r)]
    return finding("unexpected", count, records, history, text.paragraph(clauses),
                   causes=[r.get("_cause") for r in records])


def wrong_value(inputs: Inputs, history: History, unit) -> Finding | None:
    records = unit.wrong()
    count = unit.wrong_count or len(records)
    if count <= 0:
        return None
    records = pick(records)
    clauses = []
    for r in records:
        clauses += _written(history, r) + [_why_wrong(inputs, r)]
    return finding("wrong-value", count, records, history, text.paragraph(clauses))


def _written(history: History, r: dict) -> list[str]:
    """Which batch read what, before it wrote the row (batches told once)."""
    out = []
    for b in dict.fromkeys(w.get("batch_id", -1) for w in r.get("written_by", [])):
        f = history.batch(b) if b >= 0 else None
        if f is not None:
            out.append(batch_read(f))
    return out


def _row(inputs: Inputs, r: dict) -> str:
    bare = window_text(r, inputs.t0_s)
    what = f"a row for {bare}" if bare else f"the row {r.get('row', '')}"
    by = r.get("written_by", [])
    if not by:
        return what
    first = by[0]
    named = first.get("batch_id", -1) >= 0
    who = f"batch {first['batch_id']}" if named else "a batch the sink does not name"
    more = f" ({len(by)} copies)" if len(by) > 1 else ""
    return f"{what}{more}, written by {who} and visible at {text.seconds(first.get('committed_s'))}"


def _why_unexpected(inputs: Inputs, r: dict) -> str:
    cause, row = r.get("_cause"), _row(inputs, r)
    if cause == "never-sent" and "window" in r:
        return f"the sink holds {row}, but no event with key {r.get('key')} was ever sent"
    if cause == "never-sent":
        return f"the sink holds {row}, but no event {r.get('event_id', '')} was ever sent"
    if cause == "no-event-in-window":
        return f"the sink holds {row}, but no event of key {r.get('key')} falls in that window"
    if cause == "late":
        return (f"the sink holds {row}, but every event of that window came after the watermark that Spark "
                f"drops late rows with")
    if cause == "too-many":
        sent, got = r["expected"]["count"], (r.get("actual") or {}).get("count")
        if got and sent and got % sent == 0:
            n = got // sent
            return (f"the sink holds {row} counting {got:,} events where {sent:,} were sent: {n} times "
                    f"the count, as if the write that made it had been applied {n} times")
        counting = f"counting {got:,} events" if got else "counting more events"
        return f"the sink holds {row} {counting}, more than the {sent:,} sent in it"
    if cause == "not-expected":
        where = (f" (partition {r['partition']}, offset {r['offset']:,})" if "partition" in r else "")
        return (f"the sink holds {row}; event {r.get('event_id')} was sent{where}, but the oracle expects "
                f"no row of it")
    return f"the sink holds {row}, which the oracle did not expect ({r.get('_actual', '')})"


def _why_wrong(inputs: Inputs, r: dict) -> str:
    row = _row(inputs, r)
    if isinstance(r.get("actual"), dict):
        want, got = r["expected"], r["actual"]
        return (f"the sink holds {row} with count {got['count']:,} and sum_amount {got['sum_amount']:,}; the "
                f"{want['count']:,} events sent in it sum to {want['sum_amount']:,}")
    return (f"the sink holds {row} with {r.get('actual', '?')}, where the oracle expected "
            f"{r.get('expected', '?')}")
