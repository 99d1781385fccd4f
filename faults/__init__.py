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


# kind -> "module:class"; the modules are imported when a fault of that kind is made
INJECTORS = {
    "kill-executor": "faults.process:KillExecutor",
    "pause": "faults.process:Pause",
    "kill-driver": "faults.driver:KillDriver",
    "replay-batch": "faults.driver:ReplayBatch",
    "delay-commit": "faults.commit:DelayCommit",
    "stall-sink": "faults.sink:StallSink",
    "restart-broker": "faults.broker:RestartBroker",
    "network": "faults.network:Network",
}


def make(spec, targets):
    """The injector for `spec` (a faults.spec.FaultSpec), acting on `targets`."""
    import importlib

    module, _, name = INJECTORS[spec.kind].partition(":")
    return getattr(importlib.import_module(module), name)(spec, targets)
