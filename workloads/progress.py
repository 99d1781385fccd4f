"""Progress on long work: steps as lines, and a status line that updates in place.

On a terminal `update` rewrites one line with a carriage return. Anywhere else (a pipe, a
file, a CI log) it writes whole lines, at most one every `every_s` seconds, so the log
stays readable.
"""

from __future__ import annotations

import sys
import time


class Progress:
    """Writes to stderr (or `stream`)."""

    def __init__(self, stream=None, every_s: float = 5.0):
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.tty = self.stream.isatty()
        self.every_s = every_s
        self._last_update = float("-inf")
        self._dirty = False

    def _stamp(self) -> str:
        return f"[{time.monotonic() - self.started:7.1f}s]"

    def step(self, message: str) -> None:
        """A line of its own: a stage begins or an event happened."""
        self._clear()
        print(f"{self._stamp()} {message}", file=self.stream, flush=True)

    def update(self, message: str) -> None:
        """The current state of long work; cheap to call often."""
        now = time.monotonic()
        if self.tty:
            self.stream.write(f"\r\033[K{self._stamp()}   {message}")
            self.stream.flush()
            self._dirty = True
        elif now - self._last_update >= self.every_s:
            print(f"{self._stamp()}   {message}", file=self.stream, flush=True)
            self._last_update = now

    def done(self) -> None:
        """End the status line (a terminal's cursor goes to a new line)."""
        if self._dirty:
            self.stream.write("\n")
            self.stream.flush()
            self._dirty = False

    def _clear(self) -> None:
        if self._dirty:
            self.stream.write("\r\033[K")
            self._dirty = False
