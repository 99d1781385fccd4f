"""network: toxics on Spark's path to Kafka, to one broker of a cluster, or to PostgreSQL,
through a Toxiproxy the harness owns (latency with jitter, a bandwidth limit, connection
resets), or the path cut outright (the proxy disabled: connections closed and refused).

Observed, or it did not happen: a probe goes through the same proxy before the toxics and
with them (a metadata request to Kafka, a query to PostgreSQL), and must show their effect:
latency at least 80% of the one asked for, a reset or refused connection. A bandwidth
limit alone is not probed: it is observed when Toxiproxy lists it as active.
"""

from __future__ import annotations

import time

from faults.base import Fault, Observation
from faults.kinds import DURATION, TARGET, FaultKind, Key, Preparation, by_target
from faults.spec import FaultSpec
from faults.targets import RefusedTarget
from workloads import kafka_admin
from workloads.errors import SpecError

_PREFIX = "harness-"   # toxics carry our prefix and the fault's time: heal removes only its own


class Network(Fault):
    server = None
    proxies: list[str] = []
    added: list[str] = []      # the toxics this fault put in place
    cut: list[str] = []        # the proxies it disabled
    bypass: str | None = None  # how Spark's connections went around the proxy, if they did
    listed = False

    def _inject(self) -> None:
        path = self.spec.target
        if path not in self.targets.network:
            raise RefusedTarget(f"there is no proxy on the {path} path in this run")
        self.server, self.proxies, self.probe = self.targets.network[path]
        self.target = f"Spark -> {path} (proxy {', '.join(self.proxies)})"
        self.before = _timed(self.probe)
        self.added = []
        for kind, attributes in self._toxics():
            name = f"{_PREFIX}{kind}-at-{self.spec.at.replace(' ', '')}"
            for proxy in self.proxies:
                self.server.toxic(proxy, name, kind, attributes)
            self.added.append(name)
        self.listed = all({t["name"] for t in self.server.toxics(proxy)} >= set(self.added)
                          for proxy in self.proxies)
        self.cut = []
        if self.spec.extra.get("cut"):
            for proxy in self.proxies:
                self.server.enable(proxy, False)
                self.cut.append(proxy)
        self.during = _timed(self.probe)
        self.bypass = self._spark_bypasses()

    def _toxics(self) -> list[tuple[str, dict]]:
        extra = self.spec.extra
        toxics = []
        if extra.get("latency_ms"):
            toxics.append(("latency", {"latency": extra["latency_ms"], "jitter": extra.get("jitter_ms", 0)}))
        if extra.get("bandwidth_kbps"):
            toxics.append(("bandwidth", {"rate": extra["bandwidth_kbps"]}))
        if extra.get("reset"):
            toxics.append(("reset_peer", {"timeout": 0}))
        return toxics

    def _spark_bypasses(self) -> str | None:
        """On the Kafka path: whether Spark's own connections go through the proxy (Kafka's
        advertised listener must point there, or the client leaves it after its first
        metadata request). A sentence when they do not, None when they do."""
        if self.spec.target != "kafka" or self.targets.spark_ports is None or self.spec.extra.get("cut"):
            return None
        proxy_ports, direct_ports = self.targets.spark_ports()
        import psutil

        remote = []
        for pid in self.targets.driver().pids():
            try:
                remote += [c.raddr.port for c in psutil.Process(pid).net_connections("tcp") if c.raddr]
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        direct = [p for p in remote if p in direct_ports]
        through = [p for p in remote if p in proxy_ports]
        if direct or not through:
            return (f"Spark bypasses the proxy: {len(direct)} connections straight to the broker, "
                    f"{len(through)} through the proxy")
        return None

    def _heal(self) -> None:
        """Remove this fault's toxics, and prove they are gone: Toxiproxy serves every case of
        the run, and a toxic left in place would slow the next one without a word."""
        added, server = self.added, self.server
        if server is None:
            return   # never reached the proxy: nothing to undo
        for proxy in self.cut:
            server.enable(proxy, True)
        for proxy in self.proxies:
            for name in added:
                try:
                    server.remove_toxic(proxy, name)
                except Exception as exc:
                    if "404" not in str(exc):   # already gone is fine; anything else is not
                        raise
            left = [t["name"] for t in server.toxics(proxy) if t["name"] in added]
            if left:
                raise RuntimeError(f"toxics {left} are still in place on proxy {proxy}")
            if not server.enabled(proxy):
                raise RuntimeError(f"proxy {proxy} is still cut")

    def observe(self) -> Observation:
        extra, (before, before_err), (during, during_err) = self.spec.extra, self.before, self.during
        seen = []
        if extra.get("latency_ms") and during is not None and before is not None:
            added_ms = (during - before) * 1000
            if added_ms >= 0.8 * extra["latency_ms"]:
                seen.append(f"the probe took {added_ms:,.0f} ms longer (latency {extra['latency_ms']} ms)")
        if (extra.get("reset") or extra.get("cut")) and during_err:
            seen.append(f"the probe's connection failed ({during_err})")
        if extra.get("bandwidth_kbps") and self.listed:
            seen.append(f"Toxiproxy listed the {extra['bandwidth_kbps']} KB/s limit as active")
        if before_err:
            return Observation(False, f"{self.target}: the probe failed before the toxics: {before_err}")
        if self.bypass:
            return Observation(False, f"{self.target}: {self.bypass}")
        if not seen:
            took = f"{during:.3f}s" if during is not None else f"failed ({during_err})"
            return Observation(False, f"{self.target}: toxics {', '.join(self.added)} in place, but the "
                                      f"probe showed no effect ({before:.3f}s before, {took} with them)")
        return Observation(True, f"{self.target}: {'; '.join(seen)}")


