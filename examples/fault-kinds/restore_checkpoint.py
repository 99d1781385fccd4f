"""restore-checkpoint: an operator restores a streaming query's checkpoint from a backup.

A fault kind of a user's own that needs set-up (docs/faults.md, "A fault kind of your own").
Its set-up is a backup job: from before the case's first driver starts, it copies the query's
checkpoint to <case>/checkpoint-backup every `every`. The fault waits until the checkpoint has
run a batch past its newest backup, kills the driver, puts the backup in the checkpoint's place
and starts a new driver after `downtime`. The batches the backup lacks are gone from the offset
log: Spark plans them again, with the same ids, over the offsets it finds then. A sink that skips
a batch id it has already committed then skips the new ranges' events.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from faults.base import Observation
from faults.driver import DriverRestart
from faults.kinds import DOWNTIME, CaseView, FaultKind, Key, Precondition, Preparation, always

BACKUP = "checkpoint-backup"   # the newest backup, in the case's directory
_ONE_AT_A_TIME = threading.Lock()   # a backup round and a restore never overlap


def batches(checkpoint: Path) -> set[int]:
    """The batches a checkpoint's offset log holds."""
    return {int(p.name) for p in (checkpoint / "offsets").glob("*") if p.name.isdigit()}


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

    def _inject(self) -> None:
        backup = self.targets.checkpoint().parent / BACKUP
        self.targets.wait(backup.exists, "batch", f"the backup job wrote no {backup}")
        with _ONE_AT_A_TIME:   # no backup round from here until the checkpoint is restored
            checkpoint = self.targets.checkpoint()
            self.targets.wait(lambda: batches(checkpoint) - batches(backup), "batch",
                              "the query ran no batch past the checkpoint's newest backup")
            self.kill_driver()
            self.removed = sorted(batches(checkpoint) - batches(backup))
            for batch in self.removed:
                # what the batch had planned, for the findings: the sources' end offsets
                planned = (checkpoint / "offsets" / str(batch)).read_text().splitlines()[2:]
                self.removed_batch(batch, was="\n".join(planned))
            copy(backup, checkpoint)

    def observe(self) -> Observation:
        seen = super().observe()   # the new driver's first batch, or Spark's refusal
        gone = ", ".join(str(b) for b in self.removed)
        seen.landed = bool(self.removed)
        seen.proof = (f"the checkpoint was restored from a backup without batches {gone}: "
                      "Spark planned them again")
        seen.detail = f"{seen.proof}; {seen.detail}"
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
    targets=("driver",), default_target="driver", restarts=True, kills_driver=True,
    prepare=lambda spec: Preparation(setup=(backups(spec.seconds("every")),)),
    preconditions=(Precondition("same-checkpoint", _same_checkpoint, per_case=True),),
    requires=always("same-checkpoint"),
    recovery_keys=("first_batch_after_s", "batches_reexecuted"))
