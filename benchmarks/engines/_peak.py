"""The process's peak resident memory, sampled every 50 ms in a thread."""

from __future__ import annotations

import threading

import psutil


class Peak:
    def __init__(self):
        self.bytes = 0
        self._stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.wait(0.05):
            self.bytes = max(self.bytes, me.memory_info().rss)

    @property
    def mb(self) -> int:
        return self.bytes >> 20
