"""Toxiproxy, built from source at set-up with `go install`, pinned, cached, and found again.

`python -m harness fetch` builds it into `.cache/bin/toxiproxy-<version>/` once; a run
that injects a network fault refuses to start without it and names the command.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from harness.errors import EnvironmentProblem
from harness.paths import cache_dir
from harness.versions import TOXIPROXY_MODULE, TOXIPROXY_VERSION


def toxiproxy_dir() -> Path:
    return cache_dir() / "bin" / f"toxiproxy-{TOXIPROXY_VERSION}"


def toxiproxy() -> Path:
    """The Toxiproxy server binary; raises with the fix when it was never built."""
    binary = toxiproxy_dir() / "server"
    if not binary.exists():
        raise EnvironmentProblem(f"Toxiproxy {TOXIPROXY_VERSION} is not built ({binary} is missing); "
                                 "the network fault needs it",
                                 "run `python -m harness fetch` (tox runs it for you)")
    return binary


def fetch_toxiproxy(log=print) -> Path:
    """`go install MODULE@VERSION` into the cache, when missing (about a minute here)."""
    target = toxiproxy_dir()
    if (target / "server").exists():
        return target / "server"
    go = shutil.which("go")
    if go is None:
        raise EnvironmentProblem("`go` was not found: it builds Toxiproxy for the network fault",
                                 "install Go (Debian: apt-get install golang-go), or run "
                                 "`python -m harness.sysdeps` as root")
    log(f"building {TOXIPROXY_MODULE}@{TOXIPROXY_VERSION} with go install into {target}")
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        env = {**os.environ, "GOBIN": tmp}
        proc = subprocess.run([go, "install", f"{TOXIPROXY_MODULE}@{TOXIPROXY_VERSION}"],
                              capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            output = (proc.stdout + proc.stderr)[-2000:]
            raise EnvironmentProblem(f"go install of Toxiproxy failed:\n{output}",
                                     "check that go reaches the Go module proxy, then run "
                                     "`python -m harness fetch` again")
        target.mkdir(parents=True, exist_ok=True)
        shutil.move(str(Path(tmp) / "server"), target / "server")
    return target / "server"
