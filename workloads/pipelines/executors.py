"""Spark's executors as the driver sees them: every executor added or removed, appended to a
JSON-lines file while the query runs, so that an executor lost to something nobody scheduled
(the OOM killer, a person with `kill`) is on record with its time.

One line per change: {"at_ms", "event": "added" | "removed", "id", "driver_pid", "startup"}.
The executors of the driver's first look are "added" with startup true: the harness sets
those apart.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

POLL_S = 0.5


class ExecutorWatch:
    """Polled from the driver's loop; one py4j call every POLL_S."""

    def __init__(self, spark, path: str | Path, every_s: float = POLL_S):
        self.spark, self.path, self.every_s = spark, Path(path) if path else None, every_s
        self.known: set[str] = set()
        self.last = 0.0
        self.looked = False

    def poll(self) -> None:
        if self.path is None or time.monotonic() - self.last < self.every_s:
            return
        self.last = time.monotonic()
        try:
            listed = self.spark.sparkContext._jsc.sc().getExecutorIds().mkString(",")
        except Exception:  # noqa: BLE001 - the context is stopping: nothing more to watch
            return
        ids = {i for i in listed.split(",") if i}
        now_ms = time.time_ns() // 1_000_000
        startup, self.looked = not self.looked, True
        lines = [{"at_ms": now_ms, "event": "added", "id": i, "driver_pid": os.getpid(), "startup": startup}
                 for i in sorted(ids - self.known, key=int)]
        lines += [{"at_ms": now_ms, "event": "removed", "id": i, "driver_pid": os.getpid(), "startup": False}
                  for i in sorted(self.known - ids, key=int)]
        self.known = ids
        if lines:
            with self.path.open("a") as out:
                out.write("".join(json.dumps(line) + "\n" for line in lines))


def read(path: Path) -> list[dict]:
    """The changes recorded so far, in order (a line being written is left out)."""
    if not Path(path).exists():
        return []
    out = []
    for line in Path(path).read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out
