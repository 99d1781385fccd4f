"""The registry's stop order: newest first, and a cluster's nodes together (stopped one by
one, the last Kafka node of a 3-node cluster waited out its stop timeout for a quorum that
had left before it)."""

from __future__ import annotations

import threading
import time

import pytest

from harness.services.base import Registry

pytestmark = pytest.mark.unit


class _Fake:
    def __init__(self, name: str, log: list, cluster=None, fails: bool = False):
        self.name, self.log, self.cluster, self.fails = name, log, cluster, fails
        self.begun_before_i_ended: set[str] = set()

    def stop(self):
        self.log.append(("stop", self.name))
        time.sleep(0.2)
        self.begun_before_i_ended = {n for what, n in self.log if what == "stop"}
        self.log.append(("stopped", self.name))
        if self.fails:
            raise RuntimeError("no")

    def kill(self):
        self.log.append(("kill", self.name))


def test_services_stop_newest_first_and_a_cluster_s_nodes_together():
    log: list = []
    cluster = object()
    registry = Registry()
    registry.register(_Fake("postgres", log))
    nodes = [registry.register(_Fake(f"kafka-{i}", log, cluster)) for i in (1, 2, 3)]
    driver = registry.register(_Fake("spark-driver", log))
    registry.register(nodes[1])   # a node restarted by a fault is registered again
    assert registry.stop_all() == []
    stopped = [n for what, n in log if what == "stopped"]
    # once each, newest first: the restarted node's cluster, then the driver, then PostgreSQL
    assert sorted(stopped[:3]) == ["kafka-1", "kafka-2", "kafka-3"]
    assert stopped[3:] == ["spark-driver", "postgres"]
    # every node's stop began before any node's ended: none waited for another to be gone
    assert all(node.begun_before_i_ended >= {"kafka-1", "kafka-2", "kafka-3"} for node in nodes)
    assert "postgres" not in driver.begun_before_i_ended


def test_a_node_that_fails_to_stop_is_killed_and_named():
    log: list = []
    cluster = object()
    registry = Registry()
    registry.register(_Fake("kafka-1", log, cluster))
    registry.register(_Fake("kafka-2", log, cluster, fails=True))
    assert registry.stop_all() == ["kafka-2: no"]
    assert ("kill", "kafka-2") in log and ("kill", "kafka-1") not in log
    assert not [t for t in threading.enumerate() if t.name.startswith("stop-")]


class TestLeftovers:
    """A pid seen as a service's counts as left running only while it is the same process: the
    kernel recycles pids, and on a machine running another suite a dead service's pid soon
    belongs to someone else (a flake-lane round beside a second one: "session services left
    processes alive: [25941]")."""

    def _service(self, tmp_path, started: float):
        import os

        from harness.services.base import Service

        service = Service("fake", tmp_path)
        service.seen_pids.add(os.getpid())
        service.seen_started[os.getpid()] = started
        return service

    def test_a_pid_that_runs_as_the_process_seen_is_a_leftover(self, tmp_path):
        import os

        import psutil

        service = self._service(tmp_path, psutil.Process().create_time())
        assert service.leftovers() == [os.getpid()]

    def test_a_pid_that_now_belongs_to_another_process_is_not(self, tmp_path):
        import psutil

        service = self._service(tmp_path, psutil.Process().create_time() - 100)
        assert service.leftovers() == []
