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


def describe(bootstrap_servers: str, timeout_ms: int = 3000) -> list:
    """The brokers a metadata request through `bootstrap_servers` returns; raises when it fails."""
    from kafka import KafkaAdminClient

    with quiet():
        admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=timeout_ms,
                                 bootstrap_timeout_ms=timeout_ms)
        try:
            return admin.describe_cluster().get("brokers") or []
        finally:
            admin.close()


def answers(bootstrap_servers: str, timeout_ms: int = 3000) -> bool:
    """Whether a metadata request through `bootstrap_servers` names a broker."""
    from kafka.errors import KafkaError

    try:
        return bool(describe(bootstrap_servers, timeout_ms))
    except (KafkaError, ValueError, OSError):
        return False
