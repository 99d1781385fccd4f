"""What a result was measured on: versions, machine, commit."""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata

from harness import __version__
from harness.paths import REPO_ROOT
from harness.versions import DELTA_VERSION, KAFKA_VERSION, SPARK_VERSION


def describe(spark_master: str, own_kafka: bool) -> dict:
    import psutil

    from harness.jvm import java_version

    return {
        "harness": __version__,
        "python": platform.python_version(),
        "java": java_version(),
        "spark": _installed("pyspark") or SPARK_VERSION,
        "kafka": KAFKA_VERSION if own_kafka else "external",
        "delta": _installed("delta-spark"),
        "spark_master": spark_master,
        "cpus": psutil.cpu_count() or 1,
        "cpus_usable": cpus_usable(),
        "memory_bytes": psutil.virtual_memory().total,
        "git_sha": git_sha(),
        "git_dirty": git_dirty(),
        "cpu_model": cpu_model(),
    }


def cpus_usable() -> int:
    """The CPUs this process may run on: its affinity (1 under `taskset -c 0` on any machine)."""
    import os

    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:   # no affinity on this platform: every CPU
        return os.cpu_count() or 1


def cpu_model() -> str | None:
    """The CPU's model name, from /proc/cpuinfo (Linux) or the platform module."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def git_dirty() -> bool | None:
    """Whether the checkout has uncommitted changes to tracked files (None: not a git checkout)."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return bool(out.stdout.strip()) if out.returncode == 0 else None


def git_sha() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def check_delta_version() -> None:
    """Delta's jar is pinned to DELTA_VERSION; the delta-spark package must match it."""
    from harness.errors import EnvironmentProblem

    installed = _installed("delta-spark")
    if installed != DELTA_VERSION:
        found = "is not installed" if installed is None else f"{installed} is installed"
        raise EnvironmentProblem(f"delta-spark {found}, but its jar is pinned to {DELTA_VERSION}",
                                 f"pip install delta-spark=={DELTA_VERSION} (tox does it), or raise "
                                 "DELTA_VERSION in harness/versions.py with pyproject.toml")


def _installed(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def check_spark_version() -> None:
    """The Kafka connector jars are pinned to SPARK_VERSION; pyspark must match exactly."""
    from harness.errors import EnvironmentProblem

    installed = _installed("pyspark")
    if installed is None:
        raise EnvironmentProblem("pyspark is not installed",
                                 f"pip install pyspark=={SPARK_VERSION} (tox does it)")
    if installed != SPARK_VERSION:
        raise EnvironmentProblem(
            f"pyspark {installed} is installed but the Kafka connector is pinned to {SPARK_VERSION}",
            f"pip install pyspark=={SPARK_VERSION}, or raise SPARK_VERSION in harness/versions.py")
