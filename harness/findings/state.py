"""state-diverged: a stateful operator's state, read after a batch, is not what the oracle says
it must hold there.

The state check (harness/check/state_check.py) reads the state offline from a copy of the
checkpoint and leaves what differs in `<case>/state-check/diverged.parquet`; this finding names
the first few: the operator, the key, the batch, the value expected and the value held, the
fault before the batch, and whether the divergence had reached the sink by then, and by the end.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from harness.findings import fix, text
from harness.results.model import Finding

MAX_WITNESSES = 5


def _table(inputs, name: str) -> tuple[pd.DataFrame, Path] | None:
    """The state check's table `name` in the case's state-check directory, and its path; None
    when the check wrote none or an empty one."""
    if not inputs.checkpoints:
        return None
    from harness.check.state_check import STATE_DIR

    path = Path(inputs.checkpoints[0]).parent / STATE_DIR / name
    found = pd.read_parquet(path) if path.exists() else None
    return (found, path) if found is not None and len(found) else None


def build(inputs) -> Finding | None:
    """The finding of a case (harness.findings.Inputs), or None when its state held what it must."""
    from harness.check.state_check import DIVERGED, OUTCOME

    table = _table(inputs, DIVERGED)
    if table is None:
        return None
    found, path = table
    total = _total(path.with_name(OUTCOME), len(found))
    found = found.sort_values(["batch", "key"], kind="stable")
    witnesses, clauses = [], []
    for row in found.drop_duplicates("key").head(MAX_WITNESSES).to_dict("records"):   # a key once
        values = json.loads(row["key_values"])
        fault = _fault_before(inputs, int(row["batch"]))
        then, end = _in_sink(inputs, values, int(row["batch"]), row["column"])
        witnesses.append({"operator": int(row["operator"]), "key": row["key"], "batch": int(row["batch"]),
                          "column": row["column"], "expected": row["expected"], "held": row["held"],
                          "fault": fault, "sink_then": then, "sink_end": end})
        clauses.append(_clause({**row, "key": _shown(values, row["key"], inputs.t0_s)}, fault, then, end))
    more = total - len(witnesses)
    keys = found["key"].nunique()
    summary = (f"{text.plural(total, 'value')} of the state in all differ from the oracle's"
               + (f" ({more:,} not shown; of those kept, {text.plural(keys, 'key')})" if more > 0 else ""))
    story = text.paragraph([*clauses, *_held_before(path.with_name(OUTCOME)), summary])
    return Finding(cls="state-diverged", count=total, witness=witnesses,
                   faults=sorted({w["fault"] for w in witnesses if w["fault"]}),
                   story=f"{story} {fix.advice('state-diverged')}")


def _shown(values: dict, key: str, t0_s: float) -> str:
    """A window's key as the other stories say it ("window [10.6 s, 12.6 s) of key k00"), in
    seconds from the first event sent; any other key as the check wrote it."""
    if {"key", "window_start_ms", "window_end_ms"} <= set(values):
        return (f"window [{text.event_time(values['window_start_ms'], t0_s)}, "
                f"{text.event_time(values['window_end_ms'], t0_s)}) of key {values['key']}")
    return key


def _held_before(outcome: Path) -> list[str]:
    """What each read made before a fault saw, when it held what it must (state_check._before,
    its `checked` entry with "before" and no divergence): the state the fault found was right,
    so the divergences after it came with or after the fault."""
    try:
        checked = json.loads(outcome.read_text()).get("checked", [])
    except (OSError, ValueError):
        return []
    reads: dict[tuple[str, int], list[dict]] = {}   # a read's entries: one per store of it
    for c in checked:
        if c.get("before"):
            reads.setdefault((str(c["after"]), int(c["batch"])), []).append(c)
    said = []
    for (after, batch), entries in reads.items():
        if any(c.get("diverged") != 0 for c in entries):
            continue
        keys = text.plural(sum(int(c["keys"]) for c in entries), "key")
        stores = f" in {len(entries)} stores" if len(entries) > 1 else ""
        said.append(f"the state {after[len('before '):]} found, read after batch {batch} from the copy made "
                    f"as it came due, held what the oracle says ({keys}{stores}): the divergence came "
                    "after it")
    return said


def _total(outcome: Path, kept: int) -> int:
    """Every divergence the check counted (DIVERGED keeps the first few hundred)."""
    try:
        return max(int(json.loads(outcome.read_text())["diverged"]), kept)
    except (OSError, ValueError, KeyError, TypeError):
        return kept


def _clause(row: dict, fault: str | None, then: str, end: str) -> str:
    what = (f"held no {row['key']}" if row["held"] == "none" else
            f"held {row['key']} that the oracle says it must not hold" if row["expected"] == "none" else
            f"held {row['column']}={row['held']} for {row['key']} where the oracle says {row['expected']}")
    which = _which(row["after"], fault)
    return (f"after batch {int(row['batch'])}{which}, operator {int(row['operator'])}'s state "
            f"({row['store']}) {what}; {then}; {end}")


def _which(after: str, fault: str | None) -> str:
    """Which batch the check read, as the story says it: the first committed after a fault, or
    the last of the run (its `after`, state_check.chosen's reason), with the fault before it."""
    if str(after).startswith("after ") and fault:
        return f", the first batch committed after {fault}"
    if str(after).startswith("before "):   # state_check._before: a copy made as that fault came due
        return (f", the last committed when {str(after)[len('before '):]} came due (read from the copy "
                f"made before it acted: the state it found)")
    if after == "final":
        return ", the run's last committed batch" + (f" (the last fault before it: {fault})" if fault else "")
    return ""


def _fault_before(inputs, batch: int) -> str | None:
    """The last fault that landed before `batch` committed: "kill-driver at 12.3 s"."""
    b = next((x for x in inputs.batches if x.batch_id == batch), None)
    committed_s = inputs.rel_s(b.committed_ms) if b is not None and b.committed_ms is not None else None
    before = None
    for f in inputs.faults:
        at = f.landed_s if f.landed_s is not None else f.started_s
        if at is not None and (committed_s is None or at <= committed_s):
            before = f"{f.kind} at {text.seconds(at)}"
    return before


def _in_sink(inputs, values: dict, batch: int, column: str) -> tuple[str, str]:
    """Whether the key's divergence was in the sink when `batch` committed, and at the end."""
    sink = inputs.sink
    if sink is None or not len(sink) or any(k not in sink.columns for k in values):
        return "the sink's rows for it are not known", ""
    mask = pd.Series(True, index=sink.index)
    for k, v in values.items():
        mask &= sink[k].astype(str) == str(v)
    rows = sink[mask]
    shown = column if column in sink.columns else None
    if "batch_id" in rows.columns:
        early = rows[rows["batch_id"] <= batch]
        if not len(early):
            then = "the sink held no row for it by then: the divergence had not reached the sink yet"
        else:
            then = (f"the sink already held {len(early):,} row(s) for it by then"
                    + (f" ({shown}={early[shown].iloc[-1]})" if shown else ""))
    else:
        then = "the sink keeps no batch id: whether it held a row by then is not known"
    if not len(rows):
        end = "by the end of the run the sink held no row for it"
    else:
        last = rows.sort_values("committed_ms").iloc[-1]
        end = (f"by the end the sink held {len(rows):,} row(s) for it" + (f", the last {shown}={last[shown]}"
                                                                        if shown else ""))
    wrong = _output_check(inputs, values)
    said = f"the output check found it {wrong}" if wrong else "the output check found nothing wrong with it"
    return then, f"{end}; {said}"


def _output_check(inputs, values: dict) -> str | None:
    """The output check's discrepancy kind for the key, if it named one."""
    d = inputs.checked.discrepancies
    if not len(d):
        return None
    hit = pd.Series(True, index=d.index)
    for v in values.values():
        hit &= d["item"].astype(str).str.contains(str(v), regex=False)
    kinds = d.loc[hit, "kind"].unique().tolist()
    return " and ".join(kinds) if kinds else None


def expired_early(inputs) -> Finding | None:
    """expired-early: a value with a state TTL that the state no longer held after a batch whose
    timestamp had not reached its expiry (harness/check/state_check.py `_expired_early`); None
    when there is none. Each is a state divergence too, told here by its TTL."""
    from harness.check.state_check import EXPIRED_EARLY

    table = _table(inputs, EXPIRED_EARLY)
    if table is None:
        return None
    found = table[0]
    witnesses, clauses = [], []
    for row in found.sort_values(["batch", "key"], kind="stable").head(MAX_WITNESSES).to_dict("records"):
        fault = _fault_before(inputs, int(row["batch"]))
        early_s = (int(row["expires_ms"]) - int(row["batch_timestamp_ms"])) / 1000.0
        witnesses.append({"operator": int(row["operator"]), "store": row["store"], "key": row["key"],
                          "batch": int(row["batch"]), "set_batch": int(row["set_batch"]),
                          "expires_ms": int(row["expires_ms"]),
                          "batch_timestamp_ms": int(row["batch_timestamp_ms"]),
                          "early_s": round(early_s, 3), "fault": fault})
        batch, until = int(row["batch"]), text.seconds(int(row["expires_ms"]) / 1000.0 - inputs.t0_s)
        ran = text.seconds(int(row["batch_timestamp_ms"]) / 1000.0 - inputs.t0_s)
        clauses.append(f"after batch {batch}{_which(row['after'], fault)}, operator {int(row['operator'])}'s "
                       f"state ({row['store']}) held no value for {row['key']}, set in batch "
                       f"{int(row['set_batch'])} with a TTL that ran until {until} of processing time; batch "
                       f"{batch} ran at {ran}: {text.seconds(early_s)} early")
    more = len(found) - len(witnesses)
    summary = (f"{text.plural(len(found), 'value')} expired before their TTL"
               + (f" ({more:,} not shown)" if more > 0 else ""))
    return Finding(cls="expired-early", count=int(len(found)), witness=witnesses,
                   faults=sorted({w["fault"] for w in witnesses if w["fault"]}),
                   story=f"{text.paragraph([*clauses, summary])} {fix.advice('expired-early')}".strip())
