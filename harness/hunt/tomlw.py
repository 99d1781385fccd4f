"""A small TOML writer for minimal.toml: tables, arrays of tables, and inline values (strings,
numbers, booleans, arrays, inline tables), which is all a scenario holds."""

from __future__ import annotations

import json
import re
from typing import Any

_BARE = re.compile(r"[A-Za-z0-9_-]+")


def dumps(doc: dict, comment: str = "") -> str:
    lines = [f"# {line}" if line else "#" for line in comment.splitlines()]
    lines += _table(doc, ())
    return "\n".join(lines).strip() + "\n"


def _table(table: dict, path: tuple[str, ...]) -> list[str]:
    plain = {k: v for k, v in table.items() if not _is_table(v) and not _is_array_of_tables(v)}
    lines = [f"{_key(k)} = {_value(v)}" for k, v in plain.items()]
    for key, value in table.items():
        if _is_table(value):
            lines += ["", f"[{'.'.join(_key(p) for p in (*path, key))}]", *_table(value, (*path, key))]
        elif _is_array_of_tables(value):
            for item in value:
                lines += ["", f"[[{'.'.join(_key(p) for p in (*path, key))}]]", *_table(item, (*path, key))]
    return lines


def _is_table(value: Any) -> bool:
    # a table of plain values nested in a sub-table reads better inline: conf = { ... }
    return isinstance(value, dict) and any(isinstance(v, dict) for v in value.values()) or (
        isinstance(value, dict) and len(value) > 3)


def _is_array_of_tables(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _key(key: str) -> str:
    return key if _BARE.fullmatch(key) else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")
