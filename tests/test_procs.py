"""How a process the harness started ended, as its service and the incidents record it."""

from __future__ import annotations

import signal
import sys

import pytest

from harness.services.base import Service

pytestmark = pytest.mark.unit


class Sleeper(Service):
    def command(self) -> list[str]:
        return [sys.executable, "-c", "import time; time.sleep(60)"]

    def is_ready(self) -> bool:
        return True


class TestHowItEnded:
    def test_a_killed_service_says_sigkill_not_exit_code_0(self, tmp_path):
        """kill() reaps the process with psutil, and Popen.poll() then found no child and read 0: a
        SIGKILLed driver was recorded "exited with code 0" (issue 41). Its code is now -9."""
        sleeper = Sleeper("sleeper", tmp_path).start()
        sleeper.kill()
        assert sleeper.returncode == -signal.SIGKILL

    def test_a_stopped_service_says_sigterm(self, tmp_path):
        sleeper = Sleeper("sleeper", tmp_path).start()
        sleeper.stop()
        assert sleeper.returncode == -signal.SIGTERM

    def test_a_running_service_has_no_code(self, tmp_path):
        sleeper = Sleeper("sleeper", tmp_path).start()
        try:
            assert sleeper.returncode is None
        finally:
            sleeper.kill()

    def test_the_incident_of_a_killed_process_names_the_signal(self, tmp_path):
        """The watch over the registry records the exit as the incident reads it: "killed by SIGKILL"."""
        import json

        from harness.results.rundir import CaseDir
        from harness.run import incidents
        from harness.services.base import Registry

        registry = Registry()
        sleeper = Sleeper("spark-driver", tmp_path / "s", registry).start()
        files = CaseDir(tmp_path)
        watch = incidents.Watch(registry, files)
        watch.poll()
        sleeper.kill()
        watch.poll()
        (line,) = [json.loads(x) for x in files.processes.read_text().splitlines()]
        assert incidents._exit(line["returncode"]) == "killed by SIGKILL"


class _EndsWhileAsked:
    """A process handle whose process is reaped between is_running() and status(): the race a
    kill-driver met in CI when a killed driver's Python worker went a moment after its group."""

    pid = 4242

    def is_running(self) -> bool:
        return True

    def status(self) -> str:
        import psutil

        raise psutil.NoSuchProcess(self.pid)

    def kill(self) -> None:   # pragma: no cover - never called for a gone process
        raise AssertionError("killed a process that was gone")


class TestKillStragglers:
    def test_a_process_that_ends_while_asked_is_left_alone(self):
        """Before the fix the kill-driver of a plant's case failed: "the fault could not be carried
        out: NoSuchProcess: process no longer exists"."""
        from harness import procs

        procs.kill_stragglers([_EndsWhileAsked()])   # type: ignore[list-item]

    def test_a_live_straggler_is_still_killed(self, tmp_path):
        import subprocess

        import psutil

        from harness import procs

        child = psutil.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             stdout=subprocess.DEVNULL)
        procs.kill_stragglers([child])
        assert child.wait(timeout=5) == -signal.SIGKILL
