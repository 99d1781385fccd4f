"""A FUSE file system over a case's checkpoint that fails on command: the storage faults
(faults/storage.py).

    python -m workloads.faultfs BACKING MOUNTPOINT CONTROL STATS

Every operation passes through to BACKING, where the harness reads the checkpoint (it never
goes through the mount, so a fault never blinds the checker); Spark's driver and executors
use MOUNTPOINT. CONTROL is a JSON file the fault rewrites, read again when it changes:

    {"mode": "none"}                                       everything passes
    {"mode": "enospc", "match": "^/state/"}             ENOSPC on what needs space (a full disk)
    {"mode": "eio", "ops": "write", "match": "..."}     EIO on reads, writes or both

`match` is a regular expression searched in the path under the mount ("/commits/3",
"/state/0/1/2.delta"); absent, every path. STATS is a JSON file of what was failed, by
operation and error, with the first and the last path, rewritten as it changes.

The binding is mfusepy (ctypes over libfuse 3, no compiler needed): docs/faults.md gives the
overhead it was chosen by.
"""

from __future__ import annotations

import errno
import json
import os
import re
import sys
import threading
import time
from pathlib import Path

# what needs space (ENOSPC when the disk is full), and what reads or writes (EIO)
NEEDS_SPACE = frozenset({"write", "create", "mkdir", "truncate", "symlink", "link", "mknod", "fallocate"})
READS = frozenset({"read", "readdir", "readlink"})
WRITES = frozenset({"write", "create", "mkdir", "truncate", "fsync", "rename", "unlink", "rmdir", "symlink",
                    "link", "utimens", "chmod"})
CHECK_EVERY_S = 0.05


class Control:
    """The mode the harness asks for, read again (at most every 50 ms) when its file changes;
    and the failures so far, written to the stats file."""

    def __init__(self, control: Path, stats: Path):
        self.path, self.stats_path = control, stats
        self.lock = threading.Lock()
        self.mode, self.ops = "none", "both"
        self.match: re.Pattern | None = None
        self.seen_ns, self.checked = -1, 0.0
        self.failed: dict[str, dict] = {}
        self.written = 0.0

    def _reload(self) -> None:
        now = time.monotonic()
        if now - self.checked < CHECK_EVERY_S:
            return
        self.checked = now
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return
        if st.st_mtime_ns == self.seen_ns:
            return
        self.seen_ns = st.st_mtime_ns
        try:
            raw = json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return
        self.mode, self.ops = raw.get("mode", "none"), raw.get("ops", "both")
        self.match = re.compile(raw["match"]) if raw.get("match") else None

    def error(self, op: str, path: str) -> int | None:
        """The errno `op` on `path` fails with now, or None."""
        with self.lock:
            self._reload()
            if self.mode == "none" or (self.match is not None and not self.match.search(path)):
                return None
            if self.mode == "enospc":
                code = errno.ENOSPC if op in NEEDS_SPACE else None
            elif self.mode == "eio":
                wanted = (READS if self.ops == "read" else WRITES if self.ops == "write" else READS | WRITES)
                code = errno.EIO if op in wanted else None
            else:
                code = None
            if code is not None:
                self._count(op, code, path)
            return code

    def _count(self, op: str, code: int, path: str) -> None:
        key = f"{op}:{errno.errorcode[code]}"
        entry = self.failed.setdefault(key, {"count": 0, "first_path": path, "first_at": time.time()})
        entry["count"] += 1
        entry["last_path"], entry["last_at"] = path, time.time()
        if time.monotonic() - self.written > 0.2:
            self.flush()

    def flush(self) -> None:
        self.written = time.monotonic()
        tmp = self.stats_path.with_name(self.stats_path.name + ".tmp")
        tmp.write_text(json.dumps({"mode": self.mode, "failed": self.failed}))
        tmp.replace(self.stats_path)


