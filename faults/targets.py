"""What the harness hands the injectors: its services, their pids, and a few callables.

Injectors touch nothing else. Before any signal, `process()` checks the pid against
every pid the harness started and keeps a psutil handle, which refuses to signal a
pid that was reused by another process (psutil compares start times).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from workloads.pipelines import progress_log


class RefusedTarget(Exception):
    """A target that the harness did not start, or that is gone: no signal is sent."""


@dataclass
class Targets:
    """The processes and hooks of one case under way."""

    driver: Callable[[], Any]             # the case's current driver service (it changes on restart)
    # start a new driver (same checkpoint, or fresh for at-most-once), with changed settings if given
    restart_driver: Callable[..., None]
    expect_down: Callable[[bool], None]   # say that the driver's death is intended (or no longer)
    control_dir: Path                     # the driver's control channel (workloads.pipelines.control)
    executors_log: Path                   # the driver's own list of its executors (pipelines/executors.py)
    progress: Callable[[], list[dict]]    # the driver's progress records so far, in order
    checkpoint: Callable[[], Path]        # the current query's checkpoint
    started_pids: Callable[[], set[int]]  # every pid the harness started in this run
    # the case's newest driver at once, even while a fault has it down or restarting (driver()
    # waits for it to be up: what other faults must do meanwhile)
    driver_now: Callable[[], Any] = lambda: None
    services: dict[str, Any] = field(default_factory=dict)   # "broker", "postgres": service objects
    postgres_url: str | None = None
    sink_table: str | None = None
    seed: int = 0
    topic: str = ""                       # the case's topic
    bootstrap_servers: str = ""           # Kafka, as the harness reaches it (not through a proxy)
    # path ("kafka", "postgres", "broker:N") -> (Toxiproxy server, its proxies' names, a probe through them)
    network: dict[str, tuple[Any, list[str], Callable[[], float]]] = field(default_factory=dict)
    # Kafka ports: (the proxies Spark must use, the brokers' own ports Spark must not use)
    spark_ports: Callable[[], tuple[set[int], set[int]]] | None = None

    def rng(self, salt: str) -> random.Random:
        """A generator seeded by the scenario's seed and `salt`: the same plan every run."""
        return random.Random(f"{self.seed}:{salt}")

    def process(self, pid: int) -> psutil.Process:
        """A handle on `pid`, refused unless the harness started it and it still runs."""
        if pid not in self.started_pids():
            raise RefusedTarget(f"pid {pid} was not started by this run: no signal sent")
        try:
            proc = psutil.Process(pid)
        except psutil.NoSuchProcess:
            raise RefusedTarget(f"pid {pid} is gone") from None
        return proc

    def processes(self, pids: list[int]) -> list[psutil.Process]:
        """Handles on those of `pids` this run started and that still run; one that ended
        between the listing and now (a short-lived PostgreSQL backend) is left out."""
        started = self.started_pids()
        refused = [pid for pid in pids if pid not in started]
        if refused:
            raise RefusedTarget(f"pids {refused} were not started by this run: no signal sent")
        handles = []
        for pid in pids:
            try:
                handles.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                continue
        return handles

    def executors(self) -> list[psutil.Process]:
        """The driver's executor processes, oldest first (executor:0 is the oldest)."""
        procs = self.processes(self.driver().executor_pids())
        return sorted(procs, key=lambda p: p.create_time())

    def service(self, name: str) -> Any:
        if name == "driver":
            return self.driver()
        if name not in self.services:
            raise RefusedTarget(f"this run has no {name} of its own (an external one is never touched)")
        return self.services[name]

    def brokers(self) -> dict[int, Any]:
        """Node id -> broker service, for every broker of this run's own Kafka."""
        nodes = {int(k.partition(":")[2]): v for k, v in self.services.items() if k.startswith("broker:")}
        return nodes or ({1: self.services["broker"]} if "broker" in self.services else {})

    def broker(self, target: str, salt: str) -> tuple[Any, str]:
        """The broker `target` names ("broker", "broker:N", "leader": the leader of a partition
        of the case's topic chosen from the seed, "controller": the active controller), with a
        sentence saying how it was chosen."""
        nodes = self.brokers()
        if not nodes:
            raise RefusedTarget("this run has no Kafka of its own (an external one is never touched)")
        kind, _, index = target.partition(":")
        if kind == "broker":
            node = int(index) if index else min(nodes)
            if node not in nodes:
                raise RefusedTarget(f"there is no broker {node} (brokers {sorted(nodes)})")
            return nodes[node], f"broker:{node}"
        from workloads import kafka_admin

        if kind == "controller":
            node = kafka_admin.controller(self.bootstrap_servers)
            return nodes[node], f"controller (broker:{node})"
        leaders = kafka_admin.leaders(self.bootstrap_servers, self.topic)
        partition = self.rng(salt).choice(sorted(leaders))
        return nodes[leaders[partition]], f"leader of partition {partition} (broker:{leaders[partition]})"

    def batches_after(self, at: float) -> list[dict]:
        """Progress records of batches that ended after wall-clock time `at`."""
        return [p for p in self.progress() if end_s(p) > at]


def end_s(progress: dict) -> float:
    """When a batch ended, in epoch seconds."""
    return progress_log.end_ms(progress) / 1000


def wait_for(condition: Callable[[], Any], timeout_s: float, every_s: float = 0.2) -> Any:
    """Poll `condition` until it is truthy or `timeout_s` passes; return its last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(every_s)
