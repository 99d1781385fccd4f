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
from harness.findings.state import _fault_before
from harness.results.model import Finding

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
                          "watermarks_ms": [int(w) for w in row["watermarks"]], "fault": fault})
        clauses.append(f"{_key(row['key'])}'s timer at {text.event_time(int(row['timer_ms']), inputs.t0_s)} "
                       f"fired in batch {ids[0]}, then again in batch {again}"
                       + (f", the first batch committed after {fault}{_rerun(inputs, again, fault)}" if fault
                          else "")
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
                          "due": due, "fault": fault})
        clauses.append(f"{_key(row['key'])}'s timer at {text.event_time(int(row['timer_ms']), inputs.t0_s)}, "
                       f"registered in batch {int(row['registered'])}, was due in batch {due} "
                       f"(the first whose watermark passed it)"
                       + (f", the first batch committed after {fault}" if fault else "")
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


def _rerun(inputs, batch: int, fault: str) -> str:
    """", which the killed driver had planned and the new one ran again" when the batch's offsets
    were logged before the fault landed ("" otherwise, or when not known)."""
    b = next((x for x in inputs.batches if x.batch_id == batch), None)
    landed = [f.landed_s for f in inputs.faults if f.landed_s is not None and fault.startswith(f.kind)]
    if b is None or b.planned_ms is None or not landed:
        return ""
    planned_s = inputs.rel_s(b.planned_ms)
    return ", which it had planned before the fault and ran again" if planned_s < max(landed) else ""
