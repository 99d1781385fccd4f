"""A FUSE file system over a case's checkpoint that fails on command: the storage faults
(faults/storage.py).

    python -m workloads.faultfs BACKING MOUNTPOINT CONTROL STATS

Every operation passes through to BACKING, where the harness reads the checkpoint (it never
goes through the mount, so a fault never blinds the checker); Spark's driver and executors
use MOUNTPOINT. CONTROL is a JSON file the fault rewrites, read again when it changes:

    {"mode": "none"}                                       everything passes
    {"mode": "enospc", "match": "^/state/"}             ENOSPC on what needs space (a full disk)
    {"mode": "eio", "ops": "write", "match": "..."}     EIO on reads, writes or both
    {"mode": "hide", "match": "^/_delta_log/0...7.json$"}   listings leave out what matches
                                                        (the file itself is still there)

`match` is a regular expression searched in the path under the mount ("/commits/3",
"/state/0/1/2.delta"); absent, every path. STATS is a JSON file of what was failed, by
operation and error, with the first and the last path, rewritten as it changes.

Two requests beside CONTROL, in its directory, each answered by a file the harness waits for:

    hold.json     {"id": n, "ops": ["rename"], "match": "...", "thread": "^Executor task",
                   "pids": [..] or null, "timeout_s": 120}
        the first operation that matches (its op, its path, the name of the calling thread
        and the process it belongs to) blocks until hold.json changes or goes; held.json
        says what was held: {"id", "op", "path", "pid", "tid", "thread", "at"}. The same
        request with "abort": true fails it with EIO instead: kill-executor at a phase sends
        SIGKILL to the caller, which cannot die inside a FUSE call, then aborts the call
        (faults/process.py).
    crash.json    {"id": n, "pids": [..], "how": "drop" | "torn"}
        with --track-unsynced: the writes those processes made that are not durable yet
        (no fsync since, and younger than the kernel's writeback) are dropped or torn in
        BACKING; crashed.json lists what each file lost (faults/unsynced.py).

A write is durable once its file is fsynced, or once `--writeback S` seconds passed since
the file was first dirtied (Linux writes an inode's dirty pages back when the oldest is older
than vm.dirty_expire_centisecs, 30 s by default). Metadata (create, rename, unlink, mkdir) is
taken as durable at once, as a journaling file system commits it within seconds: a file whose
data is dropped keeps its name, with the length it had when last durable (0 for a new one).

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
FLUSH_EVERY_S = 0.2   # the stats file is written at most this often, and at most this long after a failure
HOLD_TIMEOUT_S = 120.0
PAGE = 4096


def caller() -> tuple[int, int, str]:
    """The thread calling the current operation: (its process, its thread id, its name; the
    JVM names its threads, and Linux keeps 15 characters: "Executor task l")."""
    import mfusepy as fuse

    tid = fuse.fuse_get_context()[2]
    return _tgid(tid), tid, _comm(tid)


_TGIDS: dict[int, int] = {}


def _tgid(tid: int) -> int:
    known = _TGIDS.get(tid)
    if known is not None and os.path.exists(f"/proc/{known}/task/{tid}"):
        return known
    try:
        for line in Path(f"/proc/{tid}/status").read_text().splitlines():
            if line.startswith("Tgid:"):
                _TGIDS[tid] = int(line.split()[1])
                return _TGIDS[tid]
    except (OSError, ValueError):
        pass
    return tid


def _comm(tid: int) -> str:
    try:
        return Path(f"/proc/{tid}/comm").read_text().strip()
    except OSError:
        return ""


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return None


def _write_json(path: Path, value: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value))
    tmp.replace(path)


class Hold:
    """hold.json: block the first operation that matches until the request changes."""

    def __init__(self, request: Path, answer: Path):
        self.request, self.answer = request, answer
        self.lock = threading.Lock()
        self.taken: set = set()        # the ids of requests a held operation answered
        self.checked, self.seen_ns = 0.0, -1
        self.current: dict | None = None

    def _load(self) -> dict | None:
        now = time.monotonic()
        if now - self.checked >= CHECK_EVERY_S:
            self.checked = now
            try:
                ns = os.stat(self.request).st_mtime_ns
            except FileNotFoundError:
                self.seen_ns, self.current = -1, None
                return None
            if ns != self.seen_ns:
                self.seen_ns, self.current = ns, _read_json(self.request)
        return self.current

    def gate(self, op: str, path: str) -> None:
        with self.lock:
            asked = self._load()
            if not asked or asked.get("id") in self.taken or op not in asked.get("ops", ()):
                return
            if asked.get("match") and not re.search(asked["match"], path):
                return
            pid, tid, thread = caller()
            if asked.get("thread") and not re.search(asked["thread"], thread):
                return
            if asked.get("pids") and pid not in asked["pids"]:
                return
            self.taken.add(asked["id"])
            _write_json(self.answer, {"id": asked["id"], "op": op, "path": path, "pid": pid, "tid": tid,
                                      "thread": thread, "at": time.time()})
        deadline = time.monotonic() + float(asked.get("timeout_s", HOLD_TIMEOUT_S))
        abort = False
        while time.monotonic() < deadline:   # the caller blocks here until the harness lets go
            now = _read_json(self.request) if self.request.exists() else None
            if not now or now.get("id") != asked["id"]:
                break
            if now.get("abort"):
                abort = True
                break
            time.sleep(0.01)
        if abort or not Path(f"/proc/{pid}").exists() or _zombie(pid):
            # the harness killed the caller while it waited (a process in a FUSE call cannot die
            # until the call returns): what it asked for never happens
            raise OSError(errno.EIO, f"the process {pid} was killed during {op} {path}")


class Unsynced:
    """--track-unsynced: per file in BACKING, what it held when last durable, and who wrote it
    since; crash.json drops or tears the writes of the processes it names."""

    def __init__(self, backing: Path, request: Path, answer: Path, writeback_s: float):
        self.backing, self.request, self.answer = backing, request, answer
        self.writeback_s = writeback_s
        self.lock = threading.Lock()
        # path under the mount -> {"durable": bytes | None (a new file), "writers": {pid},
        #                          "since": monotonic time it was first dirtied}
        self.dirty: dict[str, dict] = {}
        self.done: set = set()

    def dirtied(self, path: str, new: bool = False) -> None:
        """A write, a truncate or a create of `path` is about to happen (a writeback of 0: a
        storage that makes every write durable as it returns, so nothing is kept)."""
        if self.writeback_s <= 0:
            return
        pid = caller()[0]
        with self.lock:
            entry = self.dirty.get(path)
            if entry is None:
                durable = None
                if not new:
                    try:
                        durable = Path(str(self.backing) + path).read_bytes()
                    except OSError:
                        durable = None
                entry = self.dirty[path] = {"durable": durable, "writers": set(), "since": time.monotonic()}
            entry["writers"].add(pid)

    def synced(self, path: str) -> None:
        with self.lock:
            self.dirty.pop(path, None)

    def renamed(self, old: str, new: str) -> None:
        with self.lock:
            entry = self.dirty.pop(old, None)
            if entry is not None:
                self.dirty[new] = entry
            else:
                self.dirty.pop(new, None)

    def removed(self, path: str) -> None:
        with self.lock:
            self.dirty.pop(path, None)

    def tick(self) -> None:
        """Writeback, then a crash request if one came."""
        now = time.monotonic()
        with self.lock:
            for path in [p for p, e in self.dirty.items() if now - e["since"] >= self.writeback_s]:
                del self.dirty[path]
        asked = _read_json(self.request) if self.request.exists() else None
        if asked and asked.get("id") not in self.done:
            self.done.add(asked.get("id"))
            files = self.crash(set(asked.get("pids", ())), asked.get("how", "drop"))
            _write_json(self.answer, {"id": asked.get("id"), "at": time.time(), "files": files,
                                      "writeback_s": self.writeback_s})

    def crash(self, pids: set, how: str) -> list[dict]:
        """Drop (or tear) the not yet durable writes of `pids`, file by file."""
        out = []
        with self.lock:
            now = time.monotonic()
            for path, entry in sorted(self.dirty.items()):
                if not entry["writers"] & pids:
                    continue
                real = Path(str(self.backing) + path)
                try:
                    out.append(self._lose(path, real, entry, how, now))
                except OSError as exc:   # one file's error does not lose the others' answer
                    out.append({"path": path, "error": f"{type(exc).__name__}: {exc}"})
                del self.dirty[path]
        return out

    @staticmethod
    def _lose(path: str, real: Path, entry: dict, how: str, now: float) -> dict:
        """One file back to its durable content (drop), or with part of what came since (torn)."""
        current = real.read_bytes()
        durable = entry["durable"] or b""
        after = durable
        if how == "torn" and len(current) > len(durable):
            # the first half of what came since survives; when that is a page or more, cut at a
            # page of the file (a page cache writes back whole pages), never below the durable
            half = (len(current) - len(durable)) // 2
            cut = len(durable) + half
            if half >= PAGE:
                cut = max(cut - cut % PAGE, len(durable))
            after = durable + current[len(durable):cut]
        with open(real, "r+b") as f:
            f.write(after)
            f.truncate(len(after))
        return {"path": path, "bytes_before": len(current), "bytes_after": len(after),
                "age_s": round(now - entry["since"], 3), "writers": sorted(entry["writers"])}


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
        self.dirty = False   # counts not in the stats file yet (`settle` writes them)

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

    def hidden(self, path: str) -> bool:
        """Whether a listing leaves `path` out now (mode hide); counted when it does."""
        with self.lock:
            self._reload()
            if self.mode != "hide" or self.match is None or not self.match.search(path):
                return False
            self._count("readdir", 0, path)
            return True

    def gap(self, path: str) -> None:
        """A listing that left `path` out showed a later name."""
        with self.lock:
            self._count("readdir", -1, path)

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
        key = f"{op}:{errno.errorcode[code]}" if code > 0 else f"{op}:hidden" if code == 0 else f"{op}:gap"
        entry = self.failed.setdefault(key, {"count": 0, "first_path": path, "first_at": time.time()})
        entry["count"] += 1
        entry["last_path"], entry["last_at"] = path, time.time()
        self.dirty = True
        if time.monotonic() - self.written > FLUSH_EVERY_S:
            self.flush()

    def settle(self) -> None:
        """Write the counts a burst left unwritten (at most FLUSH_EVERY_S after it, by the
        flushing thread): a count held back until the next failure came was told the next fault
        (the ENOSPC creates of a disk-full's last 0.2 s turned up 20 s later in an io-error's
        record as "13 create with ENOSPC", and the disk-full's own record said 1)."""
        with self.lock:
            if self.dirty:
                self.flush()

    def flush(self) -> None:
        self.written = time.monotonic()
        self.dirty = False
        tmp = self.stats_path.with_name(self.stats_path.name + ".tmp")
        tmp.write_text(json.dumps({"mode": self.mode, "failed": self.failed}))
        tmp.replace(self.stats_path)


def operations(backing: Path, control: Control, hold: Hold | None = None, unsynced: Unsynced | None = None):
    """The passthrough, each operation asking `control` first (and `hold`, when given)."""
    import mfusepy as fuse

    def check(op: str, path: str) -> None:
        if hold is not None:
            hold.gate(op, path)
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
            base = path.rstrip("/")
            names = os.listdir(real(path))
            hidden = [n for n in names if control.hidden(f"{base}/{n}")]
            kept = [n for n in names if n not in hidden]
            if hidden and any(n > min(hidden) for n in kept if n[:1].isdigit()):
                control.gap(f"{base}/{min(hidden)}")   # a later name listed: a gap (a Delta log's)
            return [".", "..", *kept]

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
                if unsynced is not None and flags & os.O_TRUNC:
                    unsynced.dirtied(path)
            return os.open(real(path), flags)

        @oserror
        def create(self, path, mode, fi=None):
            check("create", path)
            if unsynced is not None:
                unsynced.dirtied(path, new=not os.path.exists(real(path)))
            return os.open(real(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)

        @oserror
        def read(self, path, size, offset, fh):
            check("read", path)
            return os.pread(fh, size, offset)

        @oserror
        def write(self, path, data, offset, fh):
            check("write", path)
            if unsynced is not None:
                unsynced.dirtied(path)
            return os.pwrite(fh, data, offset)

        @oserror
        def truncate(self, path, length, fh=None):
            check("truncate", path)
            if unsynced is not None:
                unsynced.dirtied(path)
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
            if unsynced is not None:
                unsynced.synced(path)
            return 0

        @oserror
        def release(self, path, fh):
            os.close(fh)
            return 0

        @oserror
        def unlink(self, path):
            check("unlink", path)
            os.unlink(real(path))
            if unsynced is not None:
                unsynced.removed(path)
            return 0

        @oserror
        def rename(self, old, new):
            check("rename", new)
            os.rename(real(old), real(new))
            if unsynced is not None:
                unsynced.renamed(old, new)
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
    import argparse

    import mfusepy as fuse

    parser = argparse.ArgumentParser(prog="python -m workloads.faultfs")
    for name in ("backing", "mountpoint", "control", "stats"):
        parser.add_argument(name, type=Path)
    parser.add_argument("--track-unsynced", action="store_true",
                        help="keep what each file held when last durable, for crash.json")
    parser.add_argument("--writeback", type=float, default=30.0,
                        help="seconds after which a dirtied file is written back (durable); 0: "
                             "every write is durable as it returns (a sync mount)")
    args = parser.parse_args(argv[1:])
    backing, mountpoint = args.backing, args.mountpoint
    backing.mkdir(parents=True, exist_ok=True)
    mountpoint.mkdir(parents=True, exist_ok=True)
    control = Control(args.control, args.stats)
    control.flush()

    def flushing():
        while True:
            time.sleep(FLUSH_EVERY_S / 2)
            control.settle()
    threading.Thread(target=flushing, name="stats", daemon=True).start()
    here = args.control.parent
    hold = Hold(here / "hold.json", here / "held.json")
    unsynced = (Unsynced(backing.resolve(), here / "crash.json", here / "crashed.json", args.writeback)
                if args.track_unsynced else None)
    if unsynced is not None:
        def ticking():
            while True:
                time.sleep(0.2)
                try:
                    unsynced.tick()
                except Exception as exc:  # noqa: BLE001 - a bad request must not end the mount
                    print(f"faultfs: crash request failed: {exc!r}", file=sys.stderr, flush=True)
        threading.Thread(target=ticking, name="unsynced", daemon=True).start()
    try:
        fuse.FUSE(operations(backing.resolve(), control, hold, unsynced), str(mountpoint), foreground=True,
                  nothreads=False)
    finally:
        control.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
