"""The driver's progress log: one StreamingQueryProgress JSON per line, appended as batches end.

Read while the driver writes, and after a driver killed mid-append: a line that does not
parse (half written, or cut by SIGKILL) is passed over rather than failing the reader.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path


def read(path: Path) -> list[dict]:
    """The records in the order they ran (batch ids repeat when a restarted query runs a
    batch again, and start again at 0 on a fresh checkpoint)."""
    if not Path(path).exists():
        return []
    records = []
    for line in Path(path).read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "timestamp" in record and "batchId" in record:
            records.append(record)
    return sorted(records, key=start_ms)


def start_ms(record: dict) -> float:
    """When the batch started, in epoch milliseconds on the real clock: a record written while a
    clock fault moved the driver JVM's clock says by how much (`clock_offset_ms`)."""
    at = datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00")).timestamp() * 1000
    return at - record.get("clock_offset_ms", 0)


def end_ms(record: dict) -> float:
    """When the batch ended, in epoch milliseconds on the real clock."""
    return start_ms(record) + record.get("batchDuration", 0)
