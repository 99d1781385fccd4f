"""A service's scratch directories outside its workdir: gone once the process is, and gone
when a later run reaps what a crashed harness left (Spark's local directories filled /tmp
with one `blockmgr-*` and one `spark-*` per killed driver)."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import pytest

from harness.services import base
from harness.services.base import Service
from harness.services.spark import make_local_dirs, scratch_env

pytestmark = pytest.mark.unit


class _Sleeper(Service):
    def __init__(self, workdir: Path, scratch_dir: Path):
        super().__init__("sleeper", workdir)
        self.scratch_dir = scratch_dir

    def command(self) -> list[str]:
        return [sys.executable, "-c", "import time; time.sleep(60)"]

    def is_ready(self) -> bool:
        return True

    def prepare(self) -> None:
        (self.scratch_dir / "blockmgr-1").mkdir(parents=True)

    def scratch(self) -> list[Path]:
        return [self.scratch_dir]


@pytest.fixture
def states(tmp_path, monkeypatch):
    states = tmp_path / "state"
    states.mkdir()
    monkeypatch.setattr(base, "state_dir", lambda: states)
    return states


@pytest.mark.parametrize("end", ["stop", "kill"])
def test_the_scratch_goes_when_the_process_ends(tmp_path, states, end):
    service = _Sleeper(tmp_path / "work", tmp_path / "scratch").start()
    try:
        record = json.loads(next(states.glob("*.json")).read_text())
        assert record["scratch"] == [str(tmp_path / "scratch")]
        assert (tmp_path / "scratch" / "blockmgr-1").is_dir()
    finally:
        getattr(service, end)()
    assert not (tmp_path / "scratch").exists() and not list(states.glob("*.json"))


def test_the_scratch_goes_when_the_process_never_starts(tmp_path, states):
    class Missing(_Sleeper):
        def command(self) -> list[str]:
            return [str(tmp_path / "no-such-program")]

    with pytest.raises(OSError):
        Missing(tmp_path / "work", tmp_path / "scratch").start()
    assert not (tmp_path / "scratch").exists() and not list(states.glob("*.json"))


def test_a_crashed_harness_leaves_its_scratch_to_the_next_run(tmp_path, states):
    """The owner is dead (a pid and start time no process has): its record's scratch goes,
    and nothing of a live owner's is touched."""
    left, kept = tmp_path / "left", tmp_path / "kept"
    left.mkdir(), kept.mkdir()
    dead = {"name": "spark-driver", "pgid": 999_999_999, "create_time": 1.0, "owner_pid": 999_999_998,
            "owner_create_time": 1.0, "scratch": [str(left)]}
    import psutil

    me = psutil.Process()
    alive = {**dead, "owner_pid": me.pid, "owner_create_time": me.create_time(), "scratch": [str(kept)]}
    (states / "1.json").write_text(json.dumps(dead))
    (states / "2.json").write_text(json.dumps(alive))
    base.reap_leftovers()
    assert not left.exists() and kept.is_dir() and (states / "2.json").exists()


def test_spark_scratch_goes_where_spark_would_have_put_it(tmp_path, monkeypatch):
    """Under the user's SPARK_LOCAL_DIRS (each of them), else the scenario's spark.local.dir,
    else the system's temporary directory: a fresh directory of the harness's each time,
    absolute whatever the setting."""
    one, two, conf, system = tmp_path / "one", tmp_path / "two", tmp_path / "conf", tmp_path / "system"
    for path in (one, two, conf, system):
        path.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(system))
    monkeypatch.setenv("SPARK_LOCAL_DIRS", f"{one},{two}")
    made = make_local_dirs(str(conf))
    assert [path.parent for path in made] == [one, two]
    assert all(path.name.startswith("harness-spark-") for path in made)
    monkeypatch.delenv("SPARK_LOCAL_DIRS")
    assert make_local_dirs(str(conf))[0].parent == conf
    first, second = make_local_dirs()[0], make_local_dirs()[0]
    assert first != second and first.parent == system == second.parent
    monkeypatch.chdir(tmp_path)
    assert make_local_dirs("relative")[0].parent == tmp_path / "relative"


