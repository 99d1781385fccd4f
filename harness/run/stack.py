"""The services every case of a run shares: Kafka and PostgreSQL (Spark starts per case)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.errors import ServiceError
from harness.services.base import Registry
from harness.services.kafka import KafkaBroker, cluster_answers
from harness.services.postgres import PostgresServer
from workloads.progress import Progress
from workloads.sinks import SINKS


@dataclass(frozen=True)
class Stack:
    """Endpoints of the shared services for all cases of a run."""

    bootstrap_servers: str
    postgres_url: str | None
    own_kafka: bool


def needs_postgres(scenario) -> bool:
    """Whether the harness must start its own PostgreSQL for the scenario's sinks."""
    wanted = any(SINKS[c.sink].needs_postgres for c in scenario.cases)
    return wanted and scenario.services.postgres.url is None


def start_stack(scenario, services_dir: Path, registry: Registry, progress: Progress) -> Stack:
    """Start (or check) Kafka and Postgres."""
    kafka_cfg = scenario.services.kafka
    if kafka_cfg.bootstrap_servers:
        if not cluster_answers(kafka_cfg.bootstrap_servers):
            raise ServiceError(f"no Kafka cluster answers at {kafka_cfg.bootstrap_servers}",
                               "start it, or remove services.kafka.bootstrap_servers to use our own")
        bootstrap, own = kafka_cfg.bootstrap_servers, False
    else:
        progress.step("starting Kafka broker (KRaft)")
        broker = KafkaBroker(services_dir / "kafka", registry).start()
        bootstrap, own = broker.wait_ready().bootstrap_servers, True
    url = scenario.services.postgres.url
    if needs_postgres(scenario):
        progress.step("starting PostgreSQL")
        url = PostgresServer(services_dir / "postgres", registry).start().wait_ready().url
    return Stack(bootstrap, url, own)
