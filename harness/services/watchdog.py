"""The watchdog: a small process that outlives the harness only to stop what the harness left.

A harness process that dies without stopping its services (SIGKILL, an OOM kill, or a test
runner's `subprocess.run` that kills its child on Ctrl-C) leaves its broker, PostgreSQL
server and Spark processes running. `reap_leftovers` stops them at the next run's start; the
watchdog stops them at once:

    python -m harness.services.watchdog

It is started by `Registry.__enter__` (harness/services/base.py, `start_watchdog`) with its
stdin a pipe from the harness, in a session of its own (a Ctrl-C to the terminal's process
group is the harness's to handle), and without the run's HARNESS_RUN_ID (it is not a process
of the run). The harness writes `done` to the pipe when it has stopped its services itself;
any other end of the pipe (the harness process is gone: the kernel closed its end) makes the
watchdog wait for the harness to be dead and reap the services whose owner is dead
(`reap_leftovers`, which never touches a live run's).
"""

from __future__ import annotations

import signal
import sys
import time

from harness import procs
from harness.services.base import DONE, reap_leftovers

OWNER_DEATH_WAIT_S = 10.0   # the pipe closes as the owner exits; its process is gone soon after


def main(owner_pid: int) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    said = sys.stdin.buffer.read()   # until the harness writes `done` or its end closes
    if said == DONE:
        return 0
    deadline = time.monotonic() + OWNER_DEATH_WAIT_S
    while procs.alive(owner_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    reap_leftovers()
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
