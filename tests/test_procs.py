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
