"""Faults on the nodes of clusters the harness started: a Kafka broker lost (the leader of a
partition the query reads, the controller, or one by number), a Spark standalone worker lost
with every executor it ran."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from faults.base import Details, Fault, Observation
from faults.kinds import FaultKind, Key, always
from faults.targets import RefusedTarget
from workloads import kafka_admin
from workloads.pipelines import progress_log
from workloads.wait import WaitTimeout

# what a broker target may name (faults/targets.py Targets.broker)
BROKER_TARGETS = ("broker", "leader", "controller")


@dataclass
class LeaderMoves(Details):
    """Each partition's leader before the kill and after the election."""

    leaders_before: dict = field(default_factory=dict)
    leaders_after: dict = field(default_factory=dict)


@dataclass
class ExecutorsMoved(Details):
    """The executors the killed worker ran, and those the master gave the application after."""

    executors_lost: list[int] = field(default_factory=list)
    executors_new: list[int] = field(default_factory=list)


class KillBroker(Fault):
    """SIGKILL one broker of the harness's Kafka; with `downtime`, start it again after it
    (without: it stays down until the case ends). A partition it led must get a new leader,
    and the query must go on reading."""

    broker = None
    named = ""
    led_before: dict = {}
    led_after: dict | None = None
    elected_at: float | None = None

    def _inject(self) -> None:
        self.broker, self.named = self.targets.broker(self.spec.target, self.spec.salt())
        self.targets.processes(self.broker.pids())   # refuses a pid this run did not start
        self.led_before = kafka_admin.leaders(self._others(), self.targets.topic)
        self.target = f"{self.named} (pid {self.broker.pid})"
        self.killed_at = time.time()
        self.broker.kill()
        # the election, timed here: the first metadata in which no partition names the dead node
        gone = self.broker.node_id
        try:
            self.led_after = self.targets.wait(lambda: self._leaders_without(gone), "batch",
                                               "no new leader was elected", 0.1)
            self.elected_at = time.time()
        except WaitTimeout:
            self.led_after = None

    def _others(self) -> str:
        """A bootstrap list without the broker about to be killed (or already dead)."""
        node = self.broker
        addresses = [b.bootstrap_servers for b in self.targets.brokers().values() if b is not node]
        return ",".join(addresses) or self.targets.bootstrap_servers

    def _leaders_without(self, node: int) -> dict[int, int] | None:
        try:
            leaders = kafka_admin.leaders(self._others(), self.targets.topic)
        except Exception:  # noqa: BLE001 - the cluster is electing: ask again
            return None
        return leaders if leaders and all(lead not in (node, -1) for lead in leaders.values()) else None

    def _heal(self) -> None:
        if self.spec.downtime_s and self.broker is not None and not self.broker.running:
            self.broker.start().wait_ready()
            self.restarted_at = time.time()

    def restore(self) -> bool:
        if self.broker is None or self.broker.running:
            return False
        self.broker.start().wait_ready()
        return True

    def observe(self) -> Observation:
        moved = {p: (self.led_before.get(p), leader) for p, leader in (self.led_after or {}).items()
                 if self.led_before.get(p) != leader}
        killed = self.killed_at or 0.0
        if self.led_after is None:
            return Observation(False, f"{self.target} was killed, but no new leader was elected within the "
                                      f"{self.targets.pace.wait_s('batch'):g} s the case's pace allows")
        election_s = round((self.elected_at or killed) - killed, 3)
        facts = {"election_s": election_s, "downtime_s": round(self.restarted_at - killed, 3)
                 if self.restarted_at is not None else None}
        try:
            reading = self.targets.wait(lambda: [p for p in self.targets.batches_after(killed)
                                                 if p.get("numInputRows", 0) > 0], "restart",
                                        f"{self.target} was killed and leaders moved, but no batch read a "
                                        "record", 0.5)
        except WaitTimeout as exc:
            return Observation(False, str(exc), facts)
        facts["first_batch_after_s"] = first_read_after_s(reading, killed)
        moves = ", ".join(f"partition {p} {a} -> {b}" for p, (a, b) in sorted(moved.items())) or "none it led"
        return Observation(True, f"{self.target} killed; new leaders elected in {election_s:.1f}s ({moves}); "
                                 f"the query went on reading", facts, landed=True,
                           proof=f"leaders before {self.led_before}, after {self.led_after}",
                           details=LeaderMoves(self.led_before, self.led_after))


