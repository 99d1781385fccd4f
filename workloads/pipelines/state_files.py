"""A state store's files in a query's checkpoint, as Spark lays them out:

    state/<operator>/<partition>[/<store>]/<version>[_<unique id>].<zip|changelog|delta|snapshot>

(RocksDB writes `<version>.zip` snapshots with their SSTs beside them, or `<version>.changelog`
with changelog checkpointing; the HDFS-backed store `<version>.delta` and `.snapshot`; with
checkpoint format v2 the name carries a unique id.) A batch N commits version N + 1.
"""

from __future__ import annotations

import re
from pathlib import Path

_VERSION_FILE = re.compile(r"(?:^|/)state/(\d+)/(\d+)/(?:[^/]+/)*(\d+)(?:_[^/.]+)?"
                           r"\.(zip|changelog|delta|snapshot)$")


def parse(path: str) -> dict | None:
    """{"operator", "partition", "version", "file"} for a state store version file (`path` under
    the checkpoint, with or without a leading slash); None for another file (an SST, a checksum,
    a temporary file)."""
    m = _VERSION_FILE.search(path)
    if m is None or Path(path).name.startswith("."):
        return None
    return {"operator": int(m.group(1)), "partition": int(m.group(2)), "version": int(m.group(3)),
            "file": path.lstrip("/")}


def of_version(checkpoint: str | Path, partition: int, version: int) -> list[dict]:
    """Every operator's file of `version` for `partition` in `checkpoint`, with its mtime (ms)."""
    root = Path(checkpoint)
    out = []
    for path in sorted((root / "state").glob(f"*/{partition}/**/{version}*")):
        found = parse(str(path.relative_to(root)))
        if found is not None and found["version"] == version and found["partition"] == partition:
            out.append({**found, "mtime_ms": path.stat().st_mtime_ns // 1_000_000})
    return out
