"""Where things live: the repository, the JVM cache, the run directories."""

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    """The git-ignored cache for fetched jars and crash-recovery state."""
    return Path(os.environ.get("HARNESS_CACHE", REPO_ROOT / ".cache")).resolve()


def results_dir() -> Path:
    """The default parent of run directories."""
    return Path(os.environ.get("HARNESS_RESULTS", REPO_ROOT / "results")).resolve()


def state_dir() -> Path:
    """Pid files of running services, so a later run can reap a crashed run's leftovers:
    HARNESS_STATE_DIR, else the cache's `state/`. Each pytest-xdist worker of the tests has its
    own (conftest.py), so that no worker's run reaps what another worker's test crashed on
    purpose before the test looks."""
    path = Path(os.environ.get("HARNESS_STATE_DIR") or cache_dir() / "state").resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path
