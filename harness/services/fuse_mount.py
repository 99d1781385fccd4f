"""Mounting the case's FUSE file system over its checkpoint (the file system itself is
workloads/faultfs.py), for the storage faults (faults/storage.py): `FaultFS` is the service that
mounts it before the case's first driver starts and unmounts it when its last one has stopped;
`fuse_problem` says why FUSE cannot mount here, if it cannot. Spark uses the mount; the harness
reads the directory under it."""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

from harness.services.base import Service, mounted, unmount


@functools.cache
def fuse_problem() -> str | None:
    """Why a FUSE file system cannot be mounted here, or None: what is missing, else what a
    trial mount said (a container without the right to mount, for one). Asked once a process."""
    if not Path("/dev/fuse").exists():
        return ("/dev/fuse does not exist (a container without the FUSE device: run it with "
                "--device /dev/fuse)")
    if shutil.which("fusermount3") is None:
        return "fusermount3 is not installed (Debian's fuse3: apt-get install fuse3)"
    if importlib.util.find_spec("mfusepy") is None:
        return "the Python package mfusepy is not installed (pip install mfusepy; tox installs it)"
    return _trial_mount()


def _trial_mount(timeout_s: float = 30.0) -> str | None:
    """Mount the file system on a scratch directory and unmount it: None when it worked. The
    timeout is generous: the answer is cached for the process, and a busy CI machine starting
    Python and FUSE slowly must not take disk-full and io-error away for the whole session."""
    with tempfile.TemporaryDirectory(prefix="harness-fuse-") as tmp:
        fs = FaultFS(Path(tmp) / "fs", Path(tmp) / "backing", Path(tmp) / "mnt")
        try:
            fs.start().wait_ready(timeout_s)
        except Exception as exc:  # noqa: BLE001 - the reason is the answer
            return f"a trial mount failed: {str(exc).splitlines()[0]} ({fs.log_tail(3)})"
        finally:
            fs.stop()
    return None


class FaultFS(Service):
    """`backing` seen at `mountpoint`, failing as `control` says; `stats` records the failures."""

    ready_timeout_s = 20.0

    def __init__(self, workdir: Path, backing: Path, mountpoint: Path, registry=None,
                 writeback_s: float | None = None):
        """`writeback_s`: keep track of the writes not yet durable (for lose-unsynced), taking a
        file as written back that long after it was first dirtied."""
        super().__init__("faultfs", workdir, registry)
        self.backing, self.mountpoint = backing, mountpoint
        self.control, self.stats = workdir / "control.json", workdir / "stats.json"
        self.writeback_s = writeback_s

    def prepare(self) -> None:
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        self.control.write_text('{"mode": "none"}')

    def command(self) -> list[str]:
        track = ([] if self.writeback_s is None
                 else ["--track-unsynced", "--writeback", f"{self.writeback_s:g}"])
        return [sys.executable, "-m", "workloads.faultfs", str(self.backing), str(self.mountpoint),
                str(self.control), str(self.stats), *track]

    def env(self) -> dict | None:
        root = str(Path(__file__).resolve().parents[2])
        paths = [root, os.environ.get("PYTHONPATH")]
        return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}

    def is_ready(self) -> bool:
        return self.mounted() and self.stats.exists()

    def mounted(self) -> bool:
        """Whether the kernel holds the mount, alive or not (a dead one fails every stat)."""
        return mounted(self.mountpoint)

    def stop(self, timeout_s: float | None = None) -> None:
        """Unmount (the file system's process then exits), then stop what is left."""
        self._unmount(lazy=False)
        super().stop(timeout_s)

    def mounts(self) -> list[Path]:
        return [self.mountpoint.resolve()]

    def cleanup(self) -> None:
        """A file system killed while mounted leaves its mount point dead: detach it."""
        self._unmount(lazy=True)

    def _unmount(self, lazy: bool) -> None:
        unmount(self.mountpoint, lazy)
