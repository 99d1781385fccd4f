"""went-backwards: an upsert sink wrote an older batch's row over a newer one.

The batch oracle (harness/check/upserts.py) finds them in the sink's history of writes and
leaves them in `<case>/oracle/backwards.parquet`; this finding names the first few, each
with the batch that did it, the newer batch it overwrote, the values before and after, and
when each became visible.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.check.result import plural
from harness.findings import fix, text
from harness.results.model import Finding

MAX_WITNESSES = 5


def build(inputs) -> Finding | None:
    """The finding of a case (harness.findings.Inputs), or None when nothing went backwards."""
    if not inputs.checkpoints:
        return None
    path = Path(inputs.checkpoints[0]).parent / "oracle" / "backwards.parquet"
    if not path.exists():
        return None
    back = pd.read_parquet(path)
    if not len(back):
        return None
    key = list(getattr(inputs.pipeline, "key", ()) or ())
    values = [c for c in back.columns if c.startswith("was_") and c != "was_committed_ms"]
    witnesses, clauses = [], []
    for row in back.head(MAX_WITNESSES).itertuples(index=False):
        r = row._asdict()
        shown = " ".join(f"{k}={r[k]}" for k in key)
        now = ", ".join(f"{v[4:]}={r[v[4:]]}" for v in values)
        was = ", ".join(f"{v[4:]}={r[v]}" for v in values)
        newer_s, older_s = inputs.rel_s(r.get("was_committed_ms")), inputs.rel_s(r.get("committed_ms"))
        witnesses.append({"row": shown, "batch_id": int(r["batch_id"]), "over_batch": int(r["over_batch"]),
                          "wrote": now, "overwrote": was, "visible_s": older_s, "newer_visible_s": newer_s})
        clauses.append(f"the sink held {shown} from batch {int(r['over_batch'])} ({was}), visible at "
                       f"{text.seconds(newer_s)}; then batch {int(r['batch_id'])}, older, wrote its row over "
                       f"it ({now}), visible at {text.seconds(older_s)}")
    story = text.paragraph([*clauses, f"{plural(len(back), 'write')} went back to an older batch's value "
                            "in all: the sink applies a batch without comparing its id with the row's (a "
                            "replay or a late write of an older batch)"])
    return Finding(cls="went-backwards", count=int(len(back)), witness=witnesses,
                   story=f"{story} {fix.advice('went-backwards')}")
