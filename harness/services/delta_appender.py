"""The appender of a Delta source (workloads/delta_source.py): the case's topic appended to a
Delta table, a commit every `commit_interval`; started before the case's first driver, stopped
after its last one."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from harness.services.base import Service


class DeltaAppender(Service):
    """`topic` on `bootstrap` appended to the table at `table`."""

    ready_timeout_s = 30.0

    def __init__(self, workdir: Path, bootstrap: str, topic: str, table: Path, every_s: float, registry=None):
        super().__init__("delta-appender", workdir, registry)
        self.bootstrap, self.topic, self.table, self.every_s = bootstrap, topic, table, every_s

    def command(self) -> list[str]:
        return [sys.executable, "-m", "workloads.delta_source", self.bootstrap, self.topic, str(self.table),
                "--every", f"{self.every_s * 1000:g}ms"]

    def env(self) -> dict | None:
        root = str(Path(__file__).resolve().parents[2])
        paths = [root, os.environ.get("PYTHONPATH")]
        return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}

    def is_ready(self) -> bool:
        """Version 0 (the table's schema) is written: a query can start on it."""
        return (self.table / "_delta_log" / f"{0:020d}.json").exists()
