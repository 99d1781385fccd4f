"""An Apache Kafka broker in KRaft combined mode (broker + controller), one node.

Started from the jars that `python -m harness fetch-jvm` copied into the cache,
bound to 127.0.0.1 on free ports, data and logs under the service's workdir.
"""

from __future__ import annotations

import base64
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


class KafkaBroker(Service):
    """A single-node KRaft cluster: `bootstrap_servers` is valid once ready."""

    ready_timeout_s = 90.0

    def __init__(self, workdir: Path, registry=None, name: str = "kafka"):
        super().__init__(name, workdir, registry)
        self.port = free_port()
        self.controller_port = free_port()
        self.props_path = self.workdir / "server.properties"
        self.cluster_id: str | None = None   # kept across a restart on the same data
        # a listener of Spark's own, advertised at a proxy's port: route_spark_through()
        self.spark_listener: tuple[int, int] | None = None

    def route_spark_through(self, proxy) -> None:
        """Give Spark a listener of its own behind `proxy` (a ToxiproxyServer), before start.

        Kafka answers a metadata request with the addresses advertised for the listener the
        client came in on, so a client that bootstraps through the proxy stays behind it;
        the generator and the harness keep the plain listener, out of the fault's way."""
        port = free_port()
        self.spark_listener = (port, proxy.proxy("kafka", port))

    @property
    def spark_bootstrap_servers(self) -> str:
        """Where Spark connects: through the proxy when there is one."""
        return f"127.0.0.1:{self.spark_listener[1]}" if self.spark_listener else self.bootstrap_servers

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def properties(self) -> dict[str, str]:
        listeners = f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
        advertised = f"PLAINTEXT://127.0.0.1:{self.port}"
        protocols = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
        if self.spark_listener:
            listeners += f",SPARK://127.0.0.1:{self.spark_listener[0]}"
            advertised += f",SPARK://127.0.0.1:{self.spark_listener[1]}"
            protocols += ",SPARK:PLAINTEXT"
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "listeners": listeners,
            "advertised.listeners": advertised,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": protocols,
            "log.dirs": str(self.workdir / "data"),
            "num.partitions": "2",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
        }

    def _classpath(self) -> str:
        return ":".join(str(p) for p in [*jvm.jars("kafka"), *jvm.jars("kafka-log")])

    def _java(self, main: str, *args: str, heap: str = HEAP) -> list[str]:
        log4j = self.workdir / "log4j2.properties"
        return [jvm.java(), *heap.split(), "-XX:+UseG1GC", "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={log4j}", "-cp", self._classpath(), main, *args]

    def prepare(self) -> None:
        (self.workdir / "log4j2.properties").write_text(
            _LOG4J2.format(log=self.workdir / "server.log"))
        self.props_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        if self.cluster_id is not None:
            return   # a restart: the data directory is formatted already, with this cluster id
        cluster_id = "-"
        while cluster_id.startswith("-"):  # the storage tool would read a leading '-' as an option
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        self.cluster_id = cluster_id
        cmd = self._java("kafka.tools.StorageTool", "format", "--standalone", "--ignore-formatted",
                         "-t", cluster_id, "-c", str(self.props_path), heap="-Xmx256m")
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise ServiceError(f"formatting Kafka storage failed:\n{proc.stdout}{proc.stderr}",
                               f"read {self.props_path}")

    def command(self) -> list[str]:
        return self._java("kafka.Kafka", str(self.props_path))

    def is_ready(self) -> bool:
        return cluster_answers(self.bootstrap_servers)


def cluster_answers(bootstrap_servers: str) -> bool:
    """Whether a metadata request to the cluster succeeds (probing is not logged as errors)."""
    return kafka_admin.answers(bootstrap_servers)
