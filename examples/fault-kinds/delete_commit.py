"""A fault kind of a user's own (docs/faults.md, "A fault kind of your own"): kill the driver,
delete the newest commits/N of the query's checkpoint while it is down, and start a new driver
after `downtime`. When N was the newest batch planned, Spark runs it again: a sink that is not
idempotent writes it twice (when offsets/N+1 was already logged, Spark runs N+1 and only warns).

A scenario registers it with one line, `fault_kinds = ["delete_commit:DELETE_LAST_COMMIT"]`,
and uses it as any kind: `[[faults]] kind = "delete-last-commit"`.
"""

from __future__ import annotations

from faults.base import Observation
from faults.driver import DriverRestart
from faults.kinds import DOWNTIME, FaultKind


class DeleteLastCommit(DriverRestart):
    """The kill, the restart and the observation of the new driver are DriverRestart's."""

    deleted: str | None = None

    def _inject(self) -> None:
        self._kill()   # records what the checkpoint holds, then SIGKILL
        driver = self.driver
        self.targets.wait(lambda: not driver.running, "signal", f"driver (pid {driver.pid}) was still running")
        commits = sorted((p for p in (self.checkpoint / "commits").iterdir() if p.name.isdigit()),
                         key=lambda p: int(p.name))
        if not commits:
            raise FileNotFoundError(f"{self.checkpoint} has no commits/N yet")
        newest = commits[-1]
        newest.unlink()
        newest.with_name(f".{newest.name}.crc").unlink(missing_ok=True)   # Hadoop's checksum beside it
        self.deleted = f"commits/{newest.name}"

    def observe(self) -> Observation:
        seen = super().observe()
        seen.detail = f"{self.deleted} deleted while the driver was down; {seen.detail}"
        return seen


DELETE_LAST_COMMIT = FaultKind(
    "delete-last-commit", DeleteLastCommit,
    about="kill the driver, delete the newest commits/N of its checkpoint, and start a new driver after "
          "`downtime`; Spark must run batch N again",
    models="an operator's clean-up that removed the last commit",
    keys=(DOWNTIME,), targets=("driver",), default_target="driver", restarts=True, kills_driver=True,
    recovery_keys=("downtime_s", "first_batch_after_s", "batches_reexecuted", "events_reread"))
