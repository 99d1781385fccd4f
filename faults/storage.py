"""Storage faults on the case's checkpoint, through a FUSE file system the harness mounts for
the case (workloads/faultfs.py): the disk full (ENOSPC) for a span, and I/O errors (EIO) on
reads, writes or both, optionally on matching paths.

`target = "checkpoint"` is every file of the query's checkpoint (offsets, commits, metadata,
sources, state); `target = "state"` its state store's files only (checkpoint/state/...).
Spark's driver and executors write the checkpoint through the mount; the harness reads the
directory under it, so a fault never blinds the checker. The fault is observed when Spark's
file operations failed while it lasted (their count, operation and first path come from the
file system's own record). When an error makes the query fail, the harness starts a new
driver on the same checkpoint once the disk is back, as a job's retry would: what Spark does
then (it runs on, or refuses the checkpoint with its error) is the fault's outcome, and the
verdict says whether the guarantee held through it.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from faults import fs
from faults.base import Details, Fault, Missed, Observation
from faults.driver import first_batch_or_failure, sentence, with_task_failure
from faults.kinds import DURATION, TARGET, FaultKind, Key, Preparation
from faults.spec import FaultSpec
from faults.targets import RefusedTarget
from workloads.wait import WaitTimeout

OPS = Key("ops", "choice", "which operations fail: reads, writes (and creates, renames, fsyncs) or both",
          default="both", choices=("read", "write", "both"), draw="choice")
MATCH = Key("match", "text", "a regular expression: only paths under the checkpoint it is found in fail "
            "(\"^/commits/\", \"\\\\.delta$\"); absent, every path of the target", default=None,
            sample="^/commits/", cover=(None, "^/offsets/"))   # the hunt: the whole target, or one log
STATE = "^/state/"


@dataclass
class StorageDetails(Details):
    """What the file system failed while the fault lasted: count per operation:error, and the
    first path that failed."""

    failed: dict = field(default_factory=dict)
    first_path: str = ""
    query_failed: str = ""     # Spark's error when the query failed on one, else ""


def _mounted(spec: FaultSpec) -> Preparation:
    return Preparation(storage=True)


class RetriedQuery(Fault):
    """A fault whose error may end the query (a full disk, lost files): at heal, once the
    query has settled, a query that died of it gets a new driver on the same checkpoint, as a
    job's retry would, and what Spark does then is the fault's outcome."""

    died: str | None = None        # how the query ended when an error reached it
    paused = False                 # the query could run no batch when the fault came
    run_id: str | None = None

    def _watch(self) -> None:
        """Before the fault acts: the query's run, and the driver's death expected."""
        self.run_id = next((p.get("runId") for p in reversed(self.targets.progress())), None)
        self.targets.expect_down(True)
        self.paused = self.targets.query_paused()

    def _heal(self) -> None:
        self.paused = self.paused or self.targets.query_paused()
        driver = self.targets.driver_now()
        if driver is None or not self._settled(driver):
            self.targets.expect_down(False)
            return
        self.died = _root_cause(driver) or with_task_failure(
            sentence(driver.status().get("error") or driver.how_it_ended()), driver)
        self.killed_at = time.time()
        try:
            self.targets.restart_driver()
            self.restarted_at = time.time()
        except Exception as exc:  # noqa: BLE001 - Spark refusing the checkpoint is a finding
            self.refused = sentence(str(exc))
            self.targets.expect_down(False)

    def _settled(self, driver) -> bool:
        """Whether the query died of the fault: wait until its driver has exited, or has run a
        batch since the fault (a failing query may take a moment to exit)."""
        from workloads.pipelines.progress_log import end_ms

        back = time.time()

        def settled():
            if not driver.running:
                return "died"
            ran = any(p.get("runId") == self.run_id and end_ms(p) / 1000 > back
                      for p in self.targets.progress())
            return "ran" if ran else None

        try:
            return self.targets.wait(settled, "batch", "the query neither ran a batch nor failed") == "died"
        except WaitTimeout:
            return not driver.running

    def _outcome(self, seen: str, details: Details) -> Observation:
        """The observation, once the fault's own effect (`seen`) is known: the query went on, or
        died and ran again on its checkpoint, or Spark refused it."""
        if self.died is None:
            return Observation(True, f"{seen}; the query went on", details=details, outcome="accepted",
                               outcome_detail="the query went on through the errors")
        if self.refused is not None:
            return Observation(True, f"{seen}; the query failed ({self.died}), and Spark refused to run it "
                                     f"again on the checkpoint: {self.refused}", details=details,
                               outcome="refused", outcome_detail=self.refused)
        try:
            first_batch, failure = first_batch_or_failure(self.targets, self.run_id, self.restarted_at or 0,
                                                          "the new driver ran no batch")
        except WaitTimeout:
            return Observation(False, f"{seen}; the query failed ({self.died}), and the new driver ran no "
                                      "batch", details=details)
        if failure is not None:
            return Observation(True, f"{seen}; the query failed ({self.died}), and a new driver started, but "
                                     f"Spark refused to run it again: {failure}", details=details,
                               outcome="refused", outcome_detail=failure)
        facts = {"downtime_s": round((self.restarted_at or 0) - (self.killed_at or 0), 3)}
        return Observation(True, f"{seen}; the query failed ({self.died}), and a new driver ran it again on "
                                 f"the same checkpoint, first batch {first_batch[0]['batchId']}", facts,
                           details=details, outcome="accepted",
                           outcome_detail="Spark ran the query again on the checkpoint")


class StorageFault(RetriedQuery):
    """Tell the case's file system to fail, and to stop failing at heal."""

    mode = ""
    before: dict = {}

    def _paths(self) -> tuple[Path, Path]:
        control, stats = self.targets.storage_control, self.targets.storage_stats
        if control is None or stats is None:
            raise RefusedTarget("the case's checkpoint is not on the harness's FUSE file system")
        return control, stats

    def _match(self) -> str | None:
        own = self.spec.get("match")
        if self.spec.target_kind == "state":
            return STATE + (f".*{own.lstrip('^')}" if own else "")
        return own

    def _inject(self) -> None:
        control, stats = self._paths()
        self.before = recorded_failures(stats)
        # the query may fail on an error of its checkpoint: then, as a job's retry would, a new
        # driver starts on the same checkpoint once the disk is back (at heal)
        self._watch()
        asked = {"mode": self.mode, "match": self._match(), "ops": self.spec.get("ops", "both")}
        fs.write(control, asked)
        self.target = f"{self.spec.target_kind} ({self._what()})"

    def _what(self) -> str:
        raise NotImplementedError

    def land(self) -> None:
        """It took effect when the file system first failed an operation of Spark's under the
        target, and its `duration` counts from then: the disk is full (or failing) for that long
        once Spark has met it. Anchored to the query's progress, not to the injection: a 2 s full
        disk put on just after a batch's offsets met nothing on a machine whose batch took
        longer than that (a fresh clone's CI run at a load average of 11; storage_faults.toml's
        and every kind's disk-full, issue 48). It waits as long as the case's pace allows a batch;
        a query that touched nothing in that time leaves it as injected, and observe() says so."""
        _, stats = self._paths()
        try:
            self.targets.wait(lambda: self._failed_since(recorded_failures(stats)), "batch",
                              f"no file operation of Spark's under the {self.spec.target_kind} failed")
            self.landed_at = time.time()
        except WaitTimeout:
            self.landed_at = self.injected_at

    def _failed_since(self, after: dict) -> bool:
        return any(v["count"] > self.before.get(k, {}).get("count", 0) for k, v in after.items())

    def _heal(self) -> None:
        control, _ = self._paths()
        fs.write(control, {"mode": "none"})
        super()._heal()

    def observe(self) -> Observation:
        _, stats = self._paths()
        time.sleep(0.3)   # the file system writes its record at most every 0.2 s
        after = recorded_failures(stats)
        new = {k: v["count"] - self.before.get(k, {}).get("count", 0) for k, v in after.items()}
        new = {k: n for k, n in new.items() if n > 0}
        first: dict = min((v for k, v in after.items() if k in new), key=lambda v: v.get("first_at", 0),
                          default={})
        details = StorageDetails(failed=new, first_path=first.get("first_path", ""),
                                 query_failed=self.died or "")
        if not new:
            self.targets.expect_down(False)
            # nothing of Spark's reached the file system while it lasted (the query down, or no
            # operation of the kind asked): the fault did not get to act, as a fail-task on a
            # batch that never came
            down = " (the query was down or restarting)" if self.paused else ""
            raise Missed(f"no file operation of Spark's under the {self.spec.target_kind} came while it "
                         f"lasted ({self.spec.duration_s:g} s){down}")
        said = ", ".join(f"{n} {k.replace(':', ' with ')}" for k, n in sorted(new.items()))
        return self._outcome(f"{self.target} for {self.spec.duration_s:g} s: Spark's file operations failed: "
                             f"{said} (first {details.first_path})", details)