def operations(backing: Path, control: Control):
    """The passthrough, each operation asking `control` first."""
    import mfusepy as fuse

    def check(op: str, path: str) -> None:
        code = control.error(op, path)
        if code is not None:
            raise fuse.FuseOSError(code)

    def real(path: str) -> str:
        return str(backing) + path

    def oserror(fn):
        def wrapped(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except OSError as exc:
                if isinstance(exc, fuse.FuseOSError):
                    raise
                raise fuse.FuseOSError(exc.errno or errno.EIO) from None
        return wrapped

    class Passthrough(fuse.Operations):
        use_ns = True

        @oserror
        def access(self, path, amode):
            if not os.access(real(path), amode):
                raise fuse.FuseOSError(errno.EACCES)
            return 0

        @oserror
        def getattr(self, path, fh=None):
            st = os.lstat(real(path))
            return {k: getattr(st, k) for k in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size",
                                                "st_atime_ns", "st_mtime_ns", "st_ctime_ns")}

        @oserror
        def readdir(self, path, fh):
            check("readdir", path)
            return [".", "..", *os.listdir(real(path))]

        @oserror
        def readlink(self, path):
            check("readlink", path)
            return os.readlink(real(path))

        @oserror
        def statfs(self, path):
            sv = os.statvfs(real(path))
            return {k: getattr(sv, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
                                                "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}

        @oserror
        def open(self, path, flags):
            if flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC):
                check("truncate" if flags & os.O_TRUNC else "write", path)
            return os.open(real(path), flags)

        @oserror
        def create(self, path, mode, fi=None):
            check("create", path)
            return os.open(real(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)

        @oserror
        def read(self, path, size, offset, fh):
            check("read", path)
            return os.pread(fh, size, offset)

        @oserror
        def write(self, path, data, offset, fh):
            check("write", path)
            return os.pwrite(fh, data, offset)

        @oserror
        def truncate(self, path, length, fh=None):
            check("truncate", path)
            if fh is not None:
                os.ftruncate(fh, length)
            else:
                os.truncate(real(path), length)
            return 0

        @oserror
        def flush(self, path, fh):
            return 0

        @oserror
        def fsync(self, path, datasync, fh):
            check("fsync", path)
            (os.fdatasync if datasync else os.fsync)(fh)
            return 0

        @oserror
        def release(self, path, fh):
            os.close(fh)
            return 0

        @oserror
        def unlink(self, path):
            check("unlink", path)
            os.unlink(real(path))
            return 0

        @oserror
        def rename(self, old, new):
            check("rename", new)
            os.rename(real(old), real(new))
            return 0

        @oserror
        def mkdir(self, path, mode):
            check("mkdir", path)
            os.mkdir(real(path), mode)
            return 0

        @oserror
        def rmdir(self, path):
            check("rmdir", path)
            os.rmdir(real(path))
            return 0

        @oserror
        def chmod(self, path, mode):
            check("chmod", path)
            os.chmod(real(path), mode)
            return 0

        @oserror
        def chown(self, path, uid, gid):
            os.chown(real(path), uid, gid)
            return 0

        @oserror
        def utimens(self, path, times=None):
            check("utimens", path)
            os.utime(real(path), ns=times)
            return 0

        @oserror
        def symlink(self, target, source):
            check("symlink", target)
            os.symlink(source, real(target))
            return 0

        @oserror
        def link(self, target, source):
            check("link", target)
            os.link(real(source), real(target))
            return 0

    return Passthrough()


def main(argv: list[str]) -> int:
    import mfusepy as fuse

    backing, mountpoint, control_path, stats = (Path(a) for a in argv[1:5])
    backing.mkdir(parents=True, exist_ok=True)
    mountpoint.mkdir(parents=True, exist_ok=True)
    control = Control(control_path, stats)
    control.flush()
    try:
        fuse.FUSE(operations(backing.resolve(), control), str(mountpoint), foreground=True, nothreads=False)
    finally:
        control.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
