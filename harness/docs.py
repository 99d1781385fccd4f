"""`python -m harness.docs`: write the generated parts of the docs from what defines them: the
fault kinds' table from the registry, Nexmark's queries from their module, README's example
output from the committed quick baseline (results/baseline/bench-quick.summary.json, a real
run), rendered by today's table.

A generated part sits between `<!-- NAME:begin -->` and `<!-- NAME:end -->`; the tests
(tests/test_docs.py) fail when a part differs from what this would write.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from harness.paths import REPO_ROOT

DOCS = REPO_ROOT / "docs"
QUICK_BASELINE = REPO_ROOT / "results" / "baseline" / "bench-quick.summary.json"


def _fault_kinds() -> str:
    from faults import registry

    return registry.table()


def _quick_bench() -> str:
    """The terminal table of the committed quick bench run, as `python -m harness run` prints it."""
    from harness.report import table
    from harness.results import summary

    return "```\n" + table.render(summary.load(QUICK_BASELINE)) + "\n```"


def _nexmark_queries() -> str:
    """Nexmark's queries: each the harness runs, its form and what it writes; then the others."""
    from workloads.pipelines import nexmark

    lines = ["| query | form | what it writes | columns |", "|---|---|---|---|"]
    for name, q in sorted(nexmark.QUERIES.items(), key=lambda kv: int(kv[0][1:])):
        lines.append(f"| {name} | {q.form} | {q.note} | {', '.join(q.columns)} |")
    others = sorted(nexmark.NOT_HERE.items(), key=lambda kv: int(kv[0][1:]))
    if others:
        lines += ["", "| query | not run here: why |", "|---|---|"]
        lines += [f"| {name} | {why} |" for name, why in others]
    else:
        lines += ["", f"All {len(nexmark.QUERIES)} of nexmark/nexmark's queries q0-q22 run."]
    return "\n".join(lines)


# (file, from the repository's root; block name) -> what the block holds
GENERATED: dict[tuple[str, str], Callable[[], str]] = {
    ("docs/faults.md", "fault-kinds"): _fault_kinds,
    ("README.md", "quick-bench"): _quick_bench,
    ("docs/pipelines-and-sinks.md", "nexmark-queries"): _nexmark_queries,
}


def block(text: str, name: str) -> str | None:
    """The generated block `name` of `text`, without its markers (None: no such block)."""
    match = re.search(rf"<!-- {name}:begin -->\n(.*?)\n?<!-- {name}:end -->", text, re.S)
    return None if match is None else match[1].strip("\n")


def _between(body: str) -> Callable[[re.Match], str]:
    return lambda m: m[1] + body + "\n" + m[2]


def write(root: Path = REPO_ROOT) -> list[Path]:
    """Rewrite every generated block; returns the files changed."""
    changed = []
    for (file, name), make in GENERATED.items():
        path = root / file
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
