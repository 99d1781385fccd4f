"""Child processes: spawn in their own session, find their tree, stop and kill it.

Every child starts a new session (setsid), so it and everything it forks (the JVM
under a PySpark driver, the executors under that JVM) share one process group even
after a parent in the middle dies. Killing the group reaps orphans too.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import psutil


def spawn(cmd: list[str], log_path: Path, env: dict | None = None,
          cwd: Path | None = None, user: str | None = None) -> psutil.Popen:
    """Start `cmd` in a new session with stdout and stderr appended to `log_path`."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = psutil.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, cwd=cwd, start_new_session=True, user=user,
        )
    _EXITS.pop(proc.pid, None)   # a reused pid: an older process's status is not this one's
    return proc


# pid -> how a child of this process ended, when a psutil wait reaped it (below): Popen.poll()
# then finds no child to wait for and reads 0 (subprocess takes ECHILD for "exited 0"), so a
# SIGKILLed driver was recorded as "exited with code 0" (issue 41)
_EXITS: dict[int, int] = {}


def _reaped(proc: psutil.Process) -> None:
    if getattr(proc, "returncode", None) is not None:
        _EXITS[proc.pid] = proc.returncode


def exit_status(pid: int, polled: int | None) -> int | None:
    """How the child `pid` ended: `polled` (Popen.poll()), unless a psutil wait of ours reaped it
    first and knew better (negative: the signal that killed it); None while it runs."""
    if polled is None:
        return None
    return _EXITS.get(pid, polled)


def group_members(pgid: int) -> list[psutil.Process]:
    """Every live process whose process group is `pgid` (the session leader's pid)."""
    members = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                members.append(proc)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return members


def tree(pid: int) -> list[psutil.Process]:
    """The process `pid` and its live descendants, parents first."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def signal_group(pgid: int, sig: int) -> None:
    """Send `sig` to a process group; a group that is already gone is fine."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_group(pgid: int, timeout_s: float = 10.0) -> list[int]:
    """SIGTERM the group, wait, then SIGKILL what is left. Returns pids that needed SIGKILL."""
    members = group_members(pgid)
    signal_group(pgid, signal.SIGCONT)  # a paused process cannot handle SIGTERM
    signal_group(pgid, signal.SIGTERM)
    _, alive = psutil.wait_procs(members, timeout=timeout_s, callback=_reaped)
    return kill_group(pgid) if alive else []


def kill_group(pgid: int, timeout_s: float = 10.0) -> list[int]:
    """SIGKILL every process of the group and wait for them to die."""
    members = group_members(pgid)
    signal_group(pgid, signal.SIGKILL)
    psutil.wait_procs(members, timeout=timeout_s, callback=_reaped)
    return [p.pid for p in members]


def kill_stragglers(members: list[psutil.Process], timeout_s: float = 10.0) -> None:
    """SIGKILL the processes of `members` that still run (the same processes: psutil
    checks the start time, so a reused pid is left alone)."""
    left = [p for p in members if _live(p)]
    for proc in left:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(left, timeout=timeout_s, callback=_reaped)


def _live(proc: psutil.Process) -> bool:
    """Whether `proc` still runs and is not a zombie: False for one that ends while we ask (a
    driver's Python worker, killed with its group a moment before, reaped between is_running()
    and status(): that race failed a kill-driver in CI with NoSuchProcess)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def alive(pid: int, create_time: float | None = None) -> bool:
    """Whether `pid` runs and, when given, is the same process (same start time)."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return create_time is None or abs(proc.create_time() - create_time) < 0.01
    except psutil.NoSuchProcess:
        return False


def of_run(run_id: str) -> list[psutil.Process]:
    """Live processes carrying the run's HARNESS_RUN_ID in their environment (every process
    a CLI run starts inherits it, however deep in the tree), this one left out."""
    marker = f"HARNESS_RUN_ID={run_id}".encode()
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid == os.getpid() or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if marker in Path(f"/proc/{proc.pid}/environ").read_bytes().split(b"\0"):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
            continue
    return found


def describe(proc: psutil.Process) -> str:
    """"4242 java -cp ... kafka.Kafka" (the command line cut at 120 characters)."""
    try:
        return f"{proc.pid} {' '.join(proc.cmdline())[:120]}"
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return f"{proc.pid} (gone)"

