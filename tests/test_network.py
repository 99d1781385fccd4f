"""The network fault against a real Toxiproxy in front of the real PostgreSQL server.

Setup: the session's PostgreSQL, a Toxiproxy of our own with one proxy in front of it.
Steps: inject toxics, probe through the proxy, heal, probe again.
"""

import time

import pytest

from faults.network import Network, probe_postgres
from faults.spec import FaultSpec
from faults.targets import RefusedTarget, Targets
from harness.services.base import Registry
from harness.services.toxiproxy import ToxiproxyServer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def proxied(postgres, tmp_path_factory):
    """Toxiproxy with a proxy to PostgreSQL: (server, the proxied URL)."""
    with Registry() as reg:
        server = ToxiproxyServer(tmp_path_factory.mktemp("toxiproxy"), reg).start().wait_ready()
        yield server, postgres.url_at(server.proxy("postgres", postgres.port))


def _fault(server, url, **toxics):
    targets = Targets(driver=lambda: None, restart_driver=lambda: None, expect_down=lambda _: None,
                      executors_log=None, control_dir=None, progress=list, checkpoint=lambda: None,
                      started_pids=set,
                      network={"postgres": (server, ["postgres"], lambda: probe_postgres(url))})
    spec = FaultSpec("network", 0, "postgres", duration_s=1,
                     extra={"latency_ms": 0, "jitter_ms": 0, "reset": False, **toxics})
    return Network(spec, targets)


class TestNetworkFault:
    def test_latency_is_added_seen_and_removed(self, proxied):
        """500 ms downstream: the probe through the proxy takes 400 ms or more longer; after
        heal the toxic is gone and the probe is fast again."""
        server, url = proxied
        fault = _fault(server, url, latency_ms=500)
        fault.inject()
        fault.heal()
        seen = fault.observe()
        assert seen.observed, seen.detail
        assert server.toxics("postgres") == []
        started = time.monotonic()
        probe_postgres(url)
        assert time.monotonic() - started < 0.4

    def test_reset_breaks_connections_until_healed(self, proxied):
        """reset_peer: a connection through the proxy fails; after heal it works."""
        server, url = proxied
        fault = _fault(server, url, reset=True)
        fault.inject()
        fault.heal()
        seen = fault.observe()
        assert seen.observed and "failed" in seen.detail, seen.detail
        probe_postgres(url)

    def test_cut_refuses_connections_until_healed(self, proxied):
        """cut: the proxy is disabled, a connection through it is refused; heal enables it."""
        server, url = proxied
        fault = _fault(server, url, cut=True)
        fault.inject()
        assert not server.enabled("postgres")
        fault.heal()
        seen = fault.observe()
        assert seen.observed and "failed" in seen.detail, seen.detail
        assert server.enabled("postgres")
        probe_postgres(url)

    def test_a_path_without_a_proxy_is_refused(self, proxied):
        """A network fault on a path the run did not proxy touches nothing."""
        server, url = proxied
        fault = _fault(server, url, latency_ms=100)
        fault.targets.network = {}
        with pytest.raises(RefusedTarget):
            fault.inject()


class TestTargets:
    """Which paths a network fault may name (no services)."""

    pytestmark = pytest.mark.unit

    def _load(self, tmp_path, target: str, brokers: int = 3):
        from harness.scenario import load

        path = tmp_path / "n.toml"
        path.write_text(f"""name = "n"
[services.kafka]
brokers = {brokers}
[workload]
duration = "30s"
rate = {{ eps = 100 }}
[pipeline]
window = "2s"
watermark = "1s"
[[cases]]
name = "c"
guarantee = "at-least-once"
[[faults]]
kind = "network"
at = "2s"
target = "{target}"
cut = true
duration = "2s"
""")
        return load(path)

    def test_one_broker_of_a_cluster_puts_spark_s_kafka_path_behind_proxies(self, tmp_path):
        from harness.scenario.fault_specs import needs_proxy

        scenario = self._load(tmp_path, "broker:2")
        assert scenario.faults[0].target == "broker:2" and needs_proxy(scenario.faults) == {"kafka"}

    @pytest.mark.parametrize("target, words", [("broker", "broker:N"), ("broker:4", "there is no broker 4")])
    def test_a_broker_it_cannot_name_is_refused_with_the_fix(self, tmp_path, target, words):
        from harness.errors import ScenarioError

        with pytest.raises(ScenarioError, match=words):
            self._load(tmp_path, target)
