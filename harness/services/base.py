"""One lifecycle for every process the harness starts: start, ready, stop, kill, pause.

A service registers itself with a Registry when created; the registry stops all of
them in reverse order, whatever happened, and records each running service in a pid
file so that a later run can reap what a crashed run left behind.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Self

import psutil

from harness import procs
from harness.errors import ServiceError
from harness.paths import state_dir
from workloads.wait import WaitTimeout, wait_until

log = logging.getLogger(__name__)


class Service:
    """A process (and its descendants) with one lifecycle.

    Subclasses implement `command()` and `is_ready()`, and may override `prepare()`
    (runs before the process starts) and `env()`/`user()`.
    """

    ready_timeout_s = 60.0
    stop_timeout_s = 15.0

    def __init__(self, name: str, workdir: Path, registry: Registry | None = None):
        self.name = name
        self.workdir = Path(workdir)
        self.log_path = self.workdir / f"{name}.log"
        self.process: psutil.Popen | None = None
        self.seen_pids: set[int] = set()
        # each pid's start time when last seen as this service's: a pid the kernel gave to another
        # process since (a machine running other suites recycles pids fast) is not a leftover
        self.seen_started: dict[int, float] = {}
        self.registry = registry
        if registry is not None:
            registry.register(self)

    # -- to implement -------------------------------------------------------------
    def command(self) -> list[str]:
        raise NotImplementedError

    def is_ready(self) -> bool:
        raise NotImplementedError

    def prepare(self) -> None:
        """Write config files, format storage: anything before the process starts."""

    def env(self) -> dict | None:
        return None

    def cleanup(self) -> None:
        """Tidy up once the process is gone (the scratch directories go after it)."""

    def scratch(self) -> list[Path]:
        """Directories outside the workdir that the process fills and nobody reads once it is
        gone: removed when it is reaped, and by `reap_leftovers` when a crashed harness left it."""
        return []

    def mounts(self) -> list[Path]:
        """Mount points the process serves (a FUSE file system): a process killed with its
        mount up leaves it dead ("Transport endpoint is not connected"), so `reap_leftovers`
        detaches them when a crashed harness left one."""
        return []

    def user(self) -> str | None:
        return None

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> Self:
        """Start the process; returns at once (call `wait_ready`)."""
        if self.running:
            raise ServiceError(f"{self.name} is already running (pid {self.pid})")
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self.prepare()
            self.process = procs.spawn(self.command(), self.log_path, env=self.env(),
                                       cwd=self.workdir, user=self.user())
        except BaseException:
            _remove(self.scratch())   # no process, no pid file: nothing else would
            raise
        self.remember([self.process])
        _write_pidfile(self)
        log.info("%s started (pid %d), log %s", self.name, self.process.pid, self.log_path)
        if self.registry is not None:
            self.registry.changed()
        return self

    def raise_if_failed(self) -> None:
        """Raise ServiceError with the service's own account of a failure, if it left one
        (called when the process has exited before it was ready)."""

    def wait_ready(self, timeout_s: float | None = None) -> Self:
        """Block until the service answers; raise ServiceError with its log tail if it dies or times out."""
        timeout_s = timeout_s or self.ready_timeout_s

        def ready() -> bool:
            if not self.running:
                self.raise_if_failed()
                raise ServiceError(
                    f"{self.name} exited with code {self.returncode} before it was ready; "
                    f"last log lines:\n{self.log_tail()}",
                    f"read {self.log_path}",
                )
            return self.is_ready()

        try:
            wait_until(ready, timeout_s, backoff_s=0.25)
        except WaitTimeout:
            raise ServiceError(
                f"{self.name} was not ready after {timeout_s:.0f}s; last log lines:\n{self.log_tail()}",
                f"read {self.log_path}",
            ) from None
        self.snapshot_pids()
        if self.registry is not None:
            self.registry.changed()
        return self

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop gracefully (SIGTERM to the whole process group), then SIGKILL what is left."""
        if self.process is None:
            return
        members = self._members()
        procs.stop_group(self.process.pid, timeout_s or self.stop_timeout_s)
        procs.kill_stragglers(members)
        self._reap()

    def kill(self) -> None:
        """SIGKILL the whole process group at once (a crash, not a shutdown)."""
        if self.process is None:
            return
        members = self._members()
        procs.kill_group(self.process.pid)
        procs.kill_stragglers(members)
        self._reap()

    def pause(self) -> None:
        """SIGSTOP every process of the service (a GC pause or a frozen VM)."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    # -- introspection ---------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        """Its exit code, negative for the signal that killed it; None while it runs."""
        return procs.exit_status(self.process.pid, self.process.poll()) if self.process else None

    def pids(self) -> list[int]:
        """Live pids of the service: its process group (which survives a dead parent)
        and its descendants (which may have left the group, as PostgreSQL's do)."""
        return sorted(p.pid for p in self._members())

    def _members(self) -> list[psutil.Process]:
        if self.process is None:
            return []
        found = {p.pid: p for p in procs.group_members(self.process.pid)}
        if self.process.poll() is None:   # once reaped, its pid may belong to another process
            found.update((p.pid, p) for p in procs.tree(self.process.pid))
        self.remember(found.values())
        return list(found.values())

    def remember(self, processes) -> None:
        """Note each process as this service's: its pid and its start time."""
        for proc in processes:
            self.seen_pids.add(proc.pid)
            try:
                self.seen_started[proc.pid] = proc.create_time()
            except psutil.Error:
                pass

    def leftovers(self) -> list[int]:
        """The pids seen as this service's that still run as the same processes (what was seen;
        after a stop, a new look could take another process group that got the old id)."""
        return sorted(pid for pid in self.seen_pids if procs.alive(pid, self.seen_started.get(pid)))

    def snapshot_pids(self) -> set[int]:
        """Remember every pid seen so far, so a test can prove that none survives."""
        self._members()
        return self.seen_pids

    def log_tail(self, lines: int = 20) -> str:
        if not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def _signal(self, sig: int) -> None:
        if self.process is None:
            raise ServiceError(f"{self.name} is not running")
        members = self._members()
        procs.signal_group(self.process.pid, sig)
        for proc in members:  # descendants that left the group (PostgreSQL's backends)
            try:
                proc.send_signal(sig)
            except psutil.NoSuchProcess:
                pass

    def _reap(self) -> None:
        assert self.process is not None
        try:
            self.process.wait(timeout=5)
        except psutil.TimeoutExpired:
            log.warning("%s (pid %d) did not exit", self.name, self.process.pid)
        _pidfile(self).unlink(missing_ok=True)
        self.cleanup()
        _remove(self.scratch())


class Registry:
    """Owns every service of a run; `stop_all` stops them in reverse start order.

    Use as a context manager: services are stopped on success, on an exception, and
    on the RunAborted raised by the CLI's SIGINT/SIGTERM handler.
    """

    def __init__(self, pids_path: Path | None = None):
        self.services: list[Service] = []
        self.pids_path = pids_path
        self.reaped: list[dict] = []

    def changed(self) -> None:
        """Write every pid each service has had to `pids_path` (during the run, not only at
        its end), so anyone can find the processes, and check that none is left running."""
        if self.pids_path is None:
            return
        pids = {f"{s.name}#{i}": sorted(s.snapshot_pids()) for i, s in enumerate(self.services)}
        tmp = self.pids_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(pids, indent=1))
        os.replace(tmp, self.pids_path)

    def register(self, service: Service) -> Service:
        self.services.append(service)
        return service

    def stop_all(self) -> list[str]:
        """Stop every service, newest first; a failing stop is logged and the rest still stop.

        SIGINT and SIGTERM are held back meanwhile: a Ctrl-C during cleanup is delivered
        after it, instead of cutting it short and leaking processes.
        """
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            return self._stop_each()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)

    def _stop_each(self) -> list[str]:
        failures: list[str] = []
        done: set[int] = set()
        for service in reversed(self.services):
            if id(service) in done:
                continue
            # the nodes of one cluster stop together: one by one, the last Kafka node waits
            # out its stop timeout for a quorum that left before it
            group = list({id(s): s for s in (service, *(s for s in reversed(self.services)
                                                          if _same_cluster(s, service)))}.values())
            done.update(id(s) for s in group)
            threads = [threading.Thread(target=_stop_or_kill, args=(s, failures), name=f"stop-{s.name}")
                       for s in group[1:]]
            for thread in threads:
                thread.start()
            _stop_or_kill(group[0], failures)
            for thread in threads:
                thread.join()
        return failures

    def seen_pids(self) -> set[int]:
        return set().union(*(s.snapshot_pids() for s in self.services)) if self.services else set()

    def leftovers(self) -> list[int]:
        """Every service's pids that still run as the processes it started (not a pid reused)."""
        return sorted(set().union(*(s.leftovers() for s in self.services))) if self.services else []

    def __enter__(self) -> Registry:
        self.reaped = reap_leftovers()
        # stops the services at once if this process dies without stopping them (SIGKILL)
        self.watchdog = start_watchdog()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop_all()
        self.changed()
        stand_down(getattr(self, "watchdog", None))


