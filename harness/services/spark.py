"""The Spark driver of one case, as a service: its own OS process, its own JVM.

With the default `local-cluster[N,cores,mem]` master, the driver JVM launches N
executor JVMs (CoarseGrainedExecutorBackend) as child processes in the driver's
process group, so the harness can find, kill and pause each of them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from harness.errors import ServiceError
from harness.paths import REPO_ROOT
from harness.results.rundir import CaseDir
from harness.services.base import Service
from workloads.pipelines.config import DriverConfig
from workloads.wait import WaitTimeout, wait_until

EXECUTOR_MAIN = "CoarseGrainedExecutorBackend"
# lines of a driver log worth showing when it died: Spark's and Python's errors
_ERROR_LINE = re.compile(r"\b(ERROR|FATAL)\b|^\w*(Error|Exception)\b|^Traceback|^Caused by:")


def _executor_args(pid: int) -> list[str] | None:
    """An executor process's command line, None for another process (or one gone)."""
    import psutil

    try:
        args = psutil.Process(pid).cmdline()
    except psutil.Error:
        return None
    return args if any(EXECUTOR_MAIN in part for part in args) else None


def _executor_arg(pid: int, flag: str) -> str | None:
    """The value of `flag` on an executor's command line ("" when it has none), None for another process."""
    args = _executor_args(pid)
    if args is None:
        return None
    return args[args.index(flag) + 1] if flag in args[:-1] else ""


def _executor_of(pid: int) -> str | None:
    """The application id an executor process runs ("" when it says none), None for another process."""
    return _executor_arg(pid, "--app-id")


def spark_home() -> Path:
    """Where the driver's Spark lives: SPARK_HOME, else the pyspark package (a pip install)."""
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    import pyspark

    return Path(pyspark.__file__).parent


def make_local_dirs(conf_dirs: str = "") -> list[Path]:
    """A fresh directory of the harness's for one Spark process's scratch (SPARK_LOCAL_DIRS),
    under each place Spark would have put it: the user's SPARK_LOCAL_DIRS, else the scenario's
    `spark.local.dir`, else the system's temporary directory. Absolute: Spark runs in the
    service's workdir, the harness elsewhere."""
    chosen = os.environ.get("SPARK_LOCAL_DIRS") or conf_dirs
    bases = [os.path.abspath(part.strip()) for part in chosen.split(",") if part.strip()]
    made: list[Path] = []
    for base in bases or [tempfile.gettempdir()]:
        try:
            Path(base).mkdir(parents=True, exist_ok=True)
            made.append(Path(tempfile.mkdtemp(prefix="harness-spark-", dir=base)))
            if "," in str(made[-1]):
                raise OSError("a comma in the path: SPARK_LOCAL_DIRS separates directories by commas")
        except OSError as e:
            for path in made:
                shutil.rmtree(path, ignore_errors=True)
            raise ServiceError(f"Spark's local directory cannot be made under {base}: {e}",
                               "point SPARK_LOCAL_DIRS (or TMPDIR, or spark.local.dir in "
                               "services.spark.conf) at a writable directory") from None
    return made


def scratch_env(local_dirs: list[Path]) -> dict[str, str]:
    """The environment that puts a Spark process's scratch, and its child JVMs', in
    `local_dirs`: Spark's local directories, and the JVMs' own temporary directory, where the
    RocksDB and LZ4 native libraries are unpacked (a JVM killed by SIGKILL leaves its copy:
    41 librocksdbjni-*.so of 14 MB and 2,068 liblz4-java-*.so files here after two days). A
    -Djava.io.tmpdir of the user's, in extraJavaOptions, still wins: the command line comes
    after JAVA_TOOL_OPTIONS."""
    if not local_dirs:
        return {}
    tool = " ".join(filter(None, [os.environ.get("JAVA_TOOL_OPTIONS"), f"-Djava.io.tmpdir={local_dirs[0]}"]))
    return {"SPARK_LOCAL_DIRS": ",".join(str(path) for path in local_dirs), "JAVA_TOOL_OPTIONS": tool}


class DriverDied(ServiceError):
    """The driver process is gone, or its query failed, while the case needed it."""

    def __init__(self, how: str, error_lines: list[str], log_path: Path):
        self.how, self.error_lines = how, error_lines
        shown = "\n".join(f"    {line}" for line in error_lines) or "    (no ERROR lines in its log)"
        super().__init__(f"the Spark driver {how}; its log's error lines:\n{shown}", f"read {log_path}")


