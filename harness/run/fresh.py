"""Freshly started services for a sustain search's confirming trial.

A search's trials share the run's services (harness/run/stack.py), and by the time a rate
is found the broker's JIT, its page cache and PostgreSQL's buffers are warm from every
trial before it. A rate that held only on services in that state is not one a freshly
deployed stack holds: q3, q5, q8, q11, q21 and q22's medians, each tried once more on
freshly started services, fell behind (docs/performance.md). So before a confirming trial
the search stops the services the run started (everything of the registry's under the
run's services directory: the broker or brokers, PostgreSQL, Toxiproxy, a standalone Spark
cluster) and starts new ones, with new data directories, in `services/fresh-<n>`. The
trial's Spark driver is always its own. Services the scenario names (an existing Kafka or
PostgreSQL) or a pytest session's, which the run did not start, are left as they are: only
what `start_stack` starts is fresh.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from harness.run.stack import Stack, start_stack


class Services:
    """The stack a search's trials run on, restarted on demand (`restart`)."""

    def __init__(self, scenario, stack: Stack, services_dir: Path, registry, progress):
        self.scenario = replace(scenario, faults=())   # a trial runs without faults: no proxy
        self.stack, self.services_dir = stack, Path(services_dir)
        self.registry, self.progress = registry, progress
        self.restarts = 0

    def restart(self) -> list[str]:
        """Stop the run's own services and start new ones; the names of those started (none
        when the scenario names every service)."""
        own = self.own()
        self.progress.step("sustain: freshly started services for the confirming trial"
                           + (f" (stopping {', '.join(s.name for s in own)})" if own else ""))
        for service in reversed(own):
            service.stop()
        self.restarts += 1
        where = self.services_dir / f"fresh-{self.restarts}"
        self.stack = start_stack(self.scenario, where, self.registry, self.progress)
        return [s.name for s in self.own() if _under(s.workdir, where)]

    def own(self) -> list:
        """The running services the run started, in start order."""
        return [s for s in self.registry.services if s.running and _under(s.workdir, self.services_dir)]


def _under(path: Path, parent: Path) -> bool:
    try:
        return Path(path).resolve().is_relative_to(parent.resolve())
    except OSError:
        return False
