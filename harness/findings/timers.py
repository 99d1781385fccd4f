"""timer-fired-twice and timer-never-fired: transformWithState's event-time timers, each of which
must fire once, in the first batch whose watermark passed it (issue 49, part 2).

The timers' check (harness/check/timers.py) leaves in `<case>/timers-check/` the timers that
fired in more than one committed batch, and those the watermark passed that never fired; these
findings name the first few: the key, the timer (as an event time, in seconds from the first
event sent), the batches, and the fault before the batch that went wrong.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from harness.findings import fix, text
from harness.results.model import FaultRecord, Finding

MAX_WITNESSES = 5


def fired_twice(inputs) -> Finding | None:
    """The timers that fired in two committed batches or more, or None."""
    found, total = _read(inputs, "twice")
    if found is None:
        return None
    witnesses, clauses = [], []
    for row in found.head(MAX_WITNESSES).to_dict("records"):
        ids = [int(b) for b in row["batches"]]
        again = ids[1]
        fault = _fault_before(inputs, again)
        witnesses.append({"key": json.loads(row["key"]), "timer_ms": int(row["timer_ms"]),
                          "timer_s": _rel(inputs, row["timer_ms"]), "batches": ids,
                          "watermarks_ms": [int(w) for w in row["watermarks"]], "fault": _said(fault)})
        clauses.append(f"{_key(row['key'])}'s timer at {text.event_time(int(row['timer_ms']), inputs.t0_s)} "
                       f"fired in batch {ids[0]}, then again in batch {again}{_after(inputs, again, fault)}"
                       + (f" (and in {text.ids(ids[2:])})" if len(ids) > 2 else ""))
    more = total - len(witnesses)
    summary = f"{text.plural(total, 'timer')} fired more than once" + (f" ({more:,} not shown)" if more > 0
                                                                       else "")
    story = text.paragraph([*clauses, summary])
    return Finding(cls="timer-fired-twice", count=total, witness=witnesses,
                   faults=sorted({w["fault"] for w in witnesses if w["fault"]}),
                   story=f"{story} {fix.advice('timer-fired-twice')}".strip())


def never_fired(inputs) -> Finding | None:
    """The timers the watermark passed that no committed batch fired, or None."""
    found, total = _read(inputs, "never")
    if found is None:
        return None
    witnesses, clauses = [], []
    for row in found.head(MAX_WITNESSES).to_dict("records"):
        due = int(row["due"])
        fault = _fault_before(inputs, due)
        witnesses.append({"key": json.loads(row["key"]), "timer_ms": int(row["timer_ms"]),
                          "timer_s": _rel(inputs, row["timer_ms"]), "registered": int(row["registered"]),
                          "due": due, "fault": _said(fault)})
        clauses.append(f"{_key(row['key'])}'s timer at {text.event_time(int(row['timer_ms']), inputs.t0_s)}, "
                       f"registered in batch {int(row['registered'])}, was due in batch {due} "
                       f"(the first whose watermark passed it){_after(inputs, due, fault)}"
                       + f", and no committed batch fired it by the last watermark, "
                         f"{text.event_time(int(row['last_watermark_ms']), inputs.t0_s)}")
    more = total - len(witnesses)
    summary = f"{text.plural(total, 'timer')} never fired" + (f" ({more:,} not shown)" if more > 0 else "")
    story = text.paragraph([*clauses, summary])
    return Finding(cls="timer-never-fired", count=total, witness=witnesses,
                   faults=sorted({w["fault"] for w in witnesses if w["fault"]}),
                   story=f"{story} {fix.advice('timer-never-fired')}".strip())


def _read(inputs, which: str) -> tuple[pd.DataFrame | None, int]:
    """(the check's table of `which`, "twice" or "never", or None when empty; its total count)."""
    if not inputs.checkpoints:
        return None, 0
    from harness.check.timers import CHECK_DIR, NEVER, OUTCOME, TWICE

    directory = Path(inputs.checkpoints[0]).parent / CHECK_DIR
    path = directory / (TWICE if which == "twice" else NEVER)
    if not path.exists():
        return None, 0
    found = pd.read_parquet(path)
    if not len(found):
        return None, 0
    try:
        total = int(json.loads((directory / OUTCOME).read_text())["fired_twice" if which == "twice"
                                                                     else "never_fired"])
    except (OSError, ValueError, KeyError, TypeError):
        total = len(found)
    return found, max(total, len(found))


def _key(key_json: str) -> str:
    """failed_logins' key as its stories say it ("user 17"); another key as its values."""
    values = json.loads(key_json)
    return f"user {values[0]}" if len(values) == 1 else "key (" + ", ".join(map(str, values)) + ")"


def _rel(inputs, ms) -> float:
    return round(int(ms) / 1000.0 - inputs.t0_s, 3)


def _landed(f: FaultRecord) -> float | None:
    return f.landed_s if f.landed_s is not None else f.started_s


def _fault_before(inputs, batch: int) -> FaultRecord | None:
    """The last fault that landed before `batch` committed."""
    b = next((x for x in inputs.batches if x.batch_id == batch), None)
    committed_s = inputs.rel_s(b.committed_ms) if b is not None and b.committed_ms is not None else None
    landed = [(at, f) for f in inputs.faults if (at := _landed(f)) is not None]
    before = [(at, f) for at, f in landed if committed_s is None or at <= committed_s]
    return max(before, key=lambda pair: pair[0])[1] if before else None


def _said(fault: FaultRecord | None) -> str | None:
    """"kill-driver at 23.7 s", as the other findings name a fault."""
    return None if fault is None else f"{fault.kind} at {text.seconds(_landed(fault))}"


def _after(inputs, batch: int, fault: FaultRecord | None) -> str:
    """How `batch` stands to the fault before it: ", the first batch committed after kill-driver at
    23.7 s, which it had planned before the fault and ran again", or ", committed after ..."."""
    at = _landed(fault) if fault is not None else None
    if at is None:
        return ""
    after = [b for b in inputs.batches if b.committed and b.committed_ms is not None
             and inputs.rel_s(b.committed_ms) >= at]
    first = min(after, key=lambda b: b.committed_ms, default=None)
    b = next((x for x in inputs.batches if x.batch_id == batch), None)
    rerun = b is not None and b.planned_ms is not None and inputs.rel_s(b.planned_ms) < at
    return ((", the first batch committed after " if first is not None and first.batch_id == batch
             else ", a batch committed after ") + (_said(fault) or "")
            + (", which was planned before the fault and ran again" if rerun else ""))
