"""The status line while a case sends: events sent, the rate over the last second, and the
consumer lag as of the driver's latest progress report.

The lag is what has been sent (and the warm-up's control events) minus the end offsets of
the last batch Spark reported; it is read at most once a second, from the end of
progress.jsonl only, so the line costs nothing measurable however often it is asked for.
Without progress reports ([measure] enabled = false) the line has no lag.
"""

from __future__ import annotations

import json
import time
from collections import deque
from pathlib import Path

from harness import metrics

READ_EVERY_S = 1.0
TAIL_BYTES = 65_536   # more than one progress record (a few KB), less than a long file


def last_record(path: Path) -> dict | None:
    """The last complete JSON line of `path` (None when there is none yet)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(size - TAIL_BYTES, 0))
            tail = f.read()
    except OSError:
        return None
    for line in reversed(tail.splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue   # the line being written, or cut by the seek
    return None


class LiveStatus:
    def __init__(self, progress_path: Path, topic: str, before: int):
        """`before`: records in the topic ahead of the workload's (the warm-up's control events)."""
        self.path, self.topic, self.before = Path(progress_path), topic, before
        self.sends: deque[tuple[float, int]] = deque()
        self.read_at = float("-inf")
        self.lag = ""

    def line(self, sent: int, planned: int) -> str:
        now = time.monotonic()
        self.sends.append((now, sent))
        while len(self.sends) > 1 and self.sends[0][0] < now - 1.0:
            self.sends.popleft()
        t0, s0 = self.sends[0]
        rate = (sent - s0) / (now - t0) if now > t0 else 0.0
        if now - self.read_at >= READ_EVERY_S:
            self.read_at = now
            self.lag = self._lag(sent)
        return f"sent {sent:,}/{planned:,} at {rate:,.0f} events/s{self.lag}"

    def _lag(self, sent: int) -> str:
        record = last_record(self.path)
        if record is None:
            return ""
        read = sum(metrics.end_offsets(record, self.topic, first_source_only=True).values())
        return f", lag {max(sent + self.before - read, 0):,} records (batch {record.get('batchId')})"
