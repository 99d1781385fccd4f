"""Progress on long work: steps as lines, and a status line that updates in place.

On a terminal `update` rewrites one line with a carriage return. Anywhere else (a pipe, a
file, a CI log) it writes whole lines, at most one every `every_s` seconds, so the log
stays readable.

Progress is for the eyes: when its stream is gone (the pipe's reader died: a test runner
killed by hand, `| head`), it goes quiet, and the work goes on to its results. A run killed
its own way by a broken pipe lost its first cases' results (run of 2026-11-26 07:02, status
"error: BrokenPipeError").
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
        self.gone = False   # the stream broke: nothing more is written

    def _write(self, text: str) -> None:
        if self.gone:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (BrokenPipeError, ValueError, OSError):   # the reader is gone, or the stream closed
            self.gone = True

    def _stamp(self) -> str:
        return f"[{time.monotonic() - self.started:7.1f}s]"

    def step(self, message: str) -> None:
        """A line of its own: a stage begins or an event happened."""
        self._clear()
        self._write(f"{self._stamp()} {message}\n")

    def update(self, message: str) -> None:
        """The current state of long work; cheap to call often."""
        now = time.monotonic()
        if self.tty:
            self._write(f"\r\033[K{self._stamp()}   {message}")
            self._dirty = True
        elif now - self._last_update >= self.every_s:
            self._write(f"{self._stamp()}   {message}\n")
            self._last_update = now

    def done(self) -> None:
        """End the status line (a terminal's cursor goes to a new line)."""
        if self._dirty:
            self._write("\n")
            self._dirty = False

    def _clear(self) -> None:
        if self._dirty:
            self._write("\r\033[K")
            self._dirty = False
