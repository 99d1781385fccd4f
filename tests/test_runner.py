"""Where the shared services come from: started by the harness, or given by the scenario."""

from dataclasses import replace

import pytest

from harness.errors import ServiceError
from harness.run.runner import start_stack
from harness.scenario import KafkaConfig, PostgresConfig, load
from harness.services.base import Registry
from tests.helpers import REPO
from workloads.progress import Progress


def _smoke_with(kafka=None, postgres=None):
    scenario = load(REPO / "workloads" / "scenarios" / "smoke.toml")
    services = replace(scenario.services, kafka=KafkaConfig(kafka), postgres=PostgresConfig(postgres))
    return replace(scenario, services=services)


class TestStartStack:
    def test_existing_clusters_are_used_and_nothing_is_started(self, kafka, postgres, tmp_path):
        """With bootstrap_servers and a Postgres URL in the scenario, no service is started."""
        with Registry() as reg:
            stack = start_stack(_smoke_with(kafka.bootstrap_servers, postgres.url), tmp_path, reg, Progress())
            assert reg.services == []
        assert (stack.bootstrap_servers, stack.postgres_url, stack.own_kafka) == \
            (kafka.bootstrap_servers, postgres.url, False)

    def test_a_kafka_cluster_that_does_not_answer_is_named(self, tmp_path):
        """A wrong bootstrap_servers fails at once with the address and the fix."""
        with Registry() as reg, pytest.raises(ServiceError, match="127.0.0.1:1") as info:
            start_stack(_smoke_with("127.0.0.1:1"), tmp_path, reg, Progress())
        assert "bootstrap_servers" in info.value.fix