def _timed(probe) -> tuple[float | None, str | None]:
    started = time.monotonic()
    try:
        probe()
    except Exception as exc:  # noqa: BLE001 - a reset connection is the point of the probe
        return None, f"{type(exc).__name__}: {str(exc)[:120]}"
    return time.monotonic() - started, None


def probe_kafka(bootstrap_servers: str) -> float:
    """A metadata request through `bootstrap_servers`; raises when it fails."""
    if not kafka_admin.describe(bootstrap_servers, timeout_ms=10_000):
        raise ConnectionError("no broker in the metadata")
    return 0.0


def probe_postgres(url: str) -> float:
    """A connection and a query through `url`; raises when it fails."""
    import psycopg

    with psycopg.connect(url, connect_timeout=10) as conn:
        conn.execute("SELECT 1").fetchone()
    return 0.0


def _one_toxic(values: dict, s) -> None:
    """A network fault does something: latency, bandwidth or reset."""
    extra = values["extra"]
    if not (extra.get("latency_ms") or "bandwidth_kbps" in extra or extra.get("reset") or extra.get("cut")):
        raise SpecError(f"{s.path} does nothing: a network fault needs latency, bandwidth, reset or cut",
                        'add e.g. latency = "500ms", bandwidth = 64 (KB/s), reset = true or cut = true')
    if s.data.get("target") == "broker":
        raise SpecError(f'{s.path}.target = "broker": which one?',
                        'write target = "broker:N" (N from 1), or "kafka" for every broker')


def _proxy(spec: FaultSpec) -> Preparation:
    """Spark's path to the target goes through Toxiproxy (one broker's fault puts Spark's whole
    path to Kafka behind proxies)."""
    return Preparation(proxies=frozenset({"kafka" if spec.target_kind == "broker" else spec.target}))


NETWORK_FAULT = FaultKind(
    "network", Network,
    about="Toxiproxy's toxics on Spark's path only, for `duration`: latency with jitter, a bandwidth limit "
          "(KB/s), connection resets, or the path cut; `target` is `kafka` (every broker), `broker:N` (one "
          "broker of a cluster, each behind a proxy of its own) or `postgres`; a probe through the proxy "
          "must show the latency, the reset or the cut",
    models="a slow, lossy or partitioned network between Spark and Kafka, one broker, or its sink",
    keys=(TARGET, DURATION,
          Key("latency", "duration", "added to every packet", default="0ms", store="latency_ms"),
          Key("jitter", "duration", "random variation of the latency", default="0ms", store="jitter_ms"),
          Key("bandwidth", "integer", "a limit in KB/s", default=None, store="bandwidth_kbps", gt=0),
          Key("reset", "boolean", "reset connections (TCP RST)", default=False),
          Key("cut", "boolean", "disable the proxy: connections closed and refused until it heals",
              default=False)),
    targets=("kafka", "broker", "postgres"), default_target="kafka",
    requires=by_target({"kafka": ("own-kafka",), "broker": ("own-kafka",), "postgres": ("own-postgres",)}),
    check=_one_toxic, drawable=False, prepare=_proxy,
    why_not_drawable="its toxics are the scenario's choice; declare network faults in [[faults]]")
