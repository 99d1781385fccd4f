"""restore-checkpoint: an operator restores a streaming query's checkpoint from a backup.

A fault kind of a user's own that needs set-up (docs/faults.md, "A fault kind of your own").
Its set-up is a backup job: from before the case's first driver starts, it copies the query's
checkpoint to <case>/checkpoint-backup every `every`. The fault waits until the sink has
committed a batch past the newest backup (Spark writes commits/N once the sink's write of batch N
returned), kills the driver, puts the backup in the checkpoint's place and starts a new driver
after `downtime`. The batches the backup lacks are gone from the offset log: Spark plans them
again, with the same ids, over the offsets it finds then. A sink that skips a batch id it has
already committed then skips the new ranges' events. Its record says what it saw: the backup's
newest batch, the batches past it the sink had committed, and those Spark planned again over
other offsets, so that a test can tell a plant that did not bite from a wrong verdict.
"""

from __future__ import annotations

import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

from faults.base import Details, Observation
from faults.driver import DriverRestart
from faults.kinds import DOWNTIME, CaseView, FaultKind, Key, Precondition, Preparation, always
from workloads.wait import WaitTimeout

BACKUP = "checkpoint-backup"   # the newest backup, in the case's directory
_ONE_AT_A_TIME = threading.Lock()   # a backup round and a restore never overlap


def batches(checkpoint: Path, log: str = "offsets") -> set[int]:
    """The batches a checkpoint's offset log (or its commit log, `log="commits"`) holds."""
    return {int(p.name) for p in (checkpoint / log).glob("*") if p.name.isdigit()}


def planned(checkpoint: Path, batch: int) -> str:
    """What offsets/N planned: the sources' end offsets (its lines after the version and metadata);
    "" when the offset log has no batch N."""
    path = checkpoint / "offsets" / str(batch)
    return "\n".join(path.read_text().splitlines()[2:]) if path.exists() else ""


@dataclass
class Restored(Details):
    """The kind's own fields in its summary.json record: what the fault saw when it acted."""

    backup_batch: int | None = None                      # the newest batch in the backup's offset log
    committed: list[int] = field(default_factory=list)   # batches past it the sink had committed
    replanned: list[int] = field(default_factory=list)   # of those, the ones Spark planned over other offsets


def copy(source: Path, target: Path) -> None:
    """Make `target` a copy of `source`, Spark's temporary files left out; a copy that fails
    half-way leaves `target` as it was."""
    fresh = target.with_name(target.name + ".new")
    shutil.rmtree(fresh, ignore_errors=True)
    shutil.copytree(source, fresh, ignore=shutil.ignore_patterns("*.tmp"))
    shutil.rmtree(target, ignore_errors=True)
    fresh.rename(target)


def backups(every_s: float):
    """The kind's set-up: a backup job copying the case's checkpoint every `every_s` seconds,
    started before the case's first driver; the undo it returns stops the job."""

    def start(case: CaseView):
        stopping = threading.Event()

        def run() -> None:
            while not stopping.wait(every_s):
                with _ONE_AT_A_TIME:
                    try:
                        if case.checkpoint.exists():
                            copy(case.checkpoint, case.dir / BACKUP)
                    except (OSError, shutil.Error):
                        pass   # a file Spark renamed while it was copied: the next round takes it

        job = threading.Thread(target=run, name=f"backup-{case.name}", daemon=True)
        job.start()

        def stop() -> None:
            stopping.set()
            job.join()

        return stop

    return start


class RestoreCheckpoint(DriverRestart):
    """The kill, the new driver after `downtime` and its observation are DriverRestart's."""

    removed: list[int] = []
    was: dict[int, str] = {}
    seen = Restored()

    def _inject(self) -> None:
        backup = self.targets.checkpoint().parent / BACKUP
        self.targets.wait(backup.exists, "batch", f"the backup job wrote no {backup}")
        with _ONE_AT_A_TIME:   # no backup round from here until the checkpoint is restored
            checkpoint = self.targets.checkpoint()
            newest = max(batches(backup), default=-1)
            # the effect needs a batch the sink has committed (commits/N) and the backup lacks
            self.targets.wait(lambda: batches(checkpoint, "commits") - batches(backup), "batch",
                              f"the sink committed no batch past the backup's newest ({newest})")
            self.kill_driver()
            self.removed = sorted(batches(checkpoint) - batches(backup))
            self.seen = Restored(newest, sorted(batches(checkpoint, "commits") - batches(backup)))
            self.was = {batch: planned(checkpoint, batch) for batch in self.removed}
            for batch in self.removed:   # what the batch had planned, for the findings
                self.removed_batch(batch, was=self.was[batch])
            copy(backup, checkpoint)

    def observe(self) -> Observation:
        seen = super().observe()   # the new driver's first batch, or Spark's refusal
        checkpoint, first = self.targets.checkpoint(), min(self.seen.committed, default=None)
        if seen.outcome == "accepted" and first is not None:
            # the bite: a committed batch id planned again over other offsets, which the sink skips
            try:
                self.targets.wait((checkpoint / "offsets" / str(first)).exists, "batch",
                                  f"the new driver planned no batch {first}")
            except WaitTimeout:
                pass   # then none was planned again: the record says so
            self.seen.replanned = [b for b in self.seen.committed
                                   if planned(checkpoint, b) not in ("", self.was[b])]
        gone = ", ".join(str(b) for b in self.removed)
        done = ", ".join(str(b) for b in self.seen.committed)
        again = ", ".join(str(b) for b in self.seen.replanned) or "none"
        seen.landed = bool(self.removed) and bool(self.seen.committed)
        seen.proof = (f"the checkpoint was restored from a backup (newest batch {self.seen.backup_batch}) "
                      f"without batches {gone}, of which the sink had committed {done}: Spark planned "
                      f"them again, over other offsets: {again}")
        seen.detail = f"{seen.proof}; {seen.detail}"
        seen.details = self.seen
        return seen


def _same_checkpoint(ctx, case) -> str | None:
    """A restore needs a checkpoint that the new driver reads: at-most-once starts a fresh one."""
    if case.guarantee == "at-most-once":
        return (f"case {case.name} is at-most-once: its new driver starts on a fresh checkpoint, "
                "not a restored one")
    return None


RESTORE_CHECKPOINT = FaultKind(
    "restore-checkpoint", RestoreCheckpoint,
    about="kill the driver, put the newest backup of its checkpoint (which the kind's set-up takes every "
          "`every`) in its place, and start a new driver after `downtime`; Spark plans the batches the "
          "backup lacks again",
    models="an operator restoring a streaming query's checkpoint from a backup",
    keys=(Key("every", "duration", "how often the backup job copies the checkpoint", default="5s", gt=0),
          DOWNTIME),
    targets=("driver",), default_target="driver", restarts=True, kills_driver=True, details=Restored,
    prepare=lambda spec: Preparation(setup=(backups(spec.seconds("every")),)),
    preconditions=(Precondition("same-checkpoint", _same_checkpoint, per_case=True),),
    requires=always("same-checkpoint"),
    recovery_keys=("first_batch_after_s", "batches_reexecuted"))
