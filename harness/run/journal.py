"""Keep every batch's offsets/N and commits/N while a case runs.

Spark keeps the last 100 batches of a checkpoint's logs (spark.sql.streaming.minBatchesToRetain)
and deletes the rest. The checker needs every batch a case ran (what each read, its watermark,
when it committed), so an hour at a batch a second would otherwise be checked against its last
100 seconds. A thread copies each log file, with its mtime, to `<checkpoint>.journal/` as it
appears; harness.check.checkpoint reads the journal for the batches Spark has purged. A file
Spark writes again (a batch planned or run again after a fault) keeps its earlier copies beside
it, as N.<mtime_ns>. The query itself runs with Spark's defaults: the measured system is not
changed to suit the harness.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from harness.check.checkpoint import LOGS, journal_of
from harness.run.poller import Poller

POLL_S = 1.0   # Spark purges a batch 100 batches after it: minutes at any trigger the harness runs


class Journal(Poller):
    """start() with the case's driver, stop() before its result is built."""

    def __init__(self, checkpoints: Callable[[], list[Path]]):
        super().__init__(POLL_S, "checkpoint-journal")
        self.checkpoints = checkpoints
        self._copied: dict[Path, int] = {}   # source file -> the mtime_ns copied

    def poll(self) -> None:
        for checkpoint in list(self.checkpoints()):
            for log in LOGS:
                self._copy(checkpoint / log, journal_of(checkpoint) / log)

    def _copy(self, source: Path, target: Path) -> None:
        try:
            names = [p for p in source.iterdir() if p.name.isdigit()]
        except FileNotFoundError:
            return
        for path in names:
            try:
                mtime = path.stat().st_mtime_ns
                if self._copied.get(path) == mtime:
                    continue
                target.mkdir(parents=True, exist_ok=True)
                _keep_earlier(target / path.name, mtime)
                shutil.copy2(path, target / path.name)
                self._copied[path] = mtime
            except FileNotFoundError:   # purged, or deleted by a fault, between listing and copying
                continue


def _keep_earlier(copy: Path, mtime_ns: int) -> None:
    """A log file Spark wrote again (offsets/N of a batch planned again after a fault removed it,
    commits/N of a batch run again): the journal's earlier copy stays, as N.<its mtime_ns>, so
    that the findings can tell a batch id's two runs apart (harness.check.checkpoint.versions)."""
    try:
        was = copy.stat().st_mtime_ns
    except FileNotFoundError:
        return
    if was != mtime_ns:
        copy.rename(copy.with_name(f"{copy.name}.{was}"))
