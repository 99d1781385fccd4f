"""Requests to the case's FUSE file system (workloads/faultfs.py) that a fault waits on: hold
the first file operation that matches (the state store faults kill an executor there), and
drop or tear the writes a crashed process had not made durable (lose-unsynced).

Each request is a file beside the file system's control file, answered by another; ids tell
one request's answer from an older one's.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from faults.targets import RefusedTarget, Targets


def _here(targets: Targets) -> Path:
    if targets.storage_control is None:
        raise RefusedTarget("the case's checkpoint is not on the harness's FUSE file system")
    return targets.storage_control.parent


def write(path: Path, value: dict) -> None:
    """A request or control file, replaced whole (the file system reads it while it changes)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value))
    tmp.replace(path)


def _answer(path: Path, request_id: int) -> dict | None:
    try:
        answer = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return answer if answer.get("id") == request_id else None


def hold(targets: Targets, *, ops: tuple[str, ...], match: str, thread: str, pids: list[int],
         wait: str, message: str) -> dict:
    """Hold the first of `ops` on a path that `match` finds, called by a thread whose name
    `thread` finds in one of `pids`, and return what was held ({"op", "path", "pid", "tid",
    "thread", "at"}): the caller stays blocked until `release`. WaitTimeout (after the pace's
    `wait`) when none came; the request is withdrawn then."""
    here = _here(targets)
    request_id = time.time_ns()
    write(here / "hold.json", {"id": request_id, "ops": list(ops), "match": match, "thread": thread,
                                "pids": pids, "timeout_s": targets.pace.wait_s("restart")})
    try:
        held = targets.wait(lambda: _answer(here / "held.json", request_id), wait, message, 0.02)
    except Exception:
        release(targets)
        raise
    assert held is not None
    return held


def release(targets: Targets, abort: bool = False) -> None:
    """Let a held operation go on, or with `abort` fail it with EIO (its caller was killed: a
    process inside a FUSE call cannot die until the call returns)."""
    if targets.storage_control is None:
        return
    request = targets.storage_control.parent / "hold.json"
    if abort:
        try:
            asked = json.loads(request.read_text())
        except (OSError, ValueError):
            return
        write(request, {**asked, "abort": True})
        time.sleep(0.1)   # the held call reads the request every 10 ms
    request.unlink(missing_ok=True)


def crash(targets: Targets, pids: set[int], how: str) -> tuple[list[dict], bool]:
    """Drop (`how` "drop") or tear ("torn") the writes of `pids` that are not durable yet, and
    return what each file lost: [{"path", "bytes_before", "bytes_after", "age_s", "writers"}],
    and whether the storage makes every write durable as it returns (nothing could be lost)."""
    here = _here(targets)
    request_id = time.time_ns()
    write(here / "crash.json", {"id": request_id, "pids": sorted(pids), "how": how})
    answer = targets.wait(lambda: _answer(here / "crashed.json", request_id), "signal",
                          "the FUSE file system did not answer the crash request (was it mounted "
                          "with --track-unsynced?)", 0.05)
    files = list((answer or {}).get("files", []))
    failed = [f for f in files if "error" in f]
    if failed:   # what it could not put back is not lost as the record would say
        raise RuntimeError(f"the FUSE file system could not drop the writes of {len(failed)} file(s): "
                           + "; ".join(f"{f['path']}: {f['error']}" for f in failed[:3]))
    return files, (answer or {}).get("writeback_s", 1) == 0

