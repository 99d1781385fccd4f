"""Apache Kafka in KRaft combined mode (each node a broker and a controller): one node, or a
cluster of several with replicated topics (KafkaCluster).

Started from the jars that `python -m harness fetch-jvm` copied into the cache,
bound to 127.0.0.1 on free ports, data and logs under each service's workdir.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import uuid
from pathlib import Path

from harness import jvm
from harness.errors import ServiceError
from harness.net import free_port
from harness.services.base import Service
from workloads import kafka_admin

HEAP = "-Xms512m -Xmx512m"  # a 2-core, 24 GB machine also runs Spark (3 JVMs) beside it

_LOG4J2 = """status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
"""


# A broker alone is its own controller: when a starved CPU delays its heartbeat past Kafka's
# 9 s lease, it fences itself, its partitions have no leader, and every consumer stalls until it
# is unfenced: 32 s of a stuck micro-batch on one core (run 20261126T055150, "Fencing broker 1
# ... its session has timed out"). No other broker could take over, so the lease only makes a
# slow machine look broken. A cluster keeps Kafka's lease: it is how a lost broker is found.
SINGLE_NODE = {"broker.session.timeout.ms": "120000"}
# But the lease also decides how soon a crashed node comes back. A node killed without its
# controlled shutdown leaves its registration unfenced in the metadata log; the new process's
# controller, on becoming active, gives every unfenced broker a fresh lease
# (ClusterControlManager.activate), and refuses the node's new incarnation as
# DUPLICATE_BROKER_REGISTRATION until that lease runs out. On 120 s the new broker gave up at
# Kafka's 60 s initial.broker.registration.timeout.ms and exited (issue 41). So a node started
# after a crash runs on Kafka's own lease, as a real node would, and comes back after it: ready
# 13.2 s after its start (9 s of them the lease; 3.3 s after a clean stop), where on 120 s it
# exited after 65 s (a lone node SIGKILLed and started 2 s later, Kafka 4.3.1, two cores; see
# docs/faults.md, "restart-broker: what a crash costs"). restore_lease() puts the harness's
# lease back with a clean restart (6.3 s) once the case is over.
KAFKA_LEASE = {"broker.session.timeout.ms": "9000"}
# how often a broker writes its partitions' start offsets to disk (see _props)
START_OFFSET_CHECKPOINT_MS = 250


class KafkaBroker(Service):
    """One KRaft node: alone, a single-node cluster (`bootstrap_servers` is valid once ready);
    or node `node_id` of a KafkaCluster, which hands it the cluster id and the voters."""

    ready_timeout_s = 90.0

    def __init__(self, workdir: Path, registry=None, name: str = "kafka", node_id: int = 1,
                 cluster: KafkaCluster | None = None):
        super().__init__(name, workdir, registry)
        self.node_id, self.cluster = node_id, cluster
        self.port = free_port()
        self.controller_port = free_port()
        self.props_path = self.workdir / "server.properties"
        self.cluster_id: str | None = cluster.cluster_id if cluster else None   # kept across a restart
        self.formatted = False
        # a listener of Spark's own, advertised at a proxy's port: route_spark_through()
        self.spark_listener: tuple[int, int] | None = None
        self.proxy_name: str | None = None
        # the JVM's clock file, when a clock fault moves the broker's clock (workloads/clock.py)
        self.clock_file: Path | None = None
        self.crashed = False         # its last process was killed, not shut down
        self.on_kafka_lease = False  # the running process was started after a crash (KAFKA_LEASE)

    def env(self) -> dict | None:
        if self.clock_file is None:
            return None
        from workloads import clock

        return {**os.environ, **clock.env(str(self.clock_file))}

    def route_spark_through(self, proxy, name: str = "kafka") -> None:
        """Give Spark a listener of its own behind `proxy` (a ToxiproxyServer), before start.

        Kafka answers a metadata request with the addresses advertised for the listener the
        client came in on, so a client that bootstraps through the proxy stays behind it;
        the generator and the harness keep the plain listener, out of the fault's way."""
        port = free_port()
        self.spark_listener = (port, proxy.proxy(name, port))
        self.proxy_name = name

    @property
    def spark_bootstrap_servers(self) -> str:
        """Where Spark connects: through the proxy when there is one."""
        return f"127.0.0.1:{self.spark_listener[1]}" if self.spark_listener else self.bootstrap_servers

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_dir(self) -> Path:
        """Where the node keeps its partitions' logs and checkpoints (log.dirs)."""
        return self.workdir / "data"

    def properties(self) -> dict[str, str]:
        listeners = f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
        advertised = f"PLAINTEXT://127.0.0.1:{self.port}"
        protocols = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
        if self.spark_listener:
            listeners += f",SPARK://127.0.0.1:{self.spark_listener[0]}"
            advertised += f",SPARK://127.0.0.1:{self.spark_listener[1]}"
            protocols += ",SPARK:PLAINTEXT"
        replicas = str(min(3, len(self.cluster.nodes))) if self.cluster else "1"
        isr = "2" if self.cluster and len(self.cluster.nodes) >= 3 else "1"
        quorum = ({"controller.quorum.voters": self.cluster.voters} if self.cluster
                  else {"controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
                        **(KAFKA_LEASE if self.on_kafka_lease else SINGLE_NODE)})
        return {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            **quorum,
            "listeners": listeners,
            "advertised.listeners": advertised,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": protocols,
            "log.dirs": str(self.log_dir),
            "num.partitions": "2",
            "offsets.topic.replication.factor": replicas,
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": isr,
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": isr,
            "default.replication.factor": replicas,
            "min.insync.replicas": isr,
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            # a partition's start offset (what delete-records moved) survives a crash only once
            # written to log-start-offset-checkpoint, every 60 s by default: a crash before that
            # brings deleted records back (kafka-retention waits for it: faults/kafka.py)
            "log.flush.start.offset.checkpoint.interval.ms": str(START_OFFSET_CHECKPOINT_MS),
            # and its first write comes log.initial.task.delay.ms after the start (30 s by default:
            # a kafka-retention then waited 29 s for it); the other log tasks start as early
            "log.initial.task.delay.ms": str(START_OFFSET_CHECKPOINT_MS),
        }

    def _classpath(self) -> str:
        return ":".join(str(p) for p in [*jvm.jars("kafka"), *jvm.jars("kafka-log")])

    def _java(self, main: str, *args: str, heap: str = HEAP) -> list[str]:
        log4j = self.workdir / "log4j2.properties"
        return [jvm.java(), *heap.split(), "-XX:+UseG1GC", "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={log4j}", "-cp", self._classpath(), main, *args]

    def kill(self) -> None:
        """SIGKILL: a crash. The node's registration outlives it (see KAFKA_LEASE)."""
        super().kill()
        self.crashed = True

    def stop(self, timeout_s: float | None = None) -> None:
        """A controlled shutdown; one that did not end in time was SIGKILLed: a crash after all."""
        super().stop(timeout_s)
        self.crashed = self.returncode == -signal.SIGKILL

    def restore_lease(self) -> bool:
        """Put the harness's lone-node lease back (SINGLE_NODE) on a node running on Kafka's
        since a crash: a clean restart, whose controlled shutdown leaves nothing to wait out.
        Whether it restarted the node."""
        if not (self.on_kafka_lease and self.running):
            return False
        self.stop()
        self.start().wait_ready()
        return True

    def prepare(self) -> None:
        # a lone node after a crash waits out its dead incarnation's lease: Kafka's, not 120 s
        self.on_kafka_lease = self.cluster is None and self.crashed
        self.crashed = False
        (self.workdir / "log4j2.properties").write_text(
            _LOG4J2.format(log=self.workdir / "server.log"))
        self.props_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        if self.formatted:
            return   # a restart: the data directory is formatted already, with this cluster id
        self.cluster_id = self.cluster_id or new_cluster_id()
        # alone, the node is its own quorum (--standalone); in a cluster, the voters are static
        standalone = [] if self.cluster else ["--standalone"]
        cmd = self._java("kafka.tools.StorageTool", "format", *standalone, "--ignore-formatted",
                         "-t", self.cluster_id, "-c", str(self.props_path), heap="-Xmx256m")
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise ServiceError(f"formatting Kafka storage failed:\n{proc.stdout}{proc.stderr}",
                               f"read {self.props_path}")
        self.formatted = True

    def command(self) -> list[str]:
        return self._java("kafka.Kafka", str(self.props_path))

    def is_ready(self) -> bool:
        if self.cluster is None:
            return cluster_answers(self.bootstrap_servers)
        # a node of a cluster is ready when the cluster lists it among its brokers (kafka-python
        # names the field broker_id, after DescribeCluster's)
        try:
            return self.node_id in {b.get("broker_id") for b in kafka_admin.describe(self.bootstrap_servers)}
        except Exception:  # noqa: BLE001 - not answering yet
            return False


