"""Fault injectors: what goes wrong, on purpose, while a case runs.

An injector is a small object with two methods:
  inject()   make the fault happen (SIGKILL an executor, SIGSTOP the broker, hold a lock)
  heal()     undo it if it lasts (SIGCONT, release the lock); called once, always, even
             when the run is interrupted
It acts only on what the harness hands it, the service objects and their pids, and
imports nothing from `harness`: faults sit between the harness (above) and the
workloads (below).
"""

from __future__ import annotations

from typing import Protocol


class Injector(Protocol):
    def inject(self) -> None: ...
    def heal(self) -> None: ...
