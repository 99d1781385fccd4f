"""JVM artifacts and settings: clear errors when tools or jars are missing, the connector's jar list,
and the broker's lease."""

import pytest

from harness import jvm
from harness.errors import EnvironmentProblem


class TestMissingTools:
    def test_a_missing_mvn_names_the_package_to_install(self, tmp_path, monkeypatch):
        """Fetching into an empty cache without Maven on PATH says how to get Maven."""
        monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
        monkeypatch.setenv("PATH", str(tmp_path))
        with pytest.raises(EnvironmentProblem, match="`mvn` was not found") as info:
            jvm.fetch("kafka")
        assert "apt-get install maven" in info.value.fix

    def test_jars_that_were_never_fetched_name_the_fetch_command(self, tmp_path, monkeypatch):
        """Starting a broker before the fetch fails with the command that fixes it."""
        monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
        with pytest.raises(EnvironmentProblem) as info:
            jvm.jars("kafka")
        assert "python -m harness fetch-jvm" in info.value.fix


class TestConnectorJars:
    @pytest.mark.parametrize("jar, name", [
        ("kafka-clients-3.9.2.jar", "kafka-clients"),
        ("spark-sql-kafka-0-10_2.13-4.2.0.jar", "spark-sql-kafka-0-10_2.13"),
        ("zstd-jni-1.5.6-10.jar", "zstd-jni")])
    def test_artifact_names_drop_the_version(self, jar, name):
        """Jars are matched by artifact, whatever their version."""
        assert jvm._artifact_name(jar) == name

    @pytest.mark.integration   # reads the fetched jars
    def test_the_connector_brings_what_pyspark_lacks_and_nothing_it_has(self):
        """kafka-clients and the connector are added; scala-library, which pyspark ships, is not."""
        names = {jvm._artifact_name(p.name) for p in jvm.spark_connector_jars()}
        assert {"spark-sql-kafka-0-10_2.13", "kafka-clients", "commons-pool2"} <= names
        assert "scala-library" not in names


@pytest.mark.unit
class TestBrokerLease:
    def test_a_broker_alone_keeps_its_lease_through_a_starved_cpu(self, tmp_path):
        """One core, pinned (taskset -c 0): the broker, its own controller, fenced itself when a
        heartbeat came past Kafka's 9 s lease, and a micro-batch stalled 32 s with no partition
        leader. A broker alone holds a 120 s lease; a cluster keeps Kafka's, by which it finds a
        lost broker (kill-broker)."""
        from harness.services.kafka import KafkaBroker, KafkaCluster

        alone = KafkaBroker(tmp_path / "alone").properties()
        assert int(alone["broker.session.timeout.ms"]) >= 60_000
        cluster = KafkaCluster(tmp_path / "cluster", registry=None, brokers=3)
        assert all("broker.session.timeout.ms" not in n.properties() for n in cluster.nodes)
