"""Read Spark's streaming checkpoint: the offset log and the commit log.

`offsets/N`: line `v1`, a JSON line with `batchWatermarkMs`, then one JSON line per
source ({topic: {partition: end offset}}). `commits/N`: `v1`, then a JSON line.
A batch with an offsets file but no commits file was planned but not committed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Batch:
    batch_id: int
    watermark_ms: int              # the watermark this batch ran with (evicts windows ending <= it)
    end_offsets: dict[int, int]    # partition -> end offset (exclusive) for the topic
    committed: bool


def read_batches(checkpoint: Path, topic: str) -> list[Batch]:
    """Every planned batch in id order, with its end offsets for `topic`."""
    offsets_dir, commits_dir = checkpoint / "offsets", checkpoint / "commits"
    if not offsets_dir.is_dir():
        return []
    committed = set()
    if commits_dir.is_dir():
        committed = {int(p.name) for p in commits_dir.iterdir() if p.name.isdigit()}
    batches = []
    for path in sorted((p for p in offsets_dir.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)):
        lines = path.read_text().splitlines()
        meta = json.loads(lines[1])
        ends = {}
        for line in lines[2:]:
            source = json.loads(line) if line.strip() not in ("", "-") else {}
            ends.update({int(p): int(o) for p, o in source.get(topic, {}).items()})
        batch_id = int(path.name)
        batches.append(Batch(batch_id, int(meta.get("batchWatermarkMs", 0)), ends, batch_id in committed))
    return batches


def committed_watermark(checkpoint: Path, topic: str) -> int:
    """The highest watermark a committed batch ran with (-1 when none is committed)."""
    return max((b.watermark_ms for b in read_batches(checkpoint, topic) if b.committed), default=-1)
