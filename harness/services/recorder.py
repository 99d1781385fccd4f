"""The recorder of a job's case (workloads/recorder.py): the case's topic saved to
`<case>/records/` while the case runs, for the batch oracle. A process of its own, as the
Delta appender is: the harness's process keeps its cores for pacing the workload, the registry
stops it whatever happens, and the resource sampler measures what it costs (`recorder`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from harness.services.base import Service
from workloads import records


class Recorder(Service):
    """`topic` on `bootstrap` recorded into `out` (a case's records/ directory)."""

    ready_timeout_s = 30.0
    # SIGTERM asks it to read on to the topic's end and write its last chunk (workloads/recorder.py
    # CATCH_UP_S): give it that long before the registry's SIGKILL
    stop_timeout_s = 45.0

    def __init__(self, workdir: Path, bootstrap: str, topic: str, out: Path, registry=None):
        super().__init__("recorder", workdir, registry)
        self.bootstrap, self.topic, self.out = bootstrap, topic, Path(out)

    def command(self) -> list[str]:
        return [sys.executable, "-m", "workloads.recorder", self.bootstrap, self.topic, str(self.out)]

    def env(self) -> dict | None:
        root = str(Path(__file__).resolve().parents[2])
        paths = [root, os.environ.get("PYTHONPATH")]
        return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}

    def is_ready(self) -> bool:
        """Every partition of the topic is assigned (it wrote its first account)."""
        return records.state(self.out) is not None
