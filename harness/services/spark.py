"""The Spark driver of one case, as a service: its own OS process, its own JVM.

With the default `local-cluster[N,cores,mem]` master, the driver JVM launches N
executor JVMs (CoarseGrainedExecutorBackend) as child processes in the driver's
process group, so the harness can find, kill and pause each of them.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from harness.errors import ServiceError
from harness.paths import REPO_ROOT
from harness.services.base import Service
from harness.wait import WaitTimeout, wait_until

EXECUTOR_MAIN = "CoarseGrainedExecutorBackend"


class SparkDriver(Service):
    """Runs `workloads.pipelines.driver` with a config written into the workdir."""

    ready_timeout_s = 180.0  # JVM start, executors registering, first batch planned
    stop_timeout_s = 20.0

    def __init__(self, workdir: Path, config: dict, registry=None, name: str = "spark-driver"):
        super().__init__(name, workdir, registry)
        self.config_path = self.workdir / "driver.json"
        self.status_path = self.workdir / "status.json"
        self.progress_path = self.workdir / "progress.jsonl"
        self.stop_path = self.workdir / "STOP"
        self.config = {**config, "status_path": str(self.status_path),
                       "progress_path": str(self.progress_path), "stop_path": str(self.stop_path)}

    def prepare(self) -> None:
        self.stop_path.unlink(missing_ok=True)
        self.status_path.unlink(missing_ok=True)
        self.config_path.write_text(json.dumps(self.config, indent=2))

    def command(self) -> list[str]:
        return [sys.executable, "-m", "workloads.pipelines.driver", str(self.config_path)]

    def env(self) -> dict:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        return env

    def status(self) -> dict:
        try:
            return json.loads(self.status_path.read_text())
        except (OSError, ValueError):
            return {}

    def raise_if_failed(self) -> None:
        state = self.status()
        if state.get("state") == "failed":
            raise ServiceError(f"the Spark driver failed: {state.get('error')}", f"read {self.log_path}")

    def is_ready(self) -> bool:
        # a driver that fails fast may exit before the harness polls: both paths name its error
        self.raise_if_failed()
        return self.status().get("state") == "running"

    def executor_pids(self) -> list[int]:
        """Pids of the executor JVMs (empty for a `local[*]` master)."""
        import psutil

        pids = []
        for pid in self.pids():
            try:
                if any(EXECUTOR_MAIN in part for part in psutil.Process(pid).cmdline()):
                    pids.append(pid)
            except psutil.NoSuchProcess:
                continue
        return pids

    def check_alive(self) -> None:
        """Raise ServiceError when the driver died or its query failed."""
        if not self.running:
            raise ServiceError(
                f"the Spark driver exited with code {self.returncode}: "
                f"{self.status().get('error', '')}\n{self.log_tail()}", f"read {self.log_path}")

    def request_stop(self, timeout_s: float = 60.0) -> None:
        """Ask the driver to stop its query and exit; kill it if it does not in time."""
        if not self.running:
            return
        self.stop_path.touch()
        try:
            wait_until(lambda: not self.running, timeout_s, 0.5, "the Spark driver did not stop")
        except WaitTimeout:
            pass
        self.stop()
