"""Fault specs: what a scenario's `[[faults]]` entries say, before anything is injected.

    [[faults]]
    kind = "kill-driver"      # one of KINDS
    at = "8s"                 # counted from the first event sent
    downtime = "3s"           # kind-specific keys, listed in KINDS

A spec is data (it serialises to JSON for summary.json); the injectors in this package
turn it into action against the processes the harness hands them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Kind:
    """A fault kind: the keys it takes besides `kind` and `at`, and what it targets."""

    keys: tuple[str, ...]
    targets: tuple[str, ...]
    default_target: str
    about: str


# name -> Kind; `target` names a process the harness started: "executor:0" (by index),
# "executor:random" (chosen from the scenario's seed), "driver", "broker", "postgres"
KINDS: dict[str, Kind] = {
    "kill-executor": Kind(("target", "via"), ("executor",), "executor:0",
                          "SIGKILL one executor (via = signal) or ask Spark to kill it (via = spark-api); "
                          "local-cluster launches a replacement"),
    "kill-driver": Kind(("downtime",), ("driver",), "driver",
                        "SIGKILL the driver's process tree, start a new one after `downtime`"),
    "pause": Kind(("target", "duration"), ("executor", "driver", "broker", "postgres"), "driver",
                  "SIGSTOP the target for `duration`, then SIGCONT (a long GC pause)"),
    "delay-commit": Kind(("duration",), ("driver",), "driver",
                         "hold the next batch that wrote rows between the sink's write and Spark's "
                         "commit log for `duration`: the window in which a crash makes a replay"),
    "stall-sink": Kind(("duration",), ("sink",), "sink",
                       "block the sink for `duration` (PostgreSQL: another session holds a lock "
                       "on the sink table)"),
    "restart-broker": Kind(("mode", "downtime"), ("broker",), "broker",
                           "stop the broker (mode = clean: SIGTERM, hard: SIGKILL) and start it again "
                           "on the same data after `downtime`"),
    "network": Kind(("target", "duration", "latency", "jitter", "bandwidth", "reset"), ("kafka", "postgres"),
                    "kafka", "toxics on Spark's path to Kafka or to PostgreSQL, through a Toxiproxy the "
                    "harness owns: latency with jitter, a bandwidth limit (KB/s), connection resets"),
    "replay-batch": Kind(("downtime",), ("driver",), "driver",
                         "hold the next batch that wrote rows after the sink's write, kill the driver "
                         "there and start again: the batch is in the offset log and not in the commit "
                         "log, so Spark re-executes it with its id"),
}
VIAS = ("signal", "spark-api")
# kinds whose heal starts a process again (a driver takes ~16-20 s on 2 cores): the workload
# must go on this long after the heal, or the new process has nothing to show it is back
RESTARTING = {"kill-driver", "replay-batch", "restart-broker"}
RESTART_MARGIN_S = 20.0
MODES = ("clean", "hard")


@dataclass(frozen=True)
class FaultSpec:
    """One fault of a scenario's schedule."""

    kind: str
    at_s: float
    target: str
    duration_s: float = 0.0
    downtime_s: float = 0.0
    via: str = "signal"
    mode: str = "hard"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def target_kind(self) -> str:
        """"executor" of "executor:1"."""
        return self.target.partition(":")[0]

    @property
    def target_index(self) -> str:
        """"1" of "executor:1", "random" of "executor:random", "" of "driver"."""
        return self.target.partition(":")[2]

    @property
    def lasts_s(self) -> float:
        """How long after `at` the fault is still in effect (its duration or downtime)."""
        return max(self.duration_s, self.downtime_s)

    def describe(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v not in ({}, "")}
