"""The batch oracle's Spark session, kept across a run's cases (workloads/pipelines/oracle_server.py):
a service of the run's, started for the first job case that needs it and asked again by every
later case whose code and jars are the same.

    with serving(registry, run_dir.services):   # harness/run/runner.py, around the cases
        ... spark_run.run(...)                   # asks the server, when one is serving

Outside `serving` (`python -m harness check`, a unit test), each batch run is a process of its own,
as before. A request the server cannot take (a setting Spark fixes when a session starts, such as
the Delta extensions) starts another server with that request's settings; a request that failed
stops it, so that no next case runs in a session a failure left.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from harness.check import spark_program
from harness.errors import ServiceError
from harness.services.base import Registry, Service
from workloads.pipelines import oracle_server as protocol

POLL_S = 0.05


class OracleServer(Service):
    """`python -m workloads.pipelines.oracle_server INBOX BASE`, its session made for BASE's
    settings, with `imports` on its PYTHONPATH (its Python workers' too)."""

    ready_timeout_s = 240.0   # a Spark session's start, on a loaded machine
    stop_timeout_s = 20.0

    def __init__(self, workdir: Path, base: Path, imports: Sequence[str], quick: bool,
                 registry: Registry | None = None):
        super().__init__("batch-oracle", workdir, registry)
        self.inbox = self.workdir / "inbox"
        self.base, self.imports, self.quick = Path(base).resolve(), list(imports), quick
        self._scratch: list[Path] = []
        self.asked = 0

    def prepare(self) -> None:
        from harness.services.spark import make_local_dirs

        shutil.rmtree(self.inbox, ignore_errors=True)
        self.inbox.mkdir(parents=True)
        self._scratch = make_local_dirs()

    def command(self) -> list[str]:
        return [sys.executable, "-m", "workloads.pipelines.oracle_server", str(self.inbox), str(self.base)]

    def env(self) -> dict | None:
        return spark_program.environment(self.imports, self.quick, self._scratch)

    def is_ready(self) -> bool:
        return (self.inbox / protocol.READY).exists()

    def scratch(self) -> list[Path]:
        return self._scratch

    def stop(self, timeout_s: float | None = None) -> None:
        """Ask it to stop its session (a few seconds), then the service's stop."""
        if self.running:
            (self.inbox / protocol.STOP).touch()
            with contextlib.suppress(subprocess.TimeoutExpired, Exception):
                self.process.wait(timeout=10)   # type: ignore[union-attr]
        super().stop(timeout_s)

    def ask(self, request: Path, log: Path, timeout_s: float) -> dict:
        """Run `request` in the server's session: its answer ({"code", "why", "times"}); what the
        server printed meanwhile is copied to `log`. A server that dies answers with its exit
        code; one that takes longer than `timeout_s` is killed (subprocess.TimeoutExpired)."""
        self.asked += 1
        n = self.asked
        start = self.log_path.stat().st_size if self.log_path.exists() else 0
        tmp = self.inbox / f"{n}{protocol.ASK}.tmp"
        tmp.write_text(f"{Path(request).resolve()}\n")
        os.replace(tmp, self.inbox / f"{n}{protocol.ASK}")
        answer_path = self.inbox / f"{n}{protocol.ANSWER}"
        deadline = time.monotonic() + timeout_s
        try:
            while not answer_path.exists():
                if not self.running:
                    return {"code": self.returncode or 1,
                            "why": f"the batch oracle's server exited with {self.returncode}"}
                if time.monotonic() > deadline:
                    self.kill()
                    raise subprocess.TimeoutExpired(self.command(), timeout_s)
                time.sleep(POLL_S)
            return json.loads(answer_path.read_text())
        finally:
            _copy_from(self.log_path, start, log)


def _copy_from(source: Path, offset: int, to: Path) -> None:
    with contextlib.suppress(OSError), source.open("rb") as read, to.open("wb") as write:
        read.seek(offset)
        shutil.copyfileobj(read, write)


class Serving:
    """The run's server, started when first asked, and again when a request needs other code,
    jars or settings than it was started with."""

    def __init__(self, registry: Registry | None, where: Path):
        self.registry, self.where = registry, Path(where)
        self.server: OracleServer | None = None
        self.key: tuple | None = None
        self.started = 0

    def run(self, request: Path, log: Path, imports: Sequence[str], quick: bool,
            timeout_s: float) -> tuple[int, float]:
        """As spark_program.run: the exit code a process of its own would have given, and the
        seconds it took (a server's start included, when this request started it)."""
        began = time.perf_counter()
        jars = json.loads(Path(request).read_text()).get("jars", [])
        key = (tuple(imports), tuple(jars), quick)
        answer: dict = {"code": 1}
        for attempt in (1, 2):
            if self.server is None or self.key != key or not self.server.running or attempt == 2:
                try:
                    self._start(request, key, imports, quick)
                except ServiceError as exc:
                    self.close()
                    log.write_text(f"{exc}\n")
                    return 1, time.perf_counter() - began
            assert self.server is not None
            answer = self.server.ask(request, log, timeout_s)
            if answer.get("code") != protocol.NEEDS_ANOTHER_SESSION:
                break
        code = int(answer.get("code", 1))
        if code != 0:
            with log.open("a") as out:
                out.write(f"\n{answer.get('why', '')}\n")
            self.close()
        return code, time.perf_counter() - began

    def _start(self, base: Path, key: tuple, imports: Sequence[str], quick: bool) -> None:
        self.close()
        self.started += 1
        where = self.where / f"batch-oracle-{self.started}"
        server = OracleServer(where, base, imports, quick, self.registry)
        self.server, self.key = server, key
        server.start().wait_ready()

    def close(self, hard: bool = False) -> None:
        """Stop the server (`hard`: kill it, as a crash would, in the middle of a request)."""
        if self.server is not None:
            self.server.kill() if hard else self.server.stop()
            self.server, self.key = None, None


_SERVING: contextvars.ContextVar[Serving | None] = contextvars.ContextVar("batch_oracle_serving",
                                                                         default=None)


@contextlib.contextmanager
def serving(registry: Registry | None, where: Path) -> Iterator[Serving]:
    """Within: the batch oracle's runs ask one server (stopped at the end) instead of each
    starting a Spark session of its own."""
    holder = Serving(registry, where)
    token = _SERVING.set(holder)
    try:
        yield holder
    except BaseException:   # Ctrl-C, an aborted run: no wait for a request in flight to end
        holder.close(hard=True)
        raise
    finally:
        _SERVING.reset(token)
        holder.close()


def current() -> Serving | None:
    return _SERVING.get()
