"""Read Spark's streaming checkpoint: the offset log, the commit log, the initial offsets.

`offsets/N`: line `v1`, a JSON line with `batchWatermarkMs`, then one JSON line per
source ({topic: {partition: end offset}}). `commits/N`: `v1`, then a JSON line. A batch
with an offsets file but no commits file was planned but not committed.
`sources/0/0`: a version line, then the offsets the query started from (earliest, or
the latest at its start when it began on a fresh checkpoint).

Spark keeps only the last 100 batches of each log; the harness copies every file as it is
written to `<checkpoint>.journal/` (harness/run/journal.py), and the batches Spark purged
(ids below the first it still has) are read from there.

A case may have run several queries, one checkpoint each: at-most-once restarts its
driver on a fresh checkpoint. `read_queries` numbers their batches one after another so
that batch ids stay unique (`id_base` + N).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from workloads import delta_source
from workloads.pipelines.config import QUERY_ID_STRIDE

LOGS = ("offsets", "commits")   # the logs Spark purges, which the journal keeps


def journal_of(checkpoint: Path) -> Path:
    """Where the harness keeps the checkpoint's purged log files."""
    return checkpoint.with_name(checkpoint.name + ".journal")


@dataclass(frozen=True)
class Batch:
    batch_id: int
    watermark_ms: int              # the watermark this batch ran with (evicts windows ending <= it)
    end_offsets: dict[int, int]    # partition -> end offset (exclusive) for the topic
    committed: bool
    # partition -> first offset read; None: where the previous batch of its query ended
    start_offsets: dict[int, int] | None = None
    query: int = 0                 # which of the case's queries (checkpoints) ran it
    # a query that reads the topic through several sources (a self-join): each one's end
    # offsets and first offsets, in the order of the offset log's lines; end_offsets and
    # start_offsets are the first source's
    source_ends: tuple[dict[int, int], ...] = ()
    source_starts: tuple[dict[int, int], ...] = ()
    committed_ms: int | None = None   # when Spark wrote its commits/N file (its mtime)
    planned_ms: int | None = None     # when Spark wrote its offsets/N file (its mtime): the batch's start
    # the batch's processing time as Spark keeps it (the offset log's batchTimestampMs): what
    # processing-time TTL measures against; a batch run again keeps its first timestamp
    timestamp_ms: int | None = None

    @property
    def rows(self) -> int:
        """Records the batch read of the topic (its first source): end minus start offsets (a
        partition new to the query from 0, its earliest offset, as check/batch_reads.py reads it)."""
        starts = self.start_offsets or {}
        return sum(max(end - starts.get(p, 0), 0) for p, end in self.end_offsets.items())


def for_source(batches: list[Batch], source: int) -> list[Batch]:
    """The batches as source number `source` of a many-source query read the topic."""
    if source == 0:
        return batches
    return [replace(b, end_offsets=b.source_ends[source], start_offsets=b.source_starts[source])
            for b in batches]


def _json_lines(path: Path) -> list[str]:
    return [line for line in path.read_text(errors="replace").splitlines() if line.strip().startswith("{")]


def _topic_offsets(line: str, topic: str, case_dir: Path | None = None) -> dict[int, int]:
    """The topic's offsets in one source's line of an offset log. A Delta source's offset (the
    `[source] kind = "delta"` table) is turned into the topic's offsets it has read through, by
    the appender's manifest in the case's directory (workloads/delta_source.py)."""
    return delta_source.topic_offsets(json.loads(line), topic, case_dir)


def initial_offsets(checkpoint: Path, topic: str, source: int = 0) -> dict[int, int]:
    """Where the query's first batch started reading (empty when not recorded)."""
    path = checkpoint / "sources" / str(source) / "0"
    if not path.exists():
        return {}
    lines = _json_lines(path)
    return _topic_offsets(lines[0], topic) if lines else {}


