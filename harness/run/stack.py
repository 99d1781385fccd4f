"""The services every case of a run shares: Kafka, PostgreSQL, and Toxiproxy when a
network fault needs it (Spark starts per case)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import ServiceError
from harness.scenario.fault_specs import clock_targets, needs_proxy
from harness.services.base import Registry
from harness.services.kafka import KafkaBroker, KafkaCluster, cluster_answers
from harness.services.postgres import PostgresServer
from harness.services.spark_cluster import SparkStandalone
from harness.services.toxiproxy import ToxiproxyServer
from workloads.progress import Progress
from workloads.sinks import CUSTOM_SINK, SINKS


@dataclass(frozen=True)
class Stack:
    """Endpoints of the shared services for all cases of a run. Spark's own endpoints go
    through Toxiproxy on the paths a network fault acts on; the harness's do not."""

    bootstrap_servers: str
    postgres_url: str | None
    own_kafka: bool
    spark_bootstrap_servers: str = ""
    spark_postgres_url: str | None = None
    toxiproxy: ToxiproxyServer | None = None
    proxies: dict[str, str] = field(default_factory=dict)   # path ("kafka", "postgres") -> proxy name
    spark_master: str | None = None       # the harness's own standalone cluster's URL
    replication: int = 1                  # each topic's replication factor (3 on a cluster of 3 or more)
    kafka_cluster: KafkaCluster | None = None
    spark_cluster: SparkStandalone | None = None

    def __post_init__(self):
        if not self.spark_bootstrap_servers:
            object.__setattr__(self, "spark_bootstrap_servers", self.bootstrap_servers)
        if self.spark_postgres_url is None:
            object.__setattr__(self, "spark_postgres_url", self.postgres_url)


def needs_postgres(scenario) -> bool:
    """Whether the harness must start its own PostgreSQL for the scenario's sinks."""
    # a scenario's own sink is handed a postgres_url: it may well write there
    wanted = any(c.sink == CUSTOM_SINK or SINKS[c.sink].needs_postgres for c in scenario.cases)
    return wanted and scenario.services.postgres.url is None


def start_shared(services_dir: Path, registry: Registry, progress: Progress) -> Stack:
    """Kafka and PostgreSQL of the harness's own, for runs that share them (a pytest
    session's, harness/pytest_plugin.py)."""
    progress.step("starting Kafka broker (KRaft) and PostgreSQL for the session")
    broker = KafkaBroker(services_dir / "kafka", registry).start().wait_ready()
    server = PostgresServer(services_dir / "postgres", registry).start().wait_ready()
    return Stack(broker.bootstrap_servers, server.url, True, broker.spark_bootstrap_servers, server.url)


def start_stack(scenario, services_dir: Path, registry: Registry, progress: Progress) -> Stack:
    """Start (or check) Toxiproxy, Kafka and Postgres."""
    paths = needs_proxy(scenario.faults)
    proxy = None
    if paths:
        progress.step(f"starting Toxiproxy (the network fault's proxy on: {', '.join(sorted(paths))})")
        proxy = ToxiproxyServer(services_dir / "toxiproxy", registry).start().wait_ready()
    kafka_cfg = scenario.services.kafka
    cluster, replication = None, 1
    if kafka_cfg.bootstrap_servers:
        if not cluster_answers(kafka_cfg.bootstrap_servers):
            raise ServiceError(f"no Kafka cluster answers at {kafka_cfg.bootstrap_servers}",
                               "start it, or remove services.kafka.bootstrap_servers to use our own")
        bootstrap = spark_bootstrap = kafka_cfg.bootstrap_servers
        own = False
        replication = _replication(bootstrap)
    elif kafka_cfg.brokers > 1:
        progress.step(f"starting a Kafka cluster of {kafka_cfg.brokers} brokers (KRaft)")
        cluster = KafkaCluster(services_dir / "kafka", registry, kafka_cfg.brokers)
        if proxy is not None and "kafka" in paths:
            cluster.route_spark_through(proxy)
        cluster.start()
        bootstrap, spark_bootstrap = cluster.bootstrap_servers, cluster.spark_bootstrap_servers
        own, replication = True, cluster.replication
    else:
        progress.step("starting Kafka broker (KRaft)")
        broker = KafkaBroker(services_dir / "kafka", registry)
        if proxy is not None and "kafka" in paths:
            broker.route_spark_through(proxy)
        if "broker" in clock_targets(scenario.faults):
            broker.clock_file = services_dir / "kafka" / "clock.rc"
        broker.start().wait_ready()
        bootstrap, spark_bootstrap, own = broker.bootstrap_servers, broker.spark_bootstrap_servers, True
    url = spark_url = scenario.services.postgres.url
    if needs_postgres(scenario):
        progress.step("starting PostgreSQL")
        server = PostgresServer(services_dir / "postgres", registry).start().wait_ready()
        url = spark_url = server.url
        if proxy is not None and "postgres" in paths:
            spark_url = server.url_at(proxy.proxy("postgres", server.port))
    spark = None
    if scenario.services.spark.standalone:
        cfg = scenario.services.spark
        progress.step(f"starting a Spark standalone cluster ({cfg.workers} workers of {cfg.worker_cores} "
                      f"cores and {cfg.worker_memory})")
        spark = SparkStandalone(services_dir / "spark", registry, cfg.workers, cfg.worker_cores,
                                cfg.worker_memory).start()
    return Stack(bootstrap, url, own, spark_bootstrap, spark_url, proxy, {path: path for path in paths},
                 spark_master=spark.url if spark else None, replication=replication, kafka_cluster=cluster,
                 spark_cluster=spark)


def _replication(bootstrap_servers: str) -> int:
    """An existing cluster's topics: replicated to 3 brokers when it has 3 or more."""
    from workloads import kafka_admin

    return min(3, len(kafka_admin.describe(bootstrap_servers)))
