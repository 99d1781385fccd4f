"""lose-unsynced: a process crashes, and what it wrote to the checkpoint without making it
durable is lost with it, as a machine losing its power loses its page cache (Jepsen's LazyFS).

The case's FUSE file system (workloads/faultfs.py, mounted with --track-unsynced) keeps, for
every file written since it was last durable, what it held then, and which processes wrote it.
A write is durable once its file is fsynced, or once the kernel would have written it back:
`writeback` after the file was first dirtied (Linux's vm.dirty_expire_centisecs, 30 s). The
fault SIGKILLs the target (`driver`: the driver's own processes, and local-cluster's executors
die with it; `executor:N`: that executor), then asks the file system to drop those writes
(`mode = "drop"`: each file back to its durable content, a new file empty: metadata is taken as
journaled) or tear them (`"torn"`: the first half of each file's unsynced bytes survive, cut at
a page). Spark's checkpoint and state store files are written through Hadoop's local file
system, which does not fsync: what the last `writeback` seconds wrote is at risk.

A driver target is then started again on the same checkpoint (as kill-driver does); an executor
is replaced by local-cluster, and a query that fails on the lost files gets a new driver, as a
job's retry would. What Spark does (it runs on, re-runs batches, refuses the checkpoint) is the
outcome; the checker says whether the guarantee held.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from faults import fs
from faults.base import Details, Fault, Missed, Observation
from faults.driver import DriverRestart
from faults.kinds import DOWNTIME, TARGET, FaultKind, Key, Preparation
from faults.process import choose_executor
from faults.storage import RetriedQuery
from faults.targets import RefusedTarget

MODES = ("drop", "torn")
WRITEBACK = "30s"   # Linux's vm.dirty_expire_centisecs
WRITEBACK_MS = 30_000


@dataclass
class LostWrites(Details):
    """What the crash took: each file whose unsynced writes were dropped or torn, with its bytes
    before and after, and the count by directory of the checkpoint (offsets, commits, state)."""

    mode: str = ""
    # the case's checkpoint makes every write durable as it returns (checkpoint_fs = "sync"):
    # nothing can be lost, and the crash alone is the fault
    durable_storage: bool = False
    files: list = field(default_factory=list)
    by_dir: dict = field(default_factory=dict)
    bytes_lost: int = 0
    query_failed: str = ""

    def changed_file(self) -> str | None:
        """The checkpoint file the crash changed that a restart reads first (the findings name
        it): the newest offsets file, else the first file."""
        newest = self._newest_offsets()
        if newest is not None:
            return newest["path"].lstrip("/")
        return self.files[0]["path"].lstrip("/") if self.files else None

    def _newest_offsets(self) -> dict | None:
        logs = [f for f in self.files if f["path"].lstrip("/").startswith("offsets/")
                and f["path"].rsplit("/", 1)[-1].isdigit()]
        return max(logs, key=lambda f: int(f["path"].rsplit("/", 1)[-1])) if logs else None

    def per_dir(self) -> str:
        """"6 in commits/, 6 in offsets/": the files lost, counted by directory."""
        return ", ".join(f"{n} in {'the checkpoint' if d == '.' else d + '/'}"
                         for d, n in sorted(self.by_dir.items()))

    def told(self) -> str:
        """The clause a finding's story tells of the crash: what it took, and the file a restart
        reads first ("" when it took nothing)."""
        if not self.files:
            return ""
        verb = "dropped" if self.mode == "drop" else "tore"
        said = (f"the crash {verb} the unsynced writes of {len(self.files)} checkpoint files "
                f"({self.per_dir()}), "
                "none of which Spark had fsynced")
        newest = self._newest_offsets()
        if newest is not None:
            said += (f"; {newest['path'].lstrip('/')}, the newest offsets file, kept "
                     f"{newest['bytes_after']:,} of its {newest['bytes_before']:,} bytes")
        return said


def _lost(crashed: tuple[list[dict], bool], mode: str) -> LostWrites:
    files, durable = crashed
    # the files Spark reads first (offsets/7, state/0/1/12.changelog), their checksums after
    files = sorted(files, key=lambda f: (f["path"].rsplit("/", 1)[-1].startswith("."), f["path"]))
    dirs = Counter(f["path"].lstrip("/").split("/", 1)[0] if "/" in f["path"].lstrip("/") else "."
                   for f in files)
    return LostWrites(mode=mode, durable_storage=durable, files=files, by_dir=dict(dirs),
                      bytes_lost=sum(f["bytes_before"] - f["bytes_after"] for f in files))


def _tell(fault: Fault, lost: LostWrites) -> None:
    """Each file the crash took, as a change of the fault's record (what the findings tell)."""
    root = Path(fault.targets.checkpoint())
    action = "dropped" if lost.mode == "drop" else "torn"
    for f in lost.files:
        fault.changed_file(root / f["path"].lstrip("/"), action,
                           f"{action}: {f['bytes_after']:,} of its {f['bytes_before']:,} bytes kept")


