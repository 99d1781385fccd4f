"""A Spark standalone cluster of the harness's own: Spark's Master and Workers started from
pyspark's jars (`bin/spark-class org.apache.spark.deploy.master.Master` and
`...deploy.worker.Worker`), each a service of its own, bound to 127.0.0.1.

An application's executors are children of the Worker that launched them, in its process
group: losing a Worker (kill-worker) takes all of its executors at once, and the Master gives
the application new ones on the other Workers.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

from harness.net import free_port
from harness.services.base import Service
from harness.services.spark import make_local_dirs, scratch_env

_REGISTERED = re.compile(r"Successfully registered with master")
_LEADER = re.compile(r"I have been elected leader|Running Spark version")


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


class _SparkDaemon(Service):
    """A Spark daemon run by spark-class, its log in the service's workdir."""

    ready_timeout_s = 90.0

    def env(self) -> dict:
        env = dict(os.environ)
        env.update(SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1",
                   SPARK_LOG_DIR=str(self.workdir), SPARK_DAEMON_MEMORY="256m")
        return env

    def _class(self, main: str, *args: str) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), main, *args]

    def _log_has(self, pattern: re.Pattern) -> bool:
        return self.log_path.exists() and bool(pattern.search(self.log_path.read_text(errors="replace")))


class SparkMaster(_SparkDaemon):
    def __init__(self, workdir: Path, registry=None, name: str = "spark-master"):
        super().__init__(name, workdir, registry)
        self.port = free_port()

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        return self._class("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                           "--port", str(self.port), "--webui-port", str(free_port()))

    def is_ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                pass
        except OSError:
            return False
        return self._log_has(_LEADER)


class SparkWorker(_SparkDaemon):
    """Worker `index` (worker:<index>, from 0) of the cluster at `master_url`."""

    def __init__(self, workdir: Path, master_url: str, index: int, cores: int, memory: str, registry=None):
        super().__init__(f"spark-worker-{index}", workdir, registry)
        self.master_url, self.index, self.cores, self.memory = master_url, index, cores, memory
        self.local_dirs: list[Path] = []

    def command(self) -> list[str]:
        return self._class("org.apache.spark.deploy.worker.Worker", self.master_url, "--host", "127.0.0.1",
                           "--cores", str(self.cores), "--memory", self.memory,
                           "--webui-port", str(free_port()), "--work-dir", str(self.workdir / "work"))

    def prepare(self) -> None:
        # a restarted worker registers again: its log must say so anew
        self.log_path.unlink(missing_ok=True)
        self.local_dirs = make_local_dirs()

    def env(self) -> dict:
        # its executors' scratch (shuffle files, block managers, native libraries) under a
        # directory of the harness's, removed when the worker is gone: a killed worker leaves
        # them otherwise
        return {**super().env(), **scratch_env(self.local_dirs)}

    def scratch(self) -> list[Path]:
        return list(self.local_dirs)

    def is_ready(self) -> bool:
        return self._log_has(_REGISTERED)


class SparkStandalone:
    """A master and `workers` workers of `cores` cores and `memory` each."""

    def __init__(self, workdir: Path, registry, workers: int = 2, cores: int = 1,
                 memory: str = "1g"):
        self.master = SparkMaster(Path(workdir) / "master", registry)
        self.workers = [SparkWorker(Path(workdir) / f"worker-{i}", self.master.url, i, cores, memory,
                                    registry) for i in range(workers)]

    @property
    def url(self) -> str:
        return self.master.url

    def start(self) -> SparkStandalone:
        self.master.start().wait_ready()
        for worker in self.workers:
            worker.start()
        for worker in self.workers:
            worker.wait_ready()
        return self

    def worker(self, index: int) -> SparkWorker:
        return self.workers[index]
