"""Ports for the services: drawn from outside the kernel's ephemeral range, and claimed in a
registry every harness process shares, so that two runs side by side (two pytest workers, a
user's two runs) are never handed the same port between asking for it and binding it."""

from __future__ import annotations

import json
import subprocess
import sys

import psutil
import pytest

from harness import net

pytestmark = pytest.mark.unit


@pytest.fixture
def registry(tmp_path, monkeypatch):
    path = tmp_path / "ports.json"
    monkeypatch.setattr(net, "registry_path", lambda: path)
    return path


def test_the_span_is_outside_the_ephemeral_range():
    assert net.candidates((32768, 60999)) == (16384, 32767)
    assert net.candidates((1500, 40000)) == (40001, 56384)   # no room below: above
    assert net.candidates((1024, 65000)) == (1024, 65535)    # no room on either side


def test_a_port_is_from_the_span_and_claimed_by_this_process(registry):
    lo, hi = net.candidates()
    ports = [net.free_port() for _ in range(30)]
    assert len(set(ports)) == 30, "one process was handed the same port twice"
    assert all(lo <= p <= hi for p in ports)
    held = json.loads(registry.read_text())
    me = psutil.Process()
    assert {int(p) for p in held} == set(ports)
    assert all(who == [me.pid, me.create_time()] for who in held.values())


def test_a_port_another_live_process_claimed_is_never_handed_out(registry, monkeypatch):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        who = [other.pid, psutil.Process(other.pid).create_time()]
        free = net._kernel_port()   # nothing listens on it
        monkeypatch.setattr(net, "candidates", lambda: (free, free + 2))
        registry.write_text(json.dumps({str(free): who, str(free + 1): who, str(free + 2): who}))
        # every port of the span is the other process's: not one of them
        assert net.free_port() not in {free, free + 1, free + 2}
        registry.write_text(json.dumps({str(free): who, str(free + 1): who}))
        for _ in range(5):
            got = net.free_port()
            assert got == free + 2 or not free <= got <= free + 2
    finally:
        other.kill()
        other.wait()


def test_a_dead_process_s_claims_are_free_again(registry, monkeypatch):
    free = net._kernel_port()
    monkeypatch.setattr(net, "candidates", lambda: (free, free))
    me = psutil.Process()
    registry.write_text(json.dumps({str(free): [me.pid, me.create_time() - 100]}))   # a pid used again
    assert net.free_port() == free


def test_two_processes_side_by_side_never_share_a_port(registry, tmp_path):
    code = ("import json, sys; from harness import net; "
            f"net.registry_path = lambda: __import__('pathlib').Path({str(registry)!r}); "
            "print(json.dumps([net.free_port() for _ in range(40)]))")
    runs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
            for _ in range(2)]
    got = [json.loads(r.communicate(timeout=60)[0]) for r in runs]
    assert not set(got[0]) & set(got[1]), "two live processes were handed the same port"