class SparkDriver(Service):
    """Runs `workloads.pipelines.driver` with its DriverConfig written into the workdir."""

    ready_timeout_s = 180.0  # JVM start, executors registering, first batch planned
    stop_timeout_s = 20.0

    def __init__(self, workdir: Path, config: DriverConfig, registry=None, name: str = "spark-driver"):
        super().__init__(name, workdir, registry)
        files = CaseDir(self.workdir)
        self.config = replace(config, status_path=str(files.status), conf_path=str(files.spark_conf),
                              progress_path=str(files.progress), executors_path=str(files.executors),
                              stop_path=str(files.stop), timers_path=str(files.timers),
                              control_dir=str(files.control))
        self.config_path = files.driver_config
        self.status_path = Path(self.config.status_path)
        self.progress_path = Path(self.config.progress_path)
        self.stop_path = Path(self.config.stop_path)
        self.seen_executor_pids: set[int] = set()
        self.seen_executor_ids: set[str] = set()   # their `--executor-id`s: keep_executor_logs
        self.local_dirs: list[Path] = []

    def prepare(self) -> None:
        self.stop_path.unlink(missing_ok=True)
        self.status_path.unlink(missing_ok=True)
        self.config.write(self.config_path)
        self.local_dirs = make_local_dirs(self.config.spark_conf.get("spark.local.dir", ""))

    def scratch(self) -> list[Path]:
        """Spark's local directories and its JVMs' temporary directory (the driver's block
        manager, its in-JVM workers' executor directories, pyspark's and the added files'
        copies, the native libraries): a driver killed by SIGKILL, or its executors, never
        remove them, and on a shared machine /tmp filled with one `blockmgr-*` and one
        `spark-*` per driver (269 and 26 after two days of runs here)."""
        return list(self.local_dirs)

    def command(self) -> list[str]:
        return [sys.executable, "-m", "workloads.pipelines.driver", str(self.config_path)]

    def env(self) -> dict:
        env = dict(os.environ)
        # the scenario's directory first (the user's pipeline and sink), then ours; executors
        # and their Python workers inherit it from the driver's JVM in local-cluster mode
        paths = [*self.config.import_paths, str(REPO_ROOT), env.get("PYTHONPATH")]
        env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        env.update(scratch_env(self.local_dirs))
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
        """Pids of the executor JVMs (empty for a `local[*]` master): on local-cluster the
        driver's children; on a standalone cluster of the harness's own, its workers'
        children that run this driver's application."""
        pids = [pid for pid in self.pids() if _executor_of(pid) is not None]
        if not pids and self.registry is not None:
            app = self.app_id()
            pids = [pid for service in list(self.registry.services) if service.name.startswith("spark-worker")
                    for pid in service.pids() if app is not None and _executor_of(pid) == app]
        for pid in set(pids) - self.seen_executor_pids:
            executor = _executor_arg(pid, "--executor-id")
            if executor:
                self.seen_executor_ids.add(executor)
        self.seen_executor_pids.update(pids)
        return pids

    def app_id(self) -> str | None:
        """Spark's id of the driver's application (spark-conf.json, written once it runs)."""
        try:
            return json.loads(Path(self.config.conf_path).read_text()).get("spark.app.id")
        except (OSError, ValueError):
            return None

    def snapshot_pids(self) -> set[int]:
        self.executor_pids()
        return super().snapshot_pids()

    def check_alive(self) -> None:
        """Raise DriverDied when the driver exited or its query failed."""
        if not self.running:
            raise DriverDied(self.how_it_ended(), self.error_lines(), self.log_path)

    def how_it_ended(self) -> str:
        """'was killed by SIGKILL', 'exited with code 1 (...)'."""
        code = self.returncode
        if code is not None and code < 0:
            return f"was killed by {signal.Signals(-code).name}"
        error = self.status().get("error")
        return f"exited with code {code}" + (f" ({error})" if error else "")

    def error_lines(self, limit: int = 12) -> list[str]:
        """The log's ERROR, exception and traceback lines, the last `limit` of them."""
        if not self.log_path.exists():
            return []
        lines = self.log_path.read_text(errors="replace").splitlines()
        return [line.rstrip()[:300] for line in lines if _ERROR_LINE.search(line)][-limit:]

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

    def cleanup(self) -> None:
        """A driver that was killed or stopped from outside never wrote its last status: say
        how it ended, so status.json never claims a dead driver is running. Nothing when its
        case directory is gone (the pytest plugin removes a passing run's before the
        session's services stop)."""
        if not self.status_path.parent.is_dir():
            return
        state = self.status()
        if state.get("state") in (None, "running"):
            self.status_path.write_text(json.dumps({
                **state, "state": "killed" if (self.returncode or 0) < 0 else "exited",
                "returncode": self.returncode, "how": self.how_it_ended(),
                "at_ms": time.time_ns() // 1_000_000}))
        self.keep_executor_logs()

    def keep_executor_logs(self) -> None:
        """local-cluster's executors write their stdout and stderr under Spark's home
        (`work/<app id>/<executor>/`), beside a copy of every jar: in a tox env that is
        site-packages, where they piled up (1.5 GB over a day of runs) and no run directory
        held them. Each driver's, once it is gone, goes to the case's `executor-logs/<app id>/`
        without the jars.

        Only the executors this driver was seen running, by their ids: each local-cluster
        driver's own master names its application `app-<second>-0000`, so two drivers started
        in the same second (two runs at once: tox's two test workers) share that directory, and
        one's end must neither take nor delete the other's live executors' directories (their
        working directory, where a clock fault writes). The application's directory goes when
        nothing is left in it."""
        import shutil

        app = self.app_id()
        work = spark_home() / "work" / app if app else None
        if work is None or not self.config.master.startswith("local-cluster") or not work.is_dir():
            return
        kept = CaseDir(self.workdir).executor_logs / app
        for executor in sorted(work / name for name in self.seen_executor_ids):
            for log in ("stdout", "stderr"):
                if (executor / log).is_file():
                    (kept / executor.name).mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(executor / log, kept / executor.name / log)
            shutil.rmtree(executor, ignore_errors=True)
        try:
            work.rmdir()
        except OSError:
            pass   # another driver's executors are in it