def new_cluster_id() -> str:
    cluster_id = "-"
    while cluster_id.startswith("-"):  # the storage tool would read a leading '-' as an option
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    return cluster_id


class KafkaCluster:
    """`brokers` KRaft nodes on this machine, each a KafkaBroker service named kafka-<id>
    (ids from 1), every one a voter: topics are replicated to min(3, brokers) nodes with
    min.insync.replicas 2 (from 3 nodes on), so that a partition's leader can be lost."""

    def __init__(self, workdir: Path, registry, brokers: int = 3):
        self.cluster_id = new_cluster_id()
        self.nodes: list[KafkaBroker] = []
        self.nodes = [KafkaBroker(Path(workdir) / f"broker-{i}", registry, name=f"kafka-{i}", node_id=i,
                                  cluster=self) for i in range(1, brokers + 1)]

    @property
    def voters(self) -> str:
        return ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.bootstrap_servers for n in self.nodes)

    @property
    def spark_bootstrap_servers(self) -> str:
        return ",".join(n.spark_bootstrap_servers for n in self.nodes)

    @property
    def replication(self) -> int:
        return min(3, len(self.nodes))

    def route_spark_through(self, proxy) -> None:
        """Each node's Spark listener behind a proxy of its own, kafka-<id>, before start: a
        network fault on `kafka` acts on all of them, on `broker:N` on one."""
        for node in self.nodes:
            node.route_spark_through(proxy, f"kafka-{node.node_id}")

    def node(self, node_id: int) -> KafkaBroker:
        return next(n for n in self.nodes if n.node_id == node_id)

    def start(self) -> KafkaCluster:
        """Start every node at once (a quorum needs a majority up before any is ready)."""
        for node in self.nodes:
            node.start()
        for node in self.nodes:
            node.wait_ready()
        return self

    def wait_ready(self) -> KafkaCluster:
        return self


def cluster_answers(bootstrap_servers: str) -> bool:
    """Whether a metadata request to the cluster succeeds (probing is not logged as errors)."""
    return kafka_admin.answers(bootstrap_servers)