def _said(lost: LostWrites) -> str:
    if lost.durable_storage:
        return "the checkpoint's storage made every write durable as it returned: no write was lost"
    if not lost.files:
        return "no write of the process was still unsynced"
    dirs = lost.per_dir()
    verb = "dropped" if lost.mode == "drop" else "torn"
    shown = ", ".join(f["path"].lstrip("/") for f in lost.files[:4]) + (" ..." if len(lost.files) > 4 else "")
    return f"{lost.bytes_lost:,} unsynced bytes of {len(lost.files)} file(s) {verb} ({dirs}: {shown})"


class LoseUnsynced(DriverRestart):
    """`target = "driver"`: kill the driver, drop its unsynced writes, start it again."""

    lost: LostWrites | None = None

    def _inject(self) -> None:
        driver = self.targets.driver()
        own = set(driver.pids()) - set(driver.executor_pids())
        self._kill()
        self.lost = _lost(fs.crash(self.targets, own, self.spec.mode), self.spec.mode)
        _tell(self, self.lost)

    def observe(self) -> Observation:
        seen = super().observe()
        seen.details = self.lost
        if self.lost is not None:
            said = f" crashed: {_said(self.lost)};"
            seen.detail = (seen.detail.replace(" was killed", said, 1) if " was killed" in seen.detail
                           else seen.detail.replace(" killed", said, 1)).replace(";;", ";")
            seen.landed, seen.proof = bool(self.lost.files) or self.lost.durable_storage, _said(self.lost)
        return seen


class LoseUnsyncedExecutor(RetriedQuery):
    """`target = "executor:N"`: kill the executor, drop its unsynced writes (its state store's
    files); local-cluster replaces it, and a query that fails on the loss gets a new driver."""

    lost: LostWrites | None = None
    victim_pid = 0

    def _inject(self) -> None:
        executors, chosen = choose_executor(self)
        victim = executors[chosen]
        self.victim_pid = victim.pid
        self._watch()
        victim.send_signal(signal.SIGKILL)
        self.landed_at = time.time()
        # its writes in flight end first (a process inside a FUSE call dies when the call returns)
        try:
            victim.wait(self.targets.pace.wait_s("signal"))
        except psutil.TimeoutExpired:
            raise RuntimeError(f"executor pid {victim.pid} did not exit after SIGKILL") from None
        self.lost = _lost(fs.crash(self.targets, {victim.pid}, self.spec.mode), self.spec.mode)
        _tell(self, self.lost)
        self.target = f"executor:{chosen} (pid {victim.pid})"

    def observe(self) -> Observation:
        lost = self.lost or LostWrites()
        lost.query_failed = self.died or ""
        if not lost.files and not lost.durable_storage:
            self.targets.expect_down(False)
            raise Missed(f"{self.target}: the executor had written nothing to the checkpoint that was not "
                         "durable yet (a stateful query's state store writes there)")
        seen = self._outcome(f"{self.target} crashed: {_said(lost)}", lost)
        seen.landed, seen.proof = True, _said(lost)
        return seen


class _ByTarget:
    """The injector for the target: a driver or an executor."""

    def __new__(cls, spec, targets):
        if spec.target_kind == "driver":
            return LoseUnsynced(spec, targets)
        if spec.target_kind == "executor":
            return LoseUnsyncedExecutor(spec, targets)
        raise RefusedTarget(f"lose-unsynced crashes the driver or an executor, not {spec.target}")


def _prepared(spec) -> Preparation:
    return Preparation(storage=True, writeback_s=spec.get("writeback", WRITEBACK_MS) / 1000)


LOSE_UNSYNCED_FAULT = FaultKind(
    "lose-unsynced", _ByTarget,
    about="SIGKILL the target (the driver, or `executor:N`), and lose what it wrote to the checkpoint that "
          "was not durable yet: no fsync since, and younger than `writeback` (the kernel's writeback). `mode "
          "= \"drop\"` puts each file back as it was when last durable (a new file empty); `\"torn\"` keeps "
          "the first half of its unsynced bytes. A driver is started again on the checkpoint; a query that "
          "fails on the loss gets a new driver. The files lost must be listed",
    models="a machine that loses power or its kernel under the driver or an executor: the page cache's "
           "unsynced writes are gone (Jepsen's LazyFS)",
    keys=(TARGET, Key("mode", "choice", "drop the unsynced writes, or keep a torn part of them",
                      default="drop", choices=MODES, draw="choice"),
          Key("writeback", "duration", "how long after a file is first dirtied the kernel has written it "
              "back (then it is durable)", default=WRITEBACK, gt=0),
          DOWNTIME),
    targets=("driver", "executor"), default_target="driver", nemesis_targets=("driver", "executor:random"),
    restarts=True, may_end_query=True, refusal_breaks=True, details=LostWrites, prepare=_prepared,
    drawable=False,
    why_not_drawable="on a local checkpoint Spark never fsyncs, so every crash within the writeback "
                     "window leaves files it cannot read and ends the run there (docs/faults.md, "
                     "\"lose-unsynced\"); schedule it in [[faults]], last, or hunt it by name (--kinds)",
    requires=lambda spec: ("fuse", *(("own-executors",) if spec.target_kind == "executor" else ())))
