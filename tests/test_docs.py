"""The documentation holds together: README.md stays a short door with the two commands,
every internal link in README.md and docs/*.md resolves, and no comment or docstring in
the code cites a README or docs heading that does not exist.

Plain file reading: no service, no Java. Headings are ATX headings (`## Name`) outside
fenced code; anchors follow GitHub's slug rules.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = REPO / "docs"
README_MAX_LINES = 200

# where code may cite the docs: comments and docstrings of these files
CODE_ROOTS = ("harness", "workloads", "faults", "benchmarks", "tests")
CODE_SUFFIXES = (".py", ".toml")
CODE_FILES = ("conftest.py",)
CODE_GLOBS = (".github/workflows/*.yml",)

FENCE = re.compile(r"^\s*(```|~~~)")
ATX_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
HTML_ANCHOR = re.compile(r"""<a\s+(?:name|id)=["']([^"']+)["']""")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
# [text](target "title") and ![alt](target); the text may hold one level of brackets
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")

# README, "Heading" / README.md, "Heading" / README "Heading" / docs/x.md, "Heading" /
# docs/x.md#anchor / docs/x.md alone; a comment may break between the name and the heading
# (the next line's `#` is allowed there) or inside the heading
CITATION = re.compile(
    r"(?<![\w/.-])(?P<file>README(?:\.md)?|docs/[\w.-]+\.md)"
    r"(?:#(?P<anchor>[\w-]+)"
    r"|[ \t]*,?(?:[ \t]|\n[ \t]*#?)*\"(?P<heading>[A-Za-z][^\"]{0,150})\")?"
)


def _outside_fences(text: str) -> list[tuple[int, str]]:
    """The (line number, line) pairs of `text` that are not inside fenced code blocks."""
    kept, fence = [], None
    for number, line in enumerate(text.splitlines(), start=1):
        opened = FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        elif fence is None:
            kept.append((number, line))
    return kept


def _heading_text(raw: str) -> str:
    """A heading as GitHub shows it: links reduced to their text, code marks dropped."""
    raw = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", raw)
    return raw.replace("`", "").strip()


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation but hyphens and spaces removed,
    spaces to hyphens."""
    text = _heading_text(heading).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(path: Path) -> list[str]:
    """The headings of a Markdown file, in order, as GitHub shows them."""
    found = []
    for _, line in _outside_fences(path.read_text(encoding="utf-8")):
        match = ATX_HEADING.match(line)
        if match:
            found.append(_heading_text(match.group(1)))
    return found


def anchors(path: Path) -> set[str]:
    """Every anchor GitHub makes for a Markdown file: a slug per heading, the second of a
    name `-1`, the third `-2`; and explicit `<a name=...>` or `<a id=...>`."""
    seen: dict[str, int] = {}
    result = set()
    for heading in headings(path):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    result.update(HTML_ANCHOR.findall(path.read_text(encoding="utf-8")))
    return result


def links(path: Path) -> list[tuple[int, str]]:
    """The (line, target) of every link and image in a Markdown file, outside code."""
    found = []
    for number, line in _outside_fences(path.read_text(encoding="utf-8")):
        line = INLINE_CODE.sub("", line)
        found += [(number, target) for target in INLINE_LINK.findall(line)]
        reference = REFERENCE_LINK.match(line)
        if reference:
            found.append((number, reference.group(1)))
    return found


def broken_links(path: Path, root: Path = REPO) -> list[str]:
    """Each internal link of `path` whose file is missing, or whose anchor is not a heading
    of its target; web links are skipped. Files are named relative to `root`."""
    problems = []
    where = os.path.relpath(path, root)
    for number, target in links(path):
        if SCHEME.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = path.parent / unquote(file_part) if file_part else path
        if not dest.exists():
            problems.append(f"{where}:{number}: {target}: no such file")
        elif anchor and dest.suffix == ".md" and unquote(anchor) not in anchors(dest):
            problems.append(f"{where}:{number}: {target}: no heading of {os.path.relpath(dest, root)} "
                            f"has the anchor #{anchor}")
    return problems


def citations(text: str) -> list[tuple[int, str, str | None, str | None]]:
    """The (line, file, heading, anchor) of every place `text` names README or a docs page."""
    found = []
    for match in CITATION.finditer(text):
        heading = match.group("heading")
        if heading is not None:
            heading = " ".join(re.sub(r"\n[ \t]*#?", " ", heading).split())
        line = text.count("\n", 0, match.start()) + 1
        found.append((line, match.group("file"), heading, match.group("anchor")))
    return found


def _code_files() -> list[Path]:
    """The files whose comments and docstrings may cite the docs, each once (a symlinked
    directory is read through one path only), this file left out."""
    paths = [REPO / name for name in CODE_FILES]
    for root in CODE_ROOTS:
        for suffix in CODE_SUFFIXES:
            paths += sorted((REPO / root).rglob(f"*{suffix}"))
    for pattern in CODE_GLOBS:
        paths += sorted(REPO.glob(pattern))
    unique, seen = [], {Path(__file__).resolve()}
    for path in paths:
        real = path.resolve()
        if real not in seen and "__pycache__" not in path.parts:
            seen.add(real)
            unique.append(path)
    return unique