def test_spark_s_processes_and_their_jvms_are_pointed_at_it(tmp_path, monkeypatch):
    """SPARK_LOCAL_DIRS for Spark, java.io.tmpdir for every JVM under it (the native libraries
    each unpacks), after the user's own JAVA_TOOL_OPTIONS."""
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xss2m")
    env = scratch_env([tmp_path / "a", tmp_path / "b"])
    assert env == {"SPARK_LOCAL_DIRS": f"{tmp_path / 'a'},{tmp_path / 'b'}",
                   "JAVA_TOOL_OPTIONS": f"-Xss2m -Djava.io.tmpdir={tmp_path / 'a'}"}
    assert scratch_env([]) == {}


def test_a_local_dir_that_cannot_be_made_is_named_with_the_fix(tmp_path, monkeypatch):
    from harness.errors import ServiceError

    (tmp_path / "file").write_text("")
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path / "file" / "spark"))
    with pytest.raises(ServiceError, match="cannot be made under .*file/spark") as e:
        make_local_dirs()
    assert "SPARK_LOCAL_DIRS" in str(e.value.fix)
    monkeypatch.setenv("SPARK_LOCAL_DIRS", f"{tmp_path / 'new' / 'deep'},{tmp_path / 'file' / 'x'}")
    with pytest.raises(ServiceError):   # the second fails: the first's directory is not left
        make_local_dirs()
    assert not list((tmp_path / "new" / "deep").iterdir())
    monkeypatch.delenv("SPARK_LOCAL_DIRS")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "x,y"))   # a TMPDIR Spark would split
    with pytest.raises(ServiceError, match="a comma"):
        make_local_dirs()
    assert not list((tmp_path / "x,y").iterdir())


def test_the_state_directory_is_harness_state_dir_when_set(tmp_path, monkeypatch):
    """HARNESS_STATE_DIR names where services' pid files go; under tox's pytest-xdist workers
    each worker has its own (conftest.py), so one worker's run reaps no other worker's leftovers."""
    import os

    from harness.paths import cache_dir, state_dir

    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        assert state_dir().name == f"xdist-{worker}", state_dir()
    monkeypatch.setenv("HARNESS_STATE_DIR", str(tmp_path / "mine"))
    assert state_dir() == (tmp_path / "mine").resolve() and (tmp_path / "mine").is_dir()
    monkeypatch.delenv("HARNESS_STATE_DIR")
    assert state_dir() == (cache_dir() / "state").resolve()
    # a worker's under a HARNESS_STATE_DIR of the user's
    monkeypatch.setenv("HARNESS_STATE_DIR", str(tmp_path / "users"))
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw7")
    from conftest import pytest_configure

    pytest_configure(None)
    assert state_dir() == (tmp_path / "users" / "xdist-gw7").resolve()


def test_a_driver_keeps_and_removes_only_its_own_executors_directories(tmp_path, monkeypatch):
    """Two local-cluster drivers started in the same second share `work/app-<second>-0000/`
    (each one's master numbers its applications from 0): a driver's end takes the logs of the
    executors it ran, by their ids, deletes their directories, and leaves the other's; the
    application's directory goes with the last."""
    from types import SimpleNamespace

    from harness.services import spark

    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "home"))
    app = "app-20261129033812-0000"
    work = tmp_path / "home" / "work" / app
    for executor in ("0", "1", "2", "3"):
        (work / executor).mkdir(parents=True)
        (work / executor / "stderr").write_text(f"executor {executor}\n")
        (work / executor / "spark.jar").write_bytes(b"jar")

    def driver(case: str, ids: set[str]):
        one = object.__new__(spark.SparkDriver)
        one.config = SimpleNamespace(master="local-cluster[2,1,1024]")
        one.workdir, one.seen_executor_ids = tmp_path / case, ids
        one.app_id = lambda: app
        return one

    driver("first", {"0", "1"}).keep_executor_logs()
    assert sorted(p.name for p in work.iterdir()) == ["2", "3"]   # the other's, untouched
    kept = tmp_path / "first" / "executor-logs" / app
    assert sorted(p.name for p in kept.iterdir()) == ["0", "1"] and not list(kept.rglob("*.jar"))
    assert (kept / "1" / "stderr").read_text() == "executor 1\n"
    driver("second", {"2", "3"}).keep_executor_logs()
    assert not work.exists()