def first_read_after_s(reading: list[dict], since: float) -> float:
    """Seconds from `since` (epoch seconds) to the start of the first of the `reading` batches:
    their progress timestamps are UTC ("2026-11-26T05:51:50.123Z"), read as UTC whatever the
    host's zone (progress_log.start_ms), and put back on the real clock under a clock fault."""
    first = min(progress_log.start_ms(p) for p in reading) / 1000
    return round(max(0.0, first - since), 3)


class KillWorker(Fault):
    """SIGKILL a Spark standalone worker's process group: the worker and every executor it
    ran. The master must give the application new executors on the other workers; with
    `downtime` the worker is started again after it."""

    worker = None
    driver = None
    before: set[int] = set()
    lost: set[int] = set()

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
        if self.spec.downtime_s and self.worker is not None and not self.worker.running:
            self.worker.start().wait_ready()
            self.restarted_at = time.time()

    def restore(self) -> bool:
        if self.worker is None or self.worker.running:
            return False
        self.worker.start().wait_ready()
        return True

    def observe(self) -> Observation:
        """Seen when the query goes on without the lost executors, replaced or not. A replacement
        is waited for only where one can come: the worker comes back (`downtime`), or another
        worker runs none of the application's executors; the record says which happened."""
        killed, driver = self.killed_at or 0.0, self.driver
        try:
            self.targets.wait(lambda: [p for p in self.targets.batches_after(killed)
                                       if p.get("numInputRows", 0) > 0], "restart",
                              f"{self.target} was killed, and no batch read a record after it", 0.5)
        except WaitTimeout as exc:
            return Observation(False, str(exc))
        went_on = round(time.time() - killed, 3)

        def replaced():
            now = set(driver.executor_pids())
            return now - self.before if now & self.lost == set() and now - self.before else None

        new: set[int] = replaced() or set()
        room = self._room()
        if not new and room:
            try:
                new = self.targets.wait(replaced, "executor", "no executor replaced them", 0.5)
            except WaitTimeout:
                new = set()
        lost = sorted(self.lost)
        facts: dict[str, float | None]
        if new:
            back = round(time.time() - killed, 3)
            how = f"the master gave the application executors {sorted(new)} after {back:.1f}s"
            facts = {"executor_back_s": back, "query_went_on_s": went_on}
        else:
            why = (f"within {self.targets.pace.wait_s('executor'):g} s, although {room}" if room
                   else self._no_room())
            how = f"no executor replaced them ({why}); the query went on without them after {went_on:.1f}s"
            facts = {"executor_back_s": None, "query_went_on_s": went_on}
        return Observation(True, f"{self.target} killed with its executors {lost}; {how}", facts, landed=True,
                           proof=f"executors lost {lost}, " + (f"replaced by {sorted(new)}" if new
                                                               else "not replaced"),
                           details=ExecutorsMoved(lost, sorted(new)))

    def _room(self) -> str | None:
        """Why a replacement can come (None: it cannot): the worker is started again after its
        downtime, or another worker runs none of the application's executors."""
        if self.spec.downtime_s:
            return f"the worker comes back after {self.spec.downtime_s:g}s"
        running = set(self.driver.executor_pids()) if self.driver is not None else set()
        idle = [name for name, w in self.targets.services.items() if name.startswith("worker:")
                and w is not self.worker and w.running and not set(w.pids()) & running]
        return f"{', '.join(idle)} ran none of its executors" if idle else None

    def _no_room(self) -> str:
        return ("every other worker already runs one of the application's executors, and the killed "
                "worker stays down: no core is free for a replacement")


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
    recovery_keys=("election_s",), requires=always("own-kafka", "kafka-cluster"), details=LeaderMoves)

KILL_WORKER_FAULT = FaultKind(
    "kill-worker", KillWorker,
    about="SIGKILL a worker of the harness's Spark standalone cluster (`target = \"worker:N\"`) with the "
          "executors it runs; the query must go on reading on the others. Where a replacement can come "
          "(another worker with a free core, or the worker back after `downtime`) the harness waits for "
          "the master to give the application a new executor; the record says whether one came",
    models="a lost Spark worker node, and every executor on it",
    keys=(Key("target", "target", "which worker", default=None),
          Key("downtime", "duration", "how long it stays down (default: until the case ends)", default="0s",
              draw="short")),
    targets=("worker",), default_target="worker:0", nemesis_targets=("worker:0", "worker:1"),
    recovery_keys=("executor_back_s", "query_went_on_s"), requires=always("own-standalone"),
    details=ExecutorsMoved)
