"""Toxiproxy: a TCP proxy the harness owns, on the Spark-to-Kafka and Spark-to-PostgreSQL
paths, whose toxics (latency, bandwidth, resets) are the network fault.

Its HTTP API: POST /proxies (name, listen, upstream), POST /proxies/NAME/toxics
(name, type, stream, toxicity, attributes), DELETE /proxies/NAME/toxics/TOXIC.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

from harness import toxiproxy_build
from harness.errors import ServiceError
from harness.net import free_port
from harness.services.base import Service


class ToxiproxyServer(Service):
    """The server on a free loopback port; `proxy()` adds a proxy, `toxic()` a toxic."""

    ready_timeout_s = 30.0

    def __init__(self, workdir: Path, registry=None, name: str = "toxiproxy"):
        super().__init__(name, workdir, registry)
        self.binary = toxiproxy_build.toxiproxy()
        self.port = free_port()

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        return [str(self.binary), "-host", "127.0.0.1", "-port", str(self.port)]

    def is_ready(self) -> bool:
        try:
            self._call("GET", "/version")
            return True
        except (OSError, ServiceError):
            return False

    def proxy(self, name: str, upstream_port: int) -> int:
        """A proxy from a new loopback port to `upstream_port`; returns the port it listens on."""
        listen = free_port()
        self._call("POST", "/proxies", {"name": name, "listen": f"127.0.0.1:{listen}",
                                        "upstream": f"127.0.0.1:{upstream_port}", "enabled": True})
        return listen

    def toxic(self, proxy: str, name: str, kind: str, attributes: dict, stream: str = "downstream") -> None:
        self._call("POST", f"/proxies/{proxy}/toxics", {"name": name, "type": kind, "stream": stream,
                                                        "toxicity": 1.0, "attributes": attributes})

    def enable(self, proxy: str, enabled: bool) -> None:
        """A disabled proxy closes its connections and refuses new ones: a cut link."""
        self._call("POST", f"/proxies/{proxy}", {"enabled": enabled})

    def enabled(self, proxy: str) -> bool:
        return bool((self._call("GET", f"/proxies/{proxy}") or {}).get("enabled"))

    def remove_toxic(self, proxy: str, name: str) -> None:
        self._call("DELETE", f"/proxies/{proxy}/toxics/{name}")

    def toxics(self, proxy: str) -> list[dict]:
        return self._call("GET", f"/proxies/{proxy}/toxics") or []

    def _call(self, method: str, path: str, body: dict | None = None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.api + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as exc:
            raise ServiceError(f"Toxiproxy {method} {path} answered {exc.code}: {exc.read().decode()[:300]}",
                               f"read {self.log_path}") from None
        return json.loads(text) if text.strip() else None