def read_batches(checkpoint: Path, topic: str, query: int = 0, purged: bool = False) -> list[Batch]:
    """Every planned batch of one checkpoint in id order, with its start and end offsets;
    `purged`: with those Spark purged, from the harness's journal (a case's whole history,
    where a look at where the query is now needs only what Spark keeps)."""
    offsets_dir, commits_dir = checkpoint / "offsets", checkpoint / "commits"
    if not offsets_dir.is_dir():
        return []
    offsets = log_files(offsets_dir)
    commits = log_files(commits_dir)
    if offsets and purged:   # what Spark purged: below the first batch it still keeps
        first = min(offsets)
        journal = journal_of(checkpoint)
        offsets = {**{n: p for n, p in log_files(journal / "offsets").items() if n < first}, **offsets}
        commits = {**{n: p for n, p in log_files(journal / "commits").items() if n < first}, **commits}
    committed = {n: p.stat().st_mtime_ns // 1_000_000 for n, p in commits.items()}
    starts: list[dict[int, int]] = []
    batches = []
    for _, path in sorted(offsets.items()):
        read = offsets_file(path, topic)
        if read is None:   # damaged (corrupt-checkpoint's garbage, a partial write): no batch Spark ran
            continue
        meta, ends = read
        while len(starts) < len(ends):
            starts.append(initial_offsets(checkpoint, topic, len(starts)))
        batch_id = int(path.name)
        batches.append(Batch(query * QUERY_ID_STRIDE + batch_id, int(meta.get("batchWatermarkMs", 0)),
                             dict(ends[0]) if ends else {}, batch_id in committed,
                             dict(starts[0]) if starts else {}, query,
                             tuple(ends), tuple(dict(st) for st in starts[:len(ends)]),
                             committed.get(batch_id), path.stat().st_mtime_ns // 1_000_000,
                             int(meta["batchTimestampMs"]) if "batchTimestampMs" in meta else None))
        starts = [{**st, **end} for st, end in zip(starts, ends, strict=False)] + starts[len(ends):]
    return batches


def log_files(directory: Path) -> dict[int, Path]:
    """A log directory's files by batch id (empty when there is none)."""
    if not directory.is_dir():
        return {}
    return {int(p.name): p for p in directory.iterdir() if p.name.isdigit()}


def offsets_file(path: Path, topic: str) -> tuple[dict, list[dict[int, int]]] | None:
    """offsets/N's metadata and each source's end offsets; None when the file is not one
    Spark could read either (Spark refuses to start on it, or writes it anew)."""
    try:
        lines = path.read_text().splitlines()
        meta = json.loads(lines[1])
        case_dir = path.parents[2] if len(path.parents) > 2 else None   # <case>/checkpoint*/offsets/N
        ends = [_topic_offsets(line, topic, case_dir) if line.strip() not in ("", "-") else {}
                for line in lines[2:]]
    except (UnicodeDecodeError, IndexError, ValueError, AttributeError):
        return None
    return (meta, ends) if isinstance(meta, dict) else None


@dataclass(frozen=True)
class EarlierPlan:
    """A plan of batch N that Spark replaced: offsets/N as it was before a fault removed it and
    the query planned N again over other offsets (the journal's N.<mtime_ns> copy)."""

    planned_ms: float                # when Spark wrote that offsets/N
    end_offsets: dict[int, int]      # its first source's, as the topic's offsets
    committed_ms: float | None       # the commits/N that run wrote, when the journal caught it


def earlier_plans(checkpoint: Path) -> dict[int, list[EarlierPlan]]:
    """Batch (its own number) -> the plans of it Spark replaced, oldest first: each copy of
    offsets/N the journal kept (harness/run/journal.py) that planned other offsets than the
    offsets/N the batch ran with last. A batch id with one is one id over two ranges: a sink
    that skips a batch id it holds keeps the first range's rows and none of the second's."""
    journal = journal_of(checkpoint)
    out: dict[int, list[EarlierPlan]] = {}
    for n, copies in _versions(journal / "offsets").items():
        last = checkpoint / "offsets" / str(n)
        last = last if last.exists() else journal / "offsets" / str(n)
        try:
            now, now_ms = _first_ends(last), last.stat().st_mtime_ns / 1e6
        except (OSError, ValueError, IndexError):
            continue
        commits = sorted(_mtimes_ms(checkpoint, journal, n))
        plans = []
        for ms, path in copies:
            try:
                ends = _first_ends(path)
            except (OSError, ValueError, IndexError):
                continue
            if ends != now:
                done = [c for c in commits if ms <= c < now_ms]
                plans.append(EarlierPlan(ms, ends, done[0] if done else None))
        if plans:
            out[n] = plans
    return out


def _versions(log: Path) -> dict[int, list[tuple[float, Path]]]:
    """The journal's earlier copies of a log's files (N.<mtime_ns>): N -> [(mtime ms, path)]."""
    found: dict[int, list[tuple[float, Path]]] = {}
    if not log.is_dir():
        return found
    for path in log.iterdir():
        n, _, ns = path.name.partition(".")
        if n.isdigit() and ns.isdigit():
            found.setdefault(int(n), []).append((int(ns) / 1e6, path))
    return {n: sorted(v) for n, v in found.items()}


def _mtimes_ms(checkpoint: Path, journal: Path, n: int) -> list[float]:
    """Every time commits/N was written, as the checkpoint and the journal's copies say."""
    out = [ms for ms, _ in _versions(journal / "commits").get(n, [])]
    for path in (checkpoint / "commits" / str(n), journal / "commits" / str(n)):
        try:
            out.append(path.stat().st_mtime_ns / 1e6)
        except OSError:
            continue
    return out


def _first_ends(path: Path) -> dict[int, int]:
    """The first source's end offsets in an offsets/N file, as the topic's (a Kafka line names
    its one topic; a Delta line is translated by the case's manifest)."""
    line = path.read_text().splitlines()[2]
    offset = json.loads(line)
    case_dir = path.parents[2] if len(path.parents) > 2 else None
    if delta_source.is_delta_offset(offset):
        return delta_source.topic_offsets(offset, "", case_dir)
    topics = list(offset.values())
    return {int(p): int(o) for p, o in topics[0].items()} if len(topics) == 1 else {}


def read_queries(checkpoints: list[Path], topic: str) -> list[Batch]:
    """The batches of every query a case ran, in order."""
    return [b for k, cp in enumerate(checkpoints) for b in read_batches(cp, topic, k, purged=True)]


def committed_watermark(checkpoint: Path, topic: str) -> int:
    """The highest watermark a committed batch ran with (-1 when none is committed)."""
    return max((b.watermark_ms for b in read_batches(checkpoint, topic) if b.committed), default=-1)


def committed_offsets(checkpoint: Path, topic: str) -> dict[int, int]:
    """Partition -> the end offset of the last committed batch (what the query has read)."""
    done = [b for b in read_batches(checkpoint, topic) if b.committed]
    return dict(done[-1].end_offsets) if done else {}
