"""The case's FUSE file system (workloads/faultfs.py), mounted for real on a scratch directory:
an operation held until the harness lets go (and failed when its caller died meanwhile), and
a crashed process's unsynced writes dropped or torn while another's stay.

No Spark: processes of this test make the calls, as Spark's would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.services.fuse_mount import FaultFS, fuse_problem

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(fuse_problem() is not None,
                                 reason=f"FUSE cannot mount here: {fuse_problem()}")]


@pytest.fixture
def mounted(tmp_path):
    def mount(writeback_s=None):
        fs = FaultFS(tmp_path / "fs", tmp_path / "backing", tmp_path / "mnt", writeback_s=writeback_s)
        fs.start().wait_ready()
        mounts.append(fs)
        return fs
    mounts: list[FaultFS] = []
    yield mount
    for fs in mounts:
        fs.stop()


def _wait_for(path: Path, request_id: int, timeout_s: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            answer = json.loads(path.read_text())
            if answer.get("id") == request_id:
                return answer
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    raise AssertionError(f"no answer in {path} for request {request_id}")


def _writer(script: str) -> subprocess.Popen:
    """Another process that writes through the mount, as an executor does."""
    return subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, text=True)


class TestHold:
    def test_the_first_matching_operation_waits_until_released(self, mounted):
        fs = mounted()
        state = fs.mountpoint / "state" / "0" / "1"
        state.mkdir(parents=True)
        (state / ".4.changelog.tmp").write_text("rows")
        (fs.control.parent / "hold.json").write_text(json.dumps(
            {"id": 1, "ops": ["rename"], "match": r"^/state/0/\d+/\d+\.changelog$", "thread": ".",
             "pids": [os.getpid()]}))
        time.sleep(0.1)   # the file system reads a request at most every 50 ms
        done = threading.Event()
        mover = threading.Thread(target=lambda: (os.rename(state / ".4.changelog.tmp", state / "4.changelog"),
                                                 done.set()))
        mover.start()
        held = _wait_for(fs.control.parent / "held.json", 1)
        assert (held["op"], held["path"], held["pid"]) == ("rename", "/state/0/1/4.changelog", os.getpid())
        time.sleep(0.3)
        assert not done.is_set() and not (fs.backing / "state/0/1/4.changelog").exists()
        (fs.control.parent / "hold.json").unlink()
        mover.join(10)
        assert done.is_set() and (fs.backing / "state/0/1/4.changelog").read_text() == "rows"

    def test_a_held_operation_of_a_killed_process_never_happens(self, mounted):
        fs = mounted()
        (fs.mountpoint / "tmp").write_text("v")
        (fs.control.parent / "hold.json").write_text(json.dumps(
            {"id": 2, "ops": ["rename"], "match": "^/done$", "thread": "."}))
        time.sleep(0.1)
        source, target = str(fs.mountpoint / "tmp"), str(fs.mountpoint / "done")
        child = _writer(f"import os; os.rename({source!r}, {target!r})")
        held = _wait_for(fs.control.parent / "held.json", 2)
        assert held["pid"] == child.pid
        child.kill()   # it cannot die inside the FUSE call: the harness aborts the call
        (fs.control.parent / "hold.json").write_text(json.dumps({"id": 2, "abort": True}))
        child.wait(10)
        assert not (fs.backing / "done").exists() and (fs.backing / "tmp").exists()


class TestFailureCounts:
    def test_a_burst_of_failures_is_all_in_the_stats_file_soon_after_it(self, mounted):
        """The stats file is written at most every 0.2 s; what a burst left unwritten is written
        0.2 s after it, not when the next failure comes (a disk-full's last ENOSPC creates once
        turned up in the next fault's record, an io-error 20 s later)."""
        fs = mounted()
        fs.control.write_text(json.dumps({"mode": "enospc"}))
        time.sleep(0.1)   # the file system reads its mode at most every 50 ms
        for i in range(12):
            with pytest.raises(OSError):
                (fs.mountpoint / f"f{i}").write_text("x")
        fs.control.write_text(json.dumps({"mode": "none"}))
        time.sleep(0.5)
        failed = json.loads(fs.stats.read_text())["failed"]
        assert failed["create:ENOSPC"]["count"] == 12, failed


class TestLeftBehind:
    def test_a_crashed_harness_s_mount_is_detached_by_the_reaper(self, mounted):
        """A harness SIGKILLed mid-run: the watchdog (or the next run) reaps the file system's
        process, and detaches its mount, which its death left dead ("Transport endpoint is not
        connected"; one was still mounted after the watchdog reaped every process)."""
        import psutil

        from harness.paths import state_dir
        from harness.services.base import reap_leftovers

        fs = mounted()
        record_path = state_dir() / f"{fs.process.pid}.json"
        record = json.loads(record_path.read_text())
        assert record["mounts"] == [str(fs.mountpoint.resolve())]
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        record.update(owner_pid=dead.pid, owner_create_time=0.0)   # its owner is gone
        record_path.write_text(json.dumps(record))
        psutil.Process(fs.process.pid).kill()   # as the watchdog would, before the mount went
        time.sleep(0.5)
        assert fs.mounted()   # dead but still there
        reap_leftovers()
        assert not fs.mounted()


class TestUnsynced:
    SCRIPT = """
import os, sys
m = sys.argv[1] if len(sys.argv) > 1 else {mnt!r}
with open(os.path.join(m, "synced"), "wb") as f:
    f.write(b"a" * 100); f.flush(); os.fsync(f.fileno())
    f.write(b"b" * 10000)
with open(os.path.join(m, ".new.tmp"), "wb") as f:
    f.write(b"n" * 9000)
os.rename(os.path.join(m, ".new.tmp"), os.path.join(m, "offsets-7"))
print("written", flush=True)
input()
"""

    def _crash(self, fs, pids, how, request_id):
        request = {"id": request_id, "pids": pids, "how": how}
        (fs.control.parent / "crash.json").write_text(json.dumps(request))
        return _wait_for(fs.control.parent / "crashed.json", request_id)["files"]

    def _run(self, fs) -> subprocess.Popen:
        child = subprocess.Popen([sys.executable, "-c", self.SCRIPT.format(mnt=str(fs.mountpoint))],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None and child.stdout.readline().strip() == "written"
        return child

    def test_drop_puts_files_back_as_they_were_when_durable(self, mounted):
        fs = mounted(writeback_s=30)
        (fs.mountpoint / "other").write_bytes(b"x" * 50)   # this process's: not the crashed one's
        child = self._run(fs)
        child.kill()
        child.wait(10)
        files = {f["path"]: f for f in self._crash(fs, [child.pid], "drop", 3)}
        assert set(files) == {"/synced", "/offsets-7"}
        assert (fs.backing / "synced").read_bytes() == b"a" * 100
        assert (fs.backing / "offsets-7").exists() and (fs.backing / "offsets-7").read_bytes() == b""
        assert files["/offsets-7"]["bytes_before"] == 9000 and files["/offsets-7"]["bytes_after"] == 0
        assert (fs.backing / "other").read_bytes() == b"x" * 50

    def test_torn_keeps_the_first_half_of_the_unsynced_bytes_by_pages(self, mounted):
        fs = mounted(writeback_s=30)
        child = self._run(fs)
        child.kill()
        child.wait(10)
        self._crash(fs, [child.pid], "torn", 4)
        # half of the 10,000 unsynced bytes, cut at the file's page: 100 durable + 3,996
        assert (fs.backing / "synced").read_bytes() == b"a" * 100 + b"b" * 3996
        assert (fs.backing / "offsets-7").read_bytes() == b"n" * 4096

    def test_what_the_kernel_wrote_back_is_not_lost(self, mounted):
        fs = mounted(writeback_s=0.5)
        child = self._run(fs)
        time.sleep(1.5)
        child.kill()
        child.wait(10)
        assert self._crash(fs, [child.pid], "drop", 5) == []
        assert (fs.backing / "offsets-7").read_bytes() == b"n" * 9000

    def test_a_storage_durable_on_write_loses_nothing_and_says_so(self, mounted):
        """checkpoint_fs = "sync" mounts with a writeback of 0: the crash of the gallery's fixed
        spark-38033 case finds no write unsynced, and its answer says the storage is durable."""
        fs = mounted(writeback_s=0)
        child = self._run(fs)
        child.kill()
        child.wait(10)
        request = {"id": 6, "pids": [child.pid], "how": "torn"}
        (fs.control.parent / "crash.json").write_text(json.dumps(request))
        answer = _wait_for(fs.control.parent / "crashed.json", 6)
        assert answer["files"] == [] and answer["writeback_s"] == 0
        assert (fs.backing / "offsets-7").read_bytes() == b"n" * 9000
