"""restart-broker: stop the Kafka broker (clean or hard) and start it again on its data."""

from __future__ import annotations

import time

from faults.base import Fault, Observation
from faults.kinds import DOWNTIME, TARGET, FaultKind, Key, always
from workloads.wait import WaitTimeout


class RestartBroker(Fault):
    """mode = clean: SIGTERM and a controlled shutdown; hard: SIGKILL. Same data directory
    and ports on restart."""

    broker = None

    def _inject(self) -> None:
        self.broker, named = self.targets.broker(self.spec.target, self.spec.salt())
        self.targets.processes(self.broker.pids())   # refuses a pid this run did not start
        self.target = f"{named} (pid {self.broker.pid}, {self.spec.mode})"
        (self.broker.stop if self.spec.mode == "clean" else self.broker.kill)()
        self.killed_at = time.time()   # down from here: a clean stop's shutdown is not downtime

    def _heal(self) -> None:
        broker = self.broker
        if broker is None or broker.running:
            return   # never stopped: nothing to start
        broker.start().wait_ready()
        self.restarted_at = time.time()

    def restore(self) -> bool:
        """A broker alone that came back from a crash runs on Kafka's lease (a real node's, which
        a crash must wait out): the harness's own lease is put back once the case is over."""
        return self.broker is not None and self.broker.restore_lease()

    def observe(self) -> Observation:
        back = self.restarted_at
        if back is None:
            return Observation(False, f"{self.target} was stopped but did not come back")
        try:
            self.targets.wait(lambda: self.targets.batches_after(back), "restart",
                              f"{self.target} came back, but no batch completed", 0.5)
        except WaitTimeout as exc:
            return Observation(False, str(exc))
        assert self.injected_at is not None
        down = round(back - self.injected_at, 3)
        return Observation(True, f"{self.target} was down {down:.1f}s ({self.spec.downtime_s:g}s asked, then "
                                 f"{self.startup_s() or 0:.1f}s to start); batches resumed",
                           {"downtime_s": down, "startup_s": self.startup_s()})


MODES = ("clean", "hard")

RESTART_BROKER_FAULT = FaultKind(
    "restart-broker", RestartBroker,
    about="stop the broker (`mode = \"clean\"`: SIGTERM, a controlled shutdown; `\"hard\"`: SIGKILL) and "
          "start it again on the same data after `downtime`; batches must resume",
    models="a broker restart for an upgrade (clean), or a broker crash (hard)",
    keys=(TARGET, Key("mode", "choice", "clean (SIGTERM) or hard (SIGKILL)", default="hard", choices=MODES,
                      draw="choice"), DOWNTIME),
    # a cluster's node: "broker:N", "leader" (of a partition of the case's topic), "controller"
    targets=("broker", "leader", "controller"), default_target="broker", restarts=True,
    requires=always("own-kafka"))
