"""Faults on the nodes of clusters the harness started: a Kafka broker lost (the leader of a
partition the query reads, the controller, or one by number), a Spark standalone worker lost
with every executor it ran."""

from __future__ import annotations

import time

from faults.base import Fault, Observation
from faults.kinds import FaultKind, Key, always
from faults.targets import RefusedTarget, wait_for
from workloads import kafka_admin

ELECTION_TIMEOUT_S = 60.0
RECOVERY_TIMEOUT_S = 120.0
# what a broker target may name (faults/targets.py Targets.broker)
BROKER_TARGETS = ("broker", "leader", "controller")


class KillBroker(Fault):
    """SIGKILL one broker of the harness's Kafka; with `downtime`, start it again after it
    (without: it stays down until the case ends). A partition it led must get a new leader,
    and the query must go on reading."""

    def _inject(self) -> None:
        self.broker, self.named = self.targets.broker(self.spec.target, f"{self.spec.kind}@{self.spec.at_s}")
        self.targets.processes(self.broker.pids())   # refuses a pid this run did not start
        self.led_before = kafka_admin.leaders(self._others(), self.targets.topic)
        self.target = f"{self.named} (pid {self.broker.pid})"
        self.killed_at = time.time()
        self.broker.kill()
        # the election, timed here: the first metadata in which no partition names the dead node
        gone = self.broker.node_id
        self.led_after = wait_for(lambda: self._leaders_without(gone), ELECTION_TIMEOUT_S, 0.1)
        self.elected_at = time.time() if self.led_after else None

    def _others(self) -> str:
        """A bootstrap list without the broker about to be killed (or already dead)."""
        node = getattr(self, "broker", None)
        addresses = [b.bootstrap_servers for b in self.targets.brokers().values() if b is not node]
        return ",".join(addresses) or self.targets.bootstrap_servers

    def _leaders_without(self, node: int) -> dict[int, int] | None:
        try:
            leaders = kafka_admin.leaders(self._others(), self.targets.topic)
        except Exception:  # noqa: BLE001 - the cluster is electing: ask again
            return None
        return leaders if leaders and all(lead not in (node, -1) for lead in leaders.values()) else None

    def _heal(self) -> None:
        if self.spec.downtime_s and getattr(self, "broker", None) is not None and not self.broker.running:
            self.broker.start().wait_ready()
            self.back_at = time.time()

    def restore(self) -> bool:
        if getattr(self, "broker", None) is None or self.broker.running:
            return False
        self.broker.start().wait_ready()
        return True

    def observe(self) -> Observation:
        moved = {p: (self.led_before.get(p), leader) for p, leader in (self.led_after or {}).items()
                 if self.led_before.get(p) != leader}
        if self.led_after is None:
            return Observation(False, f"{self.target} was killed, but no new leader was elected within "
                                      f"{ELECTION_TIMEOUT_S:.0f}s")
        reading = wait_for(lambda: [p for p in self.targets.batches_after(self.killed_at)
                                    if p.get("numInputRows", 0) > 0], RECOVERY_TIMEOUT_S, 0.5)
        election_s = round((self.elected_at or self.killed_at) - self.killed_at, 3)
        facts = {"election_s": election_s, "downtime_s": round(self.back_at - self.killed_at, 3)
                 if hasattr(self, "back_at") else None}
        if not reading:
            return Observation(False, f"{self.target} was killed and leaders moved, but no batch read a "
                                      f"record within {RECOVERY_TIMEOUT_S:.0f}s", facts)
        first = min(time.mktime(time.strptime(p["timestamp"][:19], "%Y-%m-%dT%H:%M:%S")) for p in reading)
        facts["first_batch_after_s"] = round(max(0.0, first - self.killed_at), 3)
        moves = ", ".join(f"partition {p} {a} -> {b}" for p, (a, b) in sorted(moved.items())) or "none it led"
        return Observation(True, f"{self.target} killed; new leaders elected in {election_s:.1f}s ({moves}); "
                                 f"the query went on reading", facts, landed=True,
                           proof=f"leaders before {self.led_before}, after {self.led_after}",
                           more={"leaders_before": self.led_before, "leaders_after": self.led_after})


class KillWorker(Fault):
    """SIGKILL a Spark standalone worker's process group: the worker and every executor it
    ran. The master must give the application new executors on the other workers; with
    `downtime` the worker is started again after it."""

    def _inject(self) -> None:
        name = self.spec.target
        self.worker = self.targets.service(name)
        self.driver = self.targets.driver()
        self.before = set(self.driver.executor_pids())
        self.lost = set(self.worker.pids()) & self.before
        if not self.lost:
            raise RefusedTarget(f"{name} runs no executor of this case's application (executors: "
                                f"{sorted(self.before)})")
        self.target = f"{name} (pid {self.worker.pid}, executors {sorted(self.lost)})"
        self.killed_at = time.time()
        self.worker.kill()

    def _heal(self) -> None:
        if self.spec.downtime_s and getattr(self, "worker", None) is not None and not self.worker.running:
            self.worker.start().wait_ready()

    def restore(self) -> bool:
        if getattr(self, "worker", None) is None or self.worker.running:
            return False
        self.worker.start().wait_ready()
        return True

    def observe(self) -> Observation:
        def replaced():
            now = set(self.driver.executor_pids())
            return now - self.before if now & self.lost == set() and now - self.before else None

        new = wait_for(replaced, RECOVERY_TIMEOUT_S, 0.5)
        if not new:
            return Observation(False, f"{self.target} was killed, but no executor replaced its "
                                      f"{len(self.lost)} within {RECOVERY_TIMEOUT_S:.0f}s")
        back = round(time.time() - self.killed_at, 3)
        return Observation(True, f"{self.target} killed with its executors {sorted(self.lost)}; the master "
                                 f"gave the application executors {sorted(new)} after {back:.1f}s",
                           {"executor_back_s": back}, landed=True,
                           proof=f"executors lost {sorted(self.lost)}, replaced by {sorted(new)}",
                           more={"executors_lost": sorted(self.lost), "executors_new": sorted(new)})


KILL_BROKER_FAULT = FaultKind(
    "kill-broker", KillBroker,
    about="SIGKILL one broker of the harness's Kafka: `target` is `leader` (the leader of a partition of the "
          "case's topic, chosen from the seed), `controller`, or `broker:N`; with `downtime` it starts again "
          "after it (without, it stays down). A new leader must be elected (the admin API's metadata before "
          "and after) and the query must go on reading",
    models="a Kafka broker lost: its machine, its disk or its JVM",
    keys=(Key("target", "target", "which broker", default=None),
          Key("downtime", "duration", "how long it stays down (default: until the case ends)", default="0s",
              draw="short")),
    targets=BROKER_TARGETS, default_target="leader", nemesis_targets=("leader",),
    recovery_keys=("election_s",), requires=always("own-kafka", "kafka-cluster"))

KILL_WORKER_FAULT = FaultKind(
    "kill-worker", KillWorker,
    about="SIGKILL a worker of the harness's Spark standalone cluster (`target = \"worker:N\"`) with the "
          "executors it runs; the master must give the application new executors on the other workers; with "
          "`downtime` the worker starts again after it",
    models="a lost Spark worker node, and every executor on it",
    keys=(Key("target", "target", "which worker", default=None),
          Key("downtime", "duration", "how long it stays down (default: until the case ends)", default="0s",
              draw="short")),
    targets=("worker",), default_target="worker:0", nemesis_targets=("worker:0", "worker:1"),
    recovery_keys=("executor_back_s",), requires=always("own-standalone"))
