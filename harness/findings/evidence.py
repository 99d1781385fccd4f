"""A finding's witnesses as a table a person reads beside its story, in the story's units.

    table(finding) -> (headings, rows)     every cell a str, unescaped

summary.json keeps each witness as data (a window in epoch milliseconds, `written_by` as a
list of {"batch_id", "committed_s"}, batch ids as the checker numbers them across queries);
the table says the same things as the story does: a window in seconds from the first event
sent ("[1.3 s, 3.3 s)", one that began before it "[0.7 s before the first event, 1.3 s)"),
"batch 5" (or "batch 2 of query 1"), the copies a sink holds as "batch 9 at 11.2 s and 29.6 s".
report.html renders it (harness/report/html.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from harness.findings import text
from harness.results.model import Finding
from workloads.pipelines.config import QUERY_ID_STRIDE

# the columns in the order a story tells them, each with its heading; any other key follows
HEADINGS = {"event_id": "event", "key": "key", "window": "window", "row": "row", "partition": "partition",
            "offset": "offset", "read_by_batch": "read by", "read_by_batches": "read by",
            "batch_committed": "committed", "expected": "expected", "actual": "in the sink",
            "written_by": "written by"}
_QUERIES = 100   # a case runs a few queries: an id past this many strides is a sink's own, not Spark's


def table(finding: Finding) -> tuple[list[str], list[list[str]]]:
    """The witnesses of `finding` as headings and rows of text cells; ([], []) without any."""
    records = finding.witness
    if not records:
        return [], []
    keys = _columns(records)
    headings = list(dict.fromkeys(_heading(k) for k in keys))
    rows = []
    for r in records:
        cells = {h: "" for h in headings}
        for k in keys:
            if k in r:
                cells[_heading(k)] = cells[_heading(k)] or cell(k, r[k], r)
        rows.append([cells[h] for h in headings])
    return headings, rows


def _columns(records: list[dict]) -> list[str]:
    present = list(dict.fromkeys(k for r in records for k in r if k != "window_s"))
    if "window" in present and "row" in present:
        present.remove("row")     # the row's text repeats its key and window, in epoch ms
    known = [k for k in HEADINGS if k in present]
    return known + [k for k in present if k not in HEADINGS]


def _heading(key: str) -> str:
    return HEADINGS.get(key, key.replace("_", " "))


def cell(key: str, value, record: dict) -> str:
    """One value of a witness record as the story would say it."""
    if key == "window":
        return _window(value, record.get("window_s"))
    if key in ("read_by_batch", "batch_id"):
        return batch(int(value)) if int(value) >= 0 else "no batch"
    if key == "read_by_batches":
        return batches(value)
    if key == "batch_committed":
        return "never" if value is False else "yes"
    if key == "written_by":
        return written_by(value)
    return plain(key, value)


def _window(epoch_ms, seconds) -> str:
    if seconds is not None:
        return text.window(*seconds)
    a, b = epoch_ms    # a summary written before window_s: no first event to count from
    return f"[{a:,}, {b:,}) epoch ms"


def batch(batch_id: int) -> str:
    """"batch 5", or "batch 2 of query 1" (the checker's ids run across a case's queries)."""
    query, local = divmod(batch_id, QUERY_ID_STRIDE)
    return f"batch {local}" + (f" of query {query}" if query else "")


def batches(ids: Iterable[int]) -> str:
    """"batch 5", "batches 3-5 and 8", query by query."""
    by_query: dict[int, list[int]] = {}
    for b in sorted({int(i) for i in ids}):
        if b >= 0:
            by_query.setdefault(b // QUERY_ID_STRIDE, []).append(b % QUERY_ID_STRIDE)
    said = [("batch " if len(local) == 1 else "batches ") + text.ids(local) + (f" of query {q}" if q else "")
            for q, local in sorted(by_query.items())]
    return text.join(said) or "no batch"


def written_by(copies: list[dict]) -> str:
    """The copies a sink holds, in the order they became visible: "batch 9 at 11.2 s and 29.6 s",
    "at 14.4 s and 33.7 s" (a sink that records no batch id), "sink id 1795547429255918 at 12.3 s"
    (an id of the sink's own)."""
    groups: list[tuple[str, list[str]]] = []
    for c in copies:
        who = _writer(c.get("batch_id"))
        at = text.seconds(c.get("committed_s"))
        if groups and groups[-1][0] == who:
            groups[-1][1].append(at)
        else:
            groups.append((who, [at]))
    return "; ".join(f"{who} at {text.join(times)}".lstrip() for who, times in groups)


def _writer(batch_id) -> str:
    if batch_id is None or batch_id < 0:
        return ""
    return batch(batch_id) if batch_id // QUERY_ID_STRIDE < _QUERIES else f"sink id {batch_id}"


def plain(key: str, value) -> str:
    """Any other value: seconds for a `_s` key, counts with thousands, a dict as "count 89,
    sum_amount 4,325", a list joined."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return ", ".join(f"{k.replace('_', ' ')} {plain(k, v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(plain(key, v) for v in value)
    if isinstance(value, float) and key.endswith("_s"):
        return text.seconds(value)
    if isinstance(value, int) and key not in ("event_id",):
        return f"{value:,}"
    return str(value)