_ERRNO_TEXT = re.compile(r"Caused by: (\S+: (\S+) \((?:No space left on device|Input/output error)\))")


def _root_cause(driver) -> str | None:
    """The file error under Spark's own wrapping, from the driver's log: the first cause that
    names ENOSPC or EIO, its path made relative to the checkpoint."""
    try:
        text = Path(driver.log_path).read_text(errors="replace")
    except OSError:
        return None
    found = _ERRNO_TEXT.findall(text)   # the log holds every driver of the case: the newest death's
    if not found:
        return None
    cause, path = found[-1]
    short = path.split("/checkpoint-fs", 1)[-1] if "/checkpoint-fs" in path else path
    return cause.replace(path, short)


def recorded_failures(stats: Path) -> dict:
    """What the FUSE file system has failed so far, from its `stats` file: by "op:ERRNO" (or
    "readdir:hidden", "readdir:gap"), the count and the first and last path and time; empty while
    the file is missing or unreadable."""
    try:
        return json.loads(stats.read_text()).get("failed", {})
    except (OSError, ValueError):
        return {}


class DiskFull(StorageFault):
    mode = "enospc"   # workloads/faultfs.py's modes

    def _what(self) -> str:
        return "disk full: ENOSPC"


class IOError_(StorageFault):
    mode = "eio"

    def _what(self) -> str:
        ops = self.spec.get("ops", "both")
        match = f" on paths matching {self._match()}" if self._match() else ""
        return f"EIO on {'reads and writes' if ops == 'both' else ops + 's'}{match}"


