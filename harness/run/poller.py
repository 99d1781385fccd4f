"""A thread that calls poll() every interval while a case runs, and once more at stop()."""

from __future__ import annotations

import threading
from typing import Self


class Poller:
    """start() with the case, stop() before its result is built; a poll that raises is
    skipped: what watches a run must never take it down."""

    def __init__(self, interval_s: float, name: str):
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def poll(self) -> None:
        raise NotImplementedError

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self, join_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread.ident:
            self._thread.join(join_s)
        self.poll()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - a watch must never take the run down
                pass
