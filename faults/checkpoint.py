"""corrupt-checkpoint: kill the driver, change a file of the query's checkpoint, and start a
new driver after `downtime`. What Spark does next is the finding: it refuses to start the
query (the outcome "refused", with its own sentence), or it runs, and the verdict says what
was lost or duplicated (a deleted `metadata` gives the query a new id: a sink that
de-duplicates by query id then writes again)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from faults.base import Details, Observation
from faults.driver import KillDriver
from faults.kinds import DOWNTIME, BatchView, FaultKind, Key, RecordView
from workloads.pipelines.control import AFTER_COMMIT, AFTER_WRITE, BEFORE_WRITE

FILES = ("metadata", "offsets", "commits", "sources", "state")
ACTIONS = ("delete", "truncate", "empty", "garbage")
# each action as the fault's record of what it changed says it (faults/base.py Change)
DONE = {"delete": "deleted", "truncate": "truncated", "empty": "emptied", "garbage": "overwritten"}


def newest(checkpoint: Path, kind: str) -> Path | None:
    """The newest file of `kind`: metadata; offsets/N and commits/N of the highest N; the
    newest file of sources/0/; for state, the newest state-store file of the first stateful
    operator (state/0/<partition>/...), checksum files left out."""
    checkpoint = Path(checkpoint)
    if kind == "metadata":
        path = checkpoint / "metadata"
        return path if path.exists() else None
    if kind in ("offsets", "commits"):
        numbered = [p for p in (checkpoint / kind).glob("*") if p.name.isdigit()]
        return max(numbered, key=lambda p: int(p.name), default=None)
    root = checkpoint / ("sources/0" if kind == "sources" else "state/0")
    files = [p for p in root.rglob("*")
             if p.is_file() and not p.name.endswith(".crc") and not p.name.startswith(".")]
    return max(files, key=lambda p: (p.stat().st_mtime, p.name), default=None)


def corrupt(path: Path, action: str, rng) -> str:
    """Do `action` to `path`; a sentence saying what was done."""
    size = path.stat().st_size
    if action == "delete":
        # a lost file is lost whole: its checksum sidecar (.N.crc, Hadoop's local file system)
        # goes with it, or Spark's rename onto the name fails as if another query held it
        path.unlink()
        path.with_name(f".{path.name}.crc").unlink(missing_ok=True)
        return f"deleted ({size} bytes)"
    if action == "truncate":
        path.write_bytes(path.read_bytes()[:size // 2])
        return f"truncated from {size} to {size // 2} bytes"
    if action == "empty":
        path.write_bytes(b"")
        return f"emptied ({size} bytes to 0)"
    path.write_bytes(bytes(rng.randrange(256) for _ in range(max(size, 64))))
    return f"overwritten with {max(size, 64)} random bytes from the seed"


@dataclass
class CheckpointChange(Details):
    """The file the fault changed, as the case's directory names it ("checkpoint/commits/7")."""

    checkpoint_file: str = ""

    def changed_file(self) -> str | None:
        return self.checkpoint_file or None


class CorruptCheckpoint(KillDriver):
    """The kill is kill-driver's (at a `point` of the next batch with rows, or wherever the
    driver is); then the file is changed, and heal starts a new driver."""

    changed: Path | None = None
    how = ""

    def _inject(self) -> None:
        super()._inject()
        driver = self.driver
        # nothing may write the checkpoint any more: a file changed under a live driver is no test
        self.targets.wait(lambda: not driver.running, "signal",
                          f"driver (pid {driver.pid}) was still running")
        kind, action = self.spec.get("file"), self.spec.get("action")
        path = newest(self.checkpoint, kind)
        if path is None:
            raise FileNotFoundError(f"the checkpoint {self.checkpoint} has no {kind} file yet")
        self.changed = path.relative_to(self.checkpoint.parent)
        self.how = corrupt(path, action, self.targets.rng(self.spec.salt()))
        self.changed_file(path, DONE[action], self.how)
        self.target = f"{self.changed} of driver (pid {driver.pid})"

    def observe(self) -> Observation:
        seen = super().observe()
        change = f"{self.changed} {self.how} while the driver was down"
        seen.detail = f"{change}; {seen.detail}"
        landed, proof = self.landed if self.landed is not None else (True, "")
        seen.landed, seen.proof = landed, "; ".join(filter(None, [proof, change]))
        seen.details = CheckpointChange(str(self.changed))
        if seen.outcome == "accepted" and self.new_query and not self._fresh():
            seen.outcome_detail += " (a new query id: the checkpoint's metadata was lost)"
        return seen


def explain(fault: RecordView, batch: BatchView) -> str | None:
    """A commits/N the fault deleted after it was written (its driver killed at after-commit)."""
    path = fault.details.changed_file() or ""
    if (fault.spec.get("extra") or {}).get("action") == "delete" and path.endswith(f"/commits/{batch.local}"):
        return f"just after commits/{batch.local} was written, and the fault deleted commits/{batch.local}"
    return None


CORRUPT_CHECKPOINT_FAULT = FaultKind(
    "corrupt-checkpoint", CorruptCheckpoint,
    about="kill the driver (at `point` of the next batch with rows, as kill-driver's), change the newest "
          "`file` of the query's checkpoint (`metadata`, `offsets`, "
          "`commits`, `sources`, or the first stateful operator's newest `state` file) by `action` "
          "(`delete`, `truncate` to half, `empty`, `garbage`: random bytes from the seed), and start a new "
          "driver after `downtime`; Spark refusing to start is the outcome `refused` (a finding), running "
          "is judged by the verdict",
    models="a checkpoint damaged by a full disk, a partial upload, an operator's cleanup or a bad restore",
    keys=(Key("file", "choice", "which file of the checkpoint", default="offsets", choices=FILES,
              draw="choice"),
          Key("action", "choice", "what is done to it", default="delete", choices=ACTIONS, draw="choice"),
          DOWNTIME,
          Key("point", "choice", "where in the next batch with rows the driver is killed first (default: "
              "wherever it is)", default=None, choices=(BEFORE_WRITE, AFTER_WRITE, AFTER_COMMIT))),
    targets=("driver",), default_target="driver", restarts=True, kills_driver=True,
    details=CheckpointChange, explain=explain,
    requires=lambda spec: ("commit-gate",) if spec.get("point") else (),
    recovery_keys=("downtime_s", "first_batch_after_s", "batches_reexecuted", "events_reread"),
    # Spark's guarantees rest on the checkpoint: breaking it is a question to ask on purpose,
    # and what follows is a finding about Spark, not a schedule a hunt should report as the job's
    drawable=False,
    why_not_drawable="it damages the checkpoint Spark's guarantees rest on, so what follows says nothing "
                     "about the job's sink; declare corrupt-checkpoint faults in [[faults]]")