_TARGETS = ("checkpoint", "state")

def _needs(spec) -> tuple[str, ...]:
    """FUSE; and under the state store, a query that keeps state (a stateless one writes none)."""
    return ("fuse", *(("state-store",) if spec.target_kind == "state" else ()))


DISK_FULL_FAULT = FaultKind(
    "disk-full", DiskFull,
    about="the checkpoint's disk is full for `duration`: every write, create and mkdir under the target "
          "fails with ENOSPC, then space is back; Spark's file operations must have failed while it lasted",
    models="a full volume under the checkpoint or the state store (logs, a neighbour's job, quotas)",
    keys=(TARGET, DURATION), targets=_TARGETS, default_target="checkpoint", restarts=True, may_end_query=True,
    nemesis_targets=_TARGETS, requires=_needs, details=StorageDetails, prepare=_mounted)

IO_ERROR_FAULT = FaultKind(
    "io-error", IOError_,
    about="reads, writes or both under the target fail with EIO for `duration` (on paths that `match`, when "
          "given); Spark's file operations must have failed while it lasted",
    models="a failing disk, a flaky network volume (NFS, an object store's FUSE mount)",
    keys=(TARGET, DURATION, OPS, MATCH), targets=_TARGETS, default_target="checkpoint", restarts=True,
    may_end_query=True,
    nemesis_targets=_TARGETS, requires=_needs, details=StorageDetails, prepare=_mounted)