def stale_citations() -> list[str]:
    """Each citation in the code of a docs file that does not exist, or of a heading or
    anchor that file does not have."""
    problems = []
    for path in _code_files():
        for line, cited, heading, anchor in citations(path.read_text(encoding="utf-8")):
            where = f"{os.path.relpath(path, REPO)}:{line}"
            target = README if cited.startswith("README") else REPO / cited
            name = os.path.relpath(target, REPO)
            if not target.exists():
                problems.append(f"{where}: cites {cited}: no such file")
            elif heading is not None:
                wanted = heading.casefold()
                if not any(h.casefold() == wanted for h in headings(target)):
                    problems.append(f'{where}: cites {cited}, "{heading}": {name} has no such heading')
            elif anchor is not None and anchor not in anchors(target):
                problems.append(f"{where}: cites {cited}#{anchor}: {name} has no such anchor")
    return problems


def _markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


class TestReadme:
    def test_readme_is_at_most_200_lines(self):
        """README.md is a door, not the manual: 200 lines at most."""
        lines = README.read_text(encoding="utf-8").splitlines()
        assert len(lines) <= README_MAX_LINES, (
            f"README.md has {len(lines)} lines; move detail into docs/ (at most {README_MAX_LINES})")

    def test_readme_gives_the_bench_and_the_test_command(self):
        """README.md names the main job, `tox -e bench`, and the test command, `tox -e test`."""
        text = README.read_text(encoding="utf-8")
        assert "tox -e bench" in text
        assert "tox -e test" in text


class TestSlugs:
    @pytest.mark.parametrize("heading, anchor", [
        ("Where a batch's time goes", "where-a-batchs-time-goes"),
        ("summary.json", "summaryjson"),
        ("`tox -e bench`", "tox--e-bench"),
        ("Delta Lake", "delta-lake"),
        ("Matrix and quick faults", "matrix-and-quick-faults"),
        ("What [the docs](docs/x.md) say", "what-the-docs-say"),
        ("kill_executor: a lost node", "kill_executor-a-lost-node"),
    ])
    def test_a_heading_becomes_githubs_anchor(self, heading, anchor):
        """A heading's anchor is GitHub's: lowercase, punctuation dropped, spaces to hyphens."""
        assert slug(heading) == anchor

    def test_repeated_headings_get_numbered_anchors(self, tmp_path):
        """The second heading of a name gets `-1`, the third `-2`; headings inside fenced code
        make no anchor."""
        page = tmp_path / "page.md"
        page.write_text("# Runs\n## Runs\n```toml\n# not a heading\n```\n### Runs\n", encoding="utf-8")
        assert anchors(page) == {"runs", "runs-1", "runs-2"}


class TestLinks:
    @pytest.mark.parametrize("page", _markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
    def test_every_internal_link_resolves(self, page):
        """Each relative link and image points to an existing file, and each #anchor (in the
        same file or another) to a heading there."""
        problems = broken_links(page)
        assert not problems, "broken links:\n" + "\n".join(problems)

    def test_a_broken_link_is_caught(self, tmp_path):
        """The checker reports a missing file and a missing anchor, and skips web links and code."""
        (tmp_path / "other.md").write_text("# Here\n", encoding="utf-8")
        page = tmp_path / "page.md"
        page.write_text("# Top\n[a](other.md#here) [b](other.md#gone) [c](missing.md)\n"
                        "![d](missing.png) [e](#top) [f](#nowhere) [g](https://example.com/x#y)\n"
                        "`[h](in-code.md)`\n```\n[i](in-fence.md)\n```\n", encoding="utf-8")
        problems = [p.split(": ", 1)[1] for p in broken_links(page, root=tmp_path)]
        assert problems == ["other.md#gone: no heading of other.md has the anchor #gone",
                            "missing.md: no such file", "missing.png: no such file",
                            "#nowhere: no heading of page.md has the anchor #nowhere"]


class TestCodeCitations:
    def test_the_scanner_finds_each_form_of_citation(self):
        """A citation is found by the README or docs path and the quoted heading after it,
        also when a comment or a docstring breaks the line between them."""
        text = ('x = 1  # on two cores that was slow (README, "Delta Lake")\n'
                '"""came from this script (README,\n"Sinks"). Needs the jars."""\n'
                '# the scenario of README "Where a batch\'s time went": its batches\n'
                '# cost 4.5 s (README.md,\n#   "Where a batch\'s\n# time goes")\n'
                '# kinds: docs/faults.md, "Fault kinds"; see docs/faults.md#the-nemesis\n'
                'readme = "README.md"\n')
        assert citations(text) == [
            (1, "README", "Delta Lake", None),
            (2, "README", "Sinks", None),
            (4, "README", "Where a batch's time went", None),
            (5, "README.md", "Where a batch's time goes", None),
            (8, "docs/faults.md", "Fault kinds", None),
            (8, "docs/faults.md", None, "the-nemesis"),
            (9, "README.md", None, None),
        ]

    def test_every_cited_doc_and_heading_exists(self):
        """Every comment or docstring that cites README.md or docs/*.md names an existing file,
        and a heading or anchor that file has."""
        problems = stale_citations()
        assert not problems, ("code cites documentation that does not exist (cite the docs file "
                              "and its heading as it is now):\n" + "\n".join(problems))


def test_every_generated_block_is_what_the_code_writes():
    """Each block `python -m harness.docs` writes (the fault kinds' table, README's example
    output from the committed quick baseline) is current: README's example once drifted from
    the run it cited (processed/s 990/988/614 printed, 1,151/1,207/662 by the table's code)."""
    from harness import docs

    for (file, name), make in docs.GENERATED.items():
        text = (REPO / file).read_text()
        assert docs.block(text, name) == make(), f"{file}: block {name} is stale: run python -m harness.docs"