def _same_cluster(a: Service, b: Service) -> bool:
    cluster = getattr(a, "cluster", None)
    return cluster is not None and cluster is getattr(b, "cluster", None)


def _stop_or_kill(service: Service, failures: list[str]) -> None:
    try:
        service.stop()
    except Exception as exc:  # noqa: BLE001 - one failure must not leak the others
        log.error("stopping %s failed: %s", service.name, exc)
        failures.append(f"{service.name}: {exc}")
        _kill_quietly(service)


def _kill_quietly(service: Service) -> None:
    try:
        service.kill()
    except Exception as exc:  # noqa: BLE001
        log.error("killing %s failed: %s", service.name, exc)


# -- crash recovery -----------------------------------------------------------------
DONE = b"done"   # what the harness tells its watchdog when it stopped its services itself


def start_watchdog() -> subprocess.Popen | None:
    """The watchdog of this process's services (harness/services/watchdog.py), or None when it
    cannot start (the services are then reaped by the next run)."""
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_RUN_ID"}
    try:
        return subprocess.Popen([sys.executable, "-m", "harness.services.watchdog", str(os.getpid())],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, env=env)
    except OSError:
        return None


def stand_down(watchdog: subprocess.Popen | None) -> None:
    """The services are stopped: the watchdog exits without reaping."""
    if watchdog is None or watchdog.stdin is None:
        return
    try:
        watchdog.stdin.write(DONE)
        watchdog.stdin.close()
    except OSError:
        pass
    try:
        watchdog.wait(timeout=5)
    except subprocess.TimeoutExpired:
        watchdog.kill()


