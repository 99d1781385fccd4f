"""A service's scratch directories outside its workdir: gone once the process is, and gone
when a later run reaps what a crashed harness left (Spark's local directories filled /tmp
with one `blockmgr-*` and one `spark-*` per killed driver)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.services import base
from harness.services.base import Service
from harness.services.spark import make_local_dirs

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
    record = json.loads(next(states.glob("*.json")).read_text())
    assert record["scratch"] == [str(tmp_path / "scratch")] and (tmp_path / "scratch" / "blockmgr-1").is_dir()
    getattr(service, end)()
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
    else the system's temporary directory: a fresh directory of the harness's each time."""
    one, two, conf = tmp_path / "one", tmp_path / "two", tmp_path / "conf"
    for path in (one, two, conf):
        path.mkdir()
    monkeypatch.setenv("SPARK_LOCAL_DIRS", f"{one},{two}")
    made = make_local_dirs(str(conf))
    assert [path.parent for path in made] == [one, two]
    assert all(path.name.startswith("harness-spark-") for path in made)
    monkeypatch.delenv("SPARK_LOCAL_DIRS")
    assert make_local_dirs(str(conf))[0].parent == conf
    first, second = make_local_dirs()[0], make_local_dirs()[0]
    assert first != second and first.is_dir()
    first.rmdir(), second.rmdir()


def test_a_local_dir_that_cannot_be_made_is_named_with_the_fix(tmp_path, monkeypatch):
    from harness.errors import ServiceError

    (tmp_path / "file").write_text("")
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path / "file" / "spark"))
    with pytest.raises(ServiceError, match="cannot be made under .*file/spark") as e:
        make_local_dirs()
    assert "SPARK_LOCAL_DIRS" in str(e.value.fix)
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path / "new" / "deep"))
    assert make_local_dirs()[0].parent == tmp_path / "new" / "deep"
