"""`python -m harness.docs`: write the generated parts of docs/ from the code that defines them.

A generated part sits between `<!-- NAME:begin -->` and `<!-- NAME:end -->`; the test
(tests/test_docs_generated.py) fails when a part differs from what this would write.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from harness.paths import REPO_ROOT

DOCS = REPO_ROOT / "docs"


def _fault_kinds() -> str:
    from faults import registry

    return registry.table()


# (file, block name) -> what the block holds
GENERATED: dict[tuple[str, str], Callable[[], str]] = {
    ("faults.md", "fault-kinds"): _fault_kinds,
}


def block(text: str, name: str) -> str | None:
    """The generated block `name` of `text`, without its markers (None: no such block)."""
    match = re.search(rf"<!-- {name}:begin -->\n(.*?)\n?<!-- {name}:end -->", text, re.S)
    return None if match is None else match[1].strip("\n")


def _between(body: str) -> Callable[[re.Match], str]:
    return lambda m: m[1] + body + "\n" + m[2]


def write(docs: Path = DOCS) -> list[Path]:
    """Rewrite every generated block; returns the files changed."""
    changed = []
    for (file, name), make in GENERATED.items():
        path = docs / file
        text = path.read_text()
        if block(text, name) is None:
            raise SystemExit(f"{path} has no <!-- {name}:begin --> ... <!-- {name}:end --> block")
        pattern = re.compile(rf"(<!-- {name}:begin -->\n).*?(<!-- {name}:end -->)", re.S)
        new = pattern.sub(_between(make()), text)
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed


if __name__ == "__main__":
    for path in write():
        print(f"wrote {path}")
    sys.exit(0)
