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
                      network={"postgres": (server, "postgres", lambda: probe_postgres(url))})
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

    def test_a_path_without_a_proxy_is_refused(self, proxied):
        """A network fault on a path the run did not proxy touches nothing."""
        server, url = proxied
        fault = _fault(server, url, latency_ms=100)
        fault.targets.network = {}
        with pytest.raises(RefusedTarget):
            fault.inject()