def _pidfile(service: Service) -> Path:
    assert service.process is not None
    return state_dir() / f"{service.process.pid}.json"


def _write_pidfile(service: Service) -> None:
    proc = service.process
    assert proc is not None
    me = psutil.Process()
    record = {"name": service.name, "pgid": proc.pid, "create_time": proc.create_time(),
              "owner_pid": me.pid, "owner_create_time": me.create_time(),
              "workdir": str(service.workdir), "written_at": time.time(),
              "scratch": [str(path) for path in service.scratch()],
              "mounts": [str(path) for path in service.mounts()],
              "run_id": os.environ.get("HARNESS_RUN_ID")}
    _pidfile(service).write_text(json.dumps(record))


def reap_leftovers() -> list[dict]:
    """Kill the process groups that an earlier, crashed run recorded and never stopped.

    Only records whose owner (the harness process that started them) is dead are
    touched: a run going on beside this one keeps its services. Returns one record per
    service reaped: its name, the run that left it, and how many processes were killed.
    """
    reaped = []
    for path in sorted(state_dir().glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
            continue
        if procs.alive(record["owner_pid"], record["owner_create_time"]):
            continue
        members = procs.group_members(record["pgid"])
        if procs.alive(record["pgid"], record["create_time"]) or members:
            log.warning("reaping %s (pgid %d) left by run %s", record["name"], record["pgid"],
                        record.get("run_id"))
            procs.signal_group(record["pgid"], signal.SIGCONT)   # a paused process must die too
            procs.kill_group(record["pgid"])
            reaped.append({"name": record["name"], "run_id": record.get("run_id") or "unknown",
                           "processes": max(len(members), 1)})
        for point in record.get("mounts", []):   # a killed file system's mount is left dead
            unmount(Path(point), lazy=True)
        _remove(Path(p) for p in record.get("scratch", []))
        path.unlink(missing_ok=True)
    return reaped


def mounted(point: Path) -> bool:
    """Whether the kernel holds a mount at `point`, alive or not (a dead one fails every stat)."""
    target = str(point.resolve())
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return os.path.ismount(point)
    return any(line.split()[1:2] == [target] for line in lines)


def unmount(point: Path, lazy: bool) -> None:
    """fusermount3 -u (-z: lazily, for a dead mount or one still in use), when mounted."""
    if shutil.which("fusermount3") is not None and mounted(point):
        subprocess.run(["fusermount3", "-u", *(["-z"] if lazy else []), str(point)],
                       capture_output=True, timeout=30)


def _remove(dirs) -> None:
    for path in dirs:
        shutil.rmtree(path, ignore_errors=True)


def describe_reaped(reaped: list[dict]) -> list[str]:
    """'reaped 5 processes left by run X' lines, one per earlier run."""
    runs: dict[str, int] = {}
    for record in reaped:
        runs[record["run_id"]] = runs.get(record["run_id"], 0) + record["processes"]
    return [f"reaped {n} process{'es' * (n != 1)} left by run {run}" for run, n in runs.items()]
