"""Reading parsed TOML tables into typed values: the workload spec's, the scenario's, and a
user's own fault kind's keys (a public module: `Section`, `bad`, `REQUIRED`, `parse_duration_ms`).

Every failure raises SpecError naming the dotted field path and the bad value;
harness.scenario.load() puts the file name in front, so nothing here needs to know the file.
"""

from __future__ import annotations

import difflib
import json
import math
import operator
import re
from collections.abc import Iterable
from typing import Any

from workloads.errors import SpecError

REQUIRED: Any = object()  # default meaning "the key must be present"

_DURATION = re.compile(r"(-?\d+(?:\.\d+)?)([A-Za-z]*)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
_BOUNDS = {"gt": (">", operator.gt), "ge": (">=", operator.ge),
           "lt": ("<", operator.lt), "le": ("<=", operator.le)}
# TOML's own names for the Python types tomllib produces, so messages speak the file's language
_TOML_TYPES = {bool: "a boolean", int: "an integer", float: "a float", str: "a string",
               dict: "a table", list: "an array"}
_EXAMPLES = {"an integer": "a whole number without quotes, e.g. 2",
             "a number": "a number without quotes, e.g. 500",
             "a string": "text in double quotes"}


def show(value: Any) -> str:
    """`value` as it would be written in TOML, so a message quotes what the user wrote."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return "a table" if isinstance(value, dict) else repr(value)


def _limit(number: float) -> str:
    """A bound for a message: 1,000,000 rather than 1000000 or 1e+06."""
    return f"{number:,}" if isinstance(number, int) else f"{number:g}"


def bad(field: str, value: Any, problem: str, fix: str = "") -> SpecError:
    """The error for `field` holding `value`: "field = value: problem"."""
    return SpecError(f"{field} = {show(value)}: {problem}", fix)


def wrong_type(field: str, value: Any, expected: str, fix: str = "") -> SpecError:
    """The error for a value of the wrong TOML type."""
    got = _TOML_TYPES.get(type(value), type(value).__name__)
    fix = fix or (f"write {_EXAMPLES[expected]}" if expected in _EXAMPLES else f"write {expected}")
    return bad(field, value, f"expected {expected}, got {got}", fix)


def parse_duration_ms(value: Any, field: str) -> int:
    """Milliseconds from a duration string: "500ms", "5s", "1.5s", "2m", "1h".

    A bare number is rejected: "5" could mean seconds or milliseconds, and guessing wrong
    makes a window a thousand times too long without any error.
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise bad(field, value, "a duration needs a unit", 'write it with a unit, e.g. "5s"')
    if not isinstance(value, str):
        raise wrong_type(field, value, 'a duration string such as "5s"')
    match = _DURATION.fullmatch(value.strip())
    if match is None:
        raise bad(field, value, "not a duration", 'write a number and a unit, e.g. "500ms" or "1.5s"')
    number, unit = float(match[1]), match[2]
    if not unit:
        raise bad(field, value, "a duration needs a unit", f'write it with a unit, e.g. "{value}s"')
    if unit not in _UNIT_MS:
        raise bad(field, value, f"unknown unit {unit!r}", "use one of ms, s, m, h")
    if number < 0:
        raise bad(field, value, "a duration cannot be negative", 'write 0 or more, e.g. "0s"')
    return round(number * _UNIT_MS[unit])


def check_range(field: str, value: float, **bounds: float) -> None:
    """Raise unless `value` satisfies every bound (gt, ge, lt, le)."""
    wanted = " and ".join(f"{_BOUNDS[name][0]} {_limit(limit)}" for name, limit in bounds.items())
    if not all(_BOUNDS[name][1](value, limit) for name, limit in bounds.items()):
        raise bad(field, value, f"must be {wanted}", f"write a value {wanted}")


def check_choice(field: str, value: Any, choices: Iterable[str]) -> None:
    """Raise unless `value` is one of `choices`, listing them all."""
    choices = tuple(choices)
    if value not in choices:
        listed = ", ".join(json.dumps(c) for c in choices)
        raise bad(field, value, f"must be one of {listed}", f"write one of {listed}")


class Section:
    """One TOML table: rejects unknown keys at once, then reads typed values by key."""

    def __init__(self, data: Any, path: str, known: Iterable[str]):
        self.path, self.known = path, tuple(known)
        if not isinstance(data, dict):
            # items of an array of tables ("cases[0]") are written [[cases]], not [cases[0]]
            header = f"[[{path.split('[')[0]}]]" if path.endswith("]") else f"[{path}]"
            raise wrong_type(path, data, "a table", f"write it as a {header} table")
        self.data = data
        for key in data:
            if key not in self.known:
                raise self._unknown(key)

    def _unknown(self, key: str) -> SpecError:
        where = self.path or "the top level"
        close = difflib.get_close_matches(key, self.known, n=1)
        fix = f"did you mean `{close[0]}`?" if close else "remove it or correct its spelling"
        return SpecError(
            f"unknown key {self.field(key)} (known keys of {where}: {', '.join(self.known)})", fix)

    def field(self, key: str) -> str:
        """The dotted path of `key` in this table, for messages."""
        return f"{self.path}.{key}" if self.path else key

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = None) -> Any:
        """The value as written, unchecked (for quoting durations in messages)."""
        return self.data.get(key, default)

    def _get(self, key: str, default: Any) -> Any:
        if key in self.data:
            return self.data[key]
        if default is REQUIRED:
            where = f"[{self.path}]" if self.path else "the top level"
            raise SpecError(f"{self.field(key)} is missing", f"add `{key} = ...` to {where}")
        return default

    def string(self, key: str, default: Any = REQUIRED, pattern: re.Pattern | None = None) -> Any:
        """A non-empty string (or the default, which may be None), matching `pattern` if given."""
        value = self._get(key, default)
        if value is None and key not in self.data:
            return None
        if not isinstance(value, str):
            raise wrong_type(self.field(key), value, "a string")
        if not value:
            raise bad(self.field(key), value, "must not be empty", "write a non-empty value")
        if pattern is not None and not pattern.fullmatch(value):
            raise bad(self.field(key), value, f"must match {pattern.pattern}",
                      "use only letters, digits, '.', '_' and '-'")
        return value

    def integer(self, key: str, default: Any = REQUIRED, **bounds: float) -> int:
        """An integer within `bounds`; a boolean is refused although Python calls it an int."""
        value = self._get(key, default)
        if not isinstance(value, int) or isinstance(value, bool):
            raise wrong_type(self.field(key), value, "an integer")
        check_range(self.field(key), value, **bounds)
        return value

    def number(self, key: str, default: Any = REQUIRED, **bounds: float) -> float:
        """A finite int or float within `bounds`, as a float (TOML allows nan and inf)."""
        value = self._get(key, default)
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise wrong_type(self.field(key), value, "a number")
        if not math.isfinite(value):
            raise bad(self.field(key), value, "must be a finite number", "write a finite number")
        check_range(self.field(key), value, **bounds)
        return float(value)

    def boolean(self, key: str, default: Any = REQUIRED) -> bool:
        """true or false (not 0 or 1, nor "yes")."""
        value = self._get(key, default)
        if not isinstance(value, bool):
            raise wrong_type(self.field(key), value, "true or false")
        return value

    def choice(self, key: str, choices: Iterable[str], default: Any = REQUIRED) -> str:
        """A string that is one of `choices`."""
        value = self._get(key, default)
        if not isinstance(value, str):
            raise wrong_type(self.field(key), value, "a string")
        check_choice(self.field(key), value, choices)
        return value

    def duration_ms(self, key: str, default: Any = REQUIRED, **bounds: float) -> int:
        """A duration string (or default string) in milliseconds, within `bounds`."""
        value = self._get(key, default)
        ms = parse_duration_ms(value, self.field(key))
        if not all(_BOUNDS[name][1](ms, limit) for name, limit in bounds.items()):
            wanted = " and ".join(f"{_BOUNDS[n][0]} {_limit(limit)} ms" for n, limit in bounds.items())
            raise bad(self.field(key), value, f"must be {wanted}", f"write a duration {wanted}")
        return ms

    def table(self, key: str, known: Iterable[str]) -> Section:
        """The sub-table `key` (empty when absent) as a Section."""
        return Section(self.data.get(key, {}), self.field(key), known)
