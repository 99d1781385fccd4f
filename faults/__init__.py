"""Fault injectors: what goes wrong, on purpose, while a case runs.

A fault kind is declared once (faults/kinds.py: its keys, targets and injector) in the
module of its injector, and registered in faults/registry.py. An injector has three
methods (faults/base.py):
  inject()   make the fault happen (SIGKILL an executor, SIGSTOP the broker, hold a lock)
  heal()     undo it if it lasts (SIGCONT, release the lock); called once, always, even
             when the run is interrupted
  observe()  whether its effect was seen, in a sentence, with figures for recovery
It acts only on what the harness hands it, the service objects and their pids, and
imports nothing from `harness`: faults sit between the harness (above) and the
workloads (below).
"""
