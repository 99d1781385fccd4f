"""table-differs: a table the user's write_batch wrote (sink "foreach_batch") is not what the same
function leaves when run once over the batch answer.

The batch oracle (harness/check/batch_oracle/foreach_tables.py) leaves each table's counts and
first differences in `<case>/oracle/tables.json`; this finding names each table that differs, what
differs (keys in another final state, rows written twice, lost), and the batches write_batch was
called for more than once (the sink's <case>/tables/calls.jsonl: each call, when it ended, in
which driver, and what it raised), with the faults: how a MERGE that is not idempotent under a
batch run again, or a first table written before a second one failed, shows.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from harness.findings import text
from harness.results.model import Finding
from workloads.sinks.foreach_batch import calls

CLASS = "table-differs"
SHOWN = 3
FIX = ("To fix: make write_batch idempotent per batch id, table by table: a MERGE that sets the batch's "
       "values (not one that adds to them), or one guarded by a batch id kept in the table "
       "(whenMatchedUpdate(condition=\"t.last_batch < s.batch_id\")), Delta's txnAppId/txnVersion on an "
       "append, or the rows and the batch id in one PostgreSQL transaction that skips a batch id it holds: "
       "Spark runs a batch again, with the same id, after a failure or a restart")


def applies(inputs) -> bool:
    """Whether the case's sink was the user's write_batch (its tables hold the output)."""
    return "foreach_batch" in (getattr(inputs.sink, "attrs", None) or {})


def build(inputs) -> Finding | None:
    """The finding of a case (harness.findings.Inputs), or None when every table equals its twin."""
    if not inputs.checkpoints:
        return None
    path = Path(inputs.checkpoints[0]).parent / "oracle" / "tables.json"
    if not path.exists():
        return None
    differ = [t for t in json.loads(path.read_text())["tables"] if t.get("differs")]
    if not differ:
        return None
    made = calls(path.parent.parent)
    again = ran_again(made)
    witnesses = [{"table": t["name"], "store": t["store"], "key": t["key"], "lost": t["lost"],
                  "duplicated": t["duplicated"], "unexpected": t["unexpected"], "keys": t.get("pairs", []),
                  "batches_run_again": again} for t in differ]
    clauses = [t["sentence"] for t in differ]
    faults = [f"{f.kind} at {text.seconds(f.landed_s if f.landed_s is not None else f.started_s)}"
              for f in inputs.faults if f.started_s is not None]
    for batch_id in again[:SHOWN]:
        runs = [c for c in made if c["batch_id"] == batch_id]
        when = ", ".join(f"{text.seconds(inputs.rel_s(c['ended_ms']))} (pid {c['pid']}"
                         + (f", raised {c['error']}" if c.get("error") else "") + ")" for c in runs)
        times = "twice" if len(runs) == 2 else f"{len(runs)} times"
        clauses.append(f"write_batch ran batch {batch_id} {times}: {when}")
    if again and faults:
        clauses.append(f"the faults: {', '.join(faults)}")
    count = sum(int(t["lost"]) + int(t["duplicated"]) + int(t["unexpected"]) for t in differ)
    return Finding(cls=CLASS, count=count, witness=witnesses,
                   faults=[f.kind for f in inputs.faults if f.started_s is not None],
                   story=f"{text.paragraph(clauses)} {FIX}.")


def ran_again(made: list[dict]) -> list[int]:
    """The batch ids write_batch was called for more than once (the sink's calls.jsonl: a batch
    Spark runs again after a failure or a restart keeps its id)."""
    runs = Counter(int(c["batch_id"]) for c in made)
    return sorted(b for b, n in runs.items() if n > 1)
