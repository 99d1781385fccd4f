"""A job's schema (Spark DDL) checked against the records it will parse, before anything starts.

Spark's `from_json` never fails: a field it cannot read is null, and a job then computes on
nulls and writes nothing useful. So the harness reads the DDL's top-level fields and checks
them against the first records (workloads/replay/scan.py keeps them): a field no record has
(a misspelt name), or a value of another type (text where the DDL says INT), is refused with
the row and the fix.
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime

_NAME = re.compile(r"\s*(`[^`]+`|[A-Za-z_][A-Za-z0-9_]*)\s*:?\s*(.+)", re.S)
_INTEGER = ("TINYINT", "BYTE", "SMALLINT", "SHORT", "INT", "INTEGER", "BIGINT", "LONG")
_NUMBER = ("FLOAT", "REAL", "DOUBLE", "DECIMAL", "DEC", "NUMERIC")


def fields(ddl: str) -> list[tuple[str, str]]:
    """The top-level (name, TYPE) pairs of a DDL string; ValueError names what does not read."""
    out = []
    for item in split_top(ddl):
        m = _NAME.match(item)
        if not m:
            raise ValueError(f"{item.strip()!r} is not `name TYPE`")
        name, kind = m.group(1).strip("`"), m.group(2).strip()
        kind = re.split(r"\s+(?:NOT\s+NULL|COMMENT)\b", kind, flags=re.I)[0].strip()
        out.append((name, kind.upper()))
    if not out:
        raise ValueError("it names no field")
    return out


def split_top(text: str) -> list[str]:
    """`text` split at the commas outside <...> and (...)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def problems(ddl: str, sample: list[bytes]) -> list[str]:
    """What in the sampled records the DDL would read as null: fields no record has, and values
    of another type (the first of each field). Empty when the schema parses them."""
    try:
        declared = fields(ddl)
    except ValueError as exc:
        return [f"the schema does not read as Spark DDL: {exc}"]
    records = []
    for line in sample:
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            records.append(value)
    found: list[str] = []
    seen = {k for r in records for k in r}
    for name, kind in declared:
        if records and name not in seen:
            found.append(f"no record has a field {name!r} (the records have {', '.join(sorted(seen))})")
            continue
        for row, record in enumerate(records):
            value = record.get(name)
            if value is not None and not fits(value, kind):
                shown = json.dumps(value)[:60]
                found.append(f"record {row:,} has {name} = {shown}, which {kind} reads as null")
                break
    return found


def fits(value, kind: str) -> bool:
    """Whether Spark's JSON reader reads `value` as `kind` (not as null)."""
    base = re.split(r"[<(\s]", kind, maxsplit=1)[0]
    if base in ("STRING", "VARCHAR", "CHAR"):
        return True   # Spark takes any JSON value's text
    if base in _INTEGER:
        return isinstance(value, int) and not isinstance(value, bool)
    if base in _NUMBER:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if base == "BOOLEAN":
        return isinstance(value, bool)
    if base in ("TIMESTAMP", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ"):
        return isinstance(value, str) and _parses(value, datetime.fromisoformat)
    if base == "DATE":
        return isinstance(value, str) and _parses(value[:10], date.fromisoformat)
    if base == "ARRAY":
        return isinstance(value, list)
    if base in ("STRUCT", "MAP"):
        return isinstance(value, dict)
    return True


def _parses(text: str, parse) -> bool:
    try:
        parse(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True
