"""Small Kafka admin calls shared by the layers above: is a cluster there, through this address?"""

from __future__ import annotations

import contextlib
import logging


@contextlib.contextmanager
def quiet(logger_name: str = "kafka"):
    """Keep a client's own ERROR lines out of the log while it probes: a broker still
    starting, or a connection reset on purpose, is not an error of the run."""
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


@contextlib.contextmanager
def client(kind: str, bootstrap_servers: str, **config):
    """A kafka-python client (`kind` "admin" or "consumer"), closed on the way out, and also
    when its construction fails.

    kafka-python 3.0 starts its IO thread before it bootstraps and leaves it running when
    the bootstrap fails (no broker there yet): every failed probe of a starting broker left
    a daemon thread behind, still in the event loop when the interpreter exited. The network
    client is made here (the `kafka_client` setting), so it can be closed either way."""
    from kafka import KafkaAdminClient, KafkaConsumer
    from kafka.net.compat import KafkaNetClient

    made: list = []

    def network_client(**configs):
        made.append(KafkaNetClient(**configs))
        return made[-1]

    cls = {"admin": KafkaAdminClient, "consumer": KafkaConsumer}[kind]
    try:
        opened = cls(bootstrap_servers=bootstrap_servers, kafka_client=network_client, **config)
    except BaseException:
        for net in made:
            net.close()
        raise
    try:
        yield opened
    finally:
        opened.close()


def admin_client(bootstrap_servers: str, **config):
    """client("admin", ...): a KafkaAdminClient that leaves no thread behind."""
    return client("admin", bootstrap_servers, **config)


def describe(bootstrap_servers: str, timeout_ms: int = 3000) -> list:
    """The brokers a metadata request through `bootstrap_servers` returns; raises when it fails."""
    with quiet(), admin_client(bootstrap_servers, request_timeout_ms=timeout_ms,
                               bootstrap_timeout_ms=timeout_ms) as admin:
        return admin.describe_cluster().get("brokers") or []


def leaders(bootstrap_servers: str, topic: str) -> dict[int, int]:
    """Partition -> the node id of its leader (-1: none), from a metadata request."""
    with quiet(), admin_client(bootstrap_servers) as admin:
        return leaders_by(admin, topic)


def leaders_by(admin, topic: str) -> dict[int, int]:
    """`leaders`, asked through an admin client already open (a probe that looks many times)."""
    with quiet():
        (described,) = admin.describe_topics([topic])
    # kafka-python names them after the protocol's fields (partition_index, leader_id)
    return {int(p.get("partition_index", p.get("partition"))): int(p.get("leader_id", p.get("leader", -1)))
            for p in described["partitions"]}


def controller(bootstrap_servers: str) -> int:
    """The node id of the cluster's active controller."""
    with quiet(), admin_client(bootstrap_servers) as admin:
        return int(admin.describe_cluster()["controller_id"])


def answers(bootstrap_servers: str, timeout_ms: int = 3000) -> bool:
    """Whether a metadata request through `bootstrap_servers` names a broker."""
    from kafka.errors import KafkaError

    try:
        return bool(describe(bootstrap_servers, timeout_ms))
    except (KafkaError, ValueError, OSError):
        return False
