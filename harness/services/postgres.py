"""A PostgreSQL server of our own: initdb into the workdir, listen on 127.0.0.1.

PostgreSQL refuses to run as root; when the harness is root (CI, containers) the
server runs as the `postgres` system user that Debian's package creates.
"""

from __future__ import annotations

import glob
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from harness.errors import EnvironmentProblem, ServiceError
from harness.net import free_port
from harness.services.base import Service

_INSTALL_FIX = ("install PostgreSQL (Debian: apt-get install postgresql) or give an existing "
                "server with `[services.postgres] url = \"postgresql://...\"` in the scenario")


def find_bindir() -> Path:
    """The directory holding `postgres` and `initdb`: PATH first, then Debian's layout."""
    candidates = [shutil.which("initdb")] + sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_major, reverse=True)
    for initdb in filter(None, candidates):
        bindir = Path(initdb).resolve().parent
        if (bindir / "postgres").exists():
            return bindir
    raise EnvironmentProblem("PostgreSQL server binaries (initdb, postgres) were not found", _INSTALL_FIX)


def _major(path: str) -> int:
    parts = Path(path).parts
    return int(parts[-3]) if parts[-3].isdigit() else 0


class PostgresServer(Service):
    """A throwaway server; `url` is valid once ready. fsync is off: the faults we inject
    kill processes, not the machine, and a committed transaction survives a process kill."""

    ready_timeout_s = 60.0

    def __init__(self, workdir: Path, registry=None, name: str = "postgres"):
        super().__init__(name, workdir, registry)
        self.bindir = find_bindir()
        self.port = free_port()
        self._scratch: Path | None = None
        base = self.workdir
        if self.user() and not _traversable_by_others(self.workdir):
            # e.g. pytest's 0700 tmp dirs: the postgres user could not reach its data
            self._scratch = base = Path(tempfile.mkdtemp(prefix="harness-pg-"))
        self.datadir = base / "data"
        # a Unix socket's path must fit in 107 bytes: inside a deep run directory (a CI
        # workspace, a home checkout) it would not, so it lives in a short private directory
        self.socketdir: Path | None = None

    @property
    def url(self) -> str:
        return self.url_at(self.port)

    def url_at(self, port: int) -> str:
        """The server's URL through another port (a proxy in front of it)."""
        return f"postgresql://harness@127.0.0.1:{port}/postgres"

    def user(self) -> str | None:
        return "postgres" if os.geteuid() == 0 else None

    def prepare(self) -> None:
        self.socketdir = Path(tempfile.mkdtemp(prefix="hpg-"))
        self.datadir.mkdir(parents=True, exist_ok=True)
        if self.user():
            for path in filter(None, (self._scratch, self.datadir, self.socketdir)):
                shutil.chown(path, user="postgres", group="postgres")
        cmd = [str(self.bindir / "initdb"), "-D", str(self.datadir), "-U", "harness",
               "--auth=trust", "--no-sync", "-E", "UTF8"]
        proc = subprocess.run(cmd, capture_output=True, text=True, user=self.user(), cwd=self.workdir)
        if proc.returncode != 0:
            raise ServiceError(f"initdb failed:\n{proc.stdout}{proc.stderr}", _INSTALL_FIX)

    def scratch(self) -> list[Path]:
        return [path for path in (self.socketdir, self._scratch) if path is not None]

    def command(self) -> list[str]:
        return [str(self.bindir / "postgres"), "-D", str(self.datadir), "-p", str(self.port),
                "-k", str(self.socketdir), "-c", "listen_addresses=127.0.0.1",
                "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=50"]

    def is_ready(self) -> bool:
        return server_answers(self.url)


def _traversable_by_others(path: Path) -> bool:
    """Whether every directory from / down to `path` lets other users pass (o+x)."""
    path = path.resolve()
    return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents] if p.exists())


def server_answers(url: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.OperationalError:
        return False
