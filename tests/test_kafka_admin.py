"""The small Kafka admin calls: a probe of a broker that is not there leaves nothing behind."""

from __future__ import annotations

import threading

import pytest

from harness.net import free_port
from workloads import kafka_admin

pytestmark = pytest.mark.unit


def test_a_failed_probe_leaves_no_thread():
    """kafka-python starts its IO thread before it bootstraps; a probe of a port where no
    broker listens (a broker still starting) must stop it again, or the thread is still in
    its event loop when the interpreter exits."""
    before = {t.ident for t in threading.enumerate()}
    address = f"127.0.0.1:{free_port()}"
    assert [kafka_admin.answers(address, timeout_ms=300) for _ in range(3)] == [False] * 3
    left = [t.name for t in threading.enumerate() if t.ident not in before]
    assert not left, left


def test_the_cli_joins_every_thread_before_it_exits():
    """A thread still running when the command is done is waited for, and named if it stays."""
    from harness.cli import _join_threads

    stop = threading.Event()
    threading.Thread(target=lambda: stop.wait(0.3), name="short-lived", daemon=True).start()
    assert _join_threads(timeout_s=5) == []
    stuck = threading.Thread(target=stop.wait, name="stuck", daemon=True)
    stuck.start()
    try:
        assert _join_threads(timeout_s=0.2) == ["stuck"]
    finally:
        stop.set()
