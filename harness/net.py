"""Loopback ports for the services the harness starts.

A port that bind(0) hands out is free when asked, but the service binds it seconds later. In
between, another harness process on the machine (a second pytest worker, a user's second run)
could be handed the same port, or an outgoing connection take it as its ephemeral port; and a
broker restarted on its own ports leaves them unbound while it is down. So a port comes from
outside the kernel's ephemeral range, and is claimed in a registry that every harness process of
the user on the machine shares (a JSON file, under a lock) for as long as the claiming process
lives.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import socket
import tempfile
from pathlib import Path

import psutil

from harness import procs

EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
SPAN = 16_384          # ports taken from below the ephemeral range (or above it)
TRIES = 500


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, outside the ephemeral range, and that
    no other live harness process of this user has claimed; claimed for this process's life."""
    lo, hi = candidates()
    path = registry_path()
    with open(path.with_suffix(".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        held = _live(_load(path))
        me = _me()
        for _ in range(TRIES):
            port = random.randint(lo, hi)
            if str(port) in held or not _bindable(port):
                continue
            held[str(port)] = me
            _save(path, held)
            return port
    return _kernel_port()   # every port of the span taken: the kernel's choice


def candidates(ephemeral: tuple[int, int] | None = None) -> tuple[int, int]:
    """The span ports are drawn from: the SPAN ports below the ephemeral range, or above it when
    too little room is below; the whole non-privileged range when neither side has room."""
    low, high = ephemeral or _ephemeral()
    if low - 1024 >= SPAN:
        return low - SPAN, low - 1
    if 65535 - high >= SPAN:
        return high + 1, high + SPAN
    return 1024, 65535


def registry_path() -> Path:
    return Path(tempfile.gettempdir()) / f"harness-ports-{os.getuid()}.json"


def _ephemeral() -> tuple[int, int]:
    try:
        low, high = (int(x) for x in EPHEMERAL.read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999   # Linux's default


def _me() -> list:
    return [os.getpid(), psutil.Process().create_time()]


def _live(held: dict) -> dict:
    """The claims whose process still runs (the same process: its start time too)."""
    return {port: who for port, who in held.items()
            if isinstance(who, list) and len(who) == 2 and procs.alive(int(who[0]), who[1])}


def _load(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save(path: Path, held: dict) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(held))
    os.replace(tmp, path)


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _kernel_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
