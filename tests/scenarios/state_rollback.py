"""state-rollback: while the driver is down, one state-store version file goes back to an older copy.

A fault kind of a user's own (docs/faults.md, "A fault kind of your own"), the planted state
loss of issue 49: it kills the driver as kill-driver does and, while it is down, puts the
newest committed version of one partition of the first stateful operator back to the previous
version's content (every store of it: a stream-stream join keeps four), with its checksum
sidecar `.<file>.crc`, so that Hadoop's local file system
reads it without complaint. The file is the one the store writes per version:

  the HDFS-backed store     `state/0/<partition>/<V>.delta` (a snapshot `<V>.snapshot`, if
                            maintenance wrote one, is deleted so that Spark rebuilds V from the deltas)
  RocksDB with changelog    `<V>.changelog` (a snapshot `<V>.zip` is deleted likewise)
  checkpointing
  RocksDB without it        `<V>.zip`, the version's snapshot (its SST files stay, shared)

Spark then loads version V as version V - 1's state (with V - 1's updates applied again, for a
delta or a changelog): every update batch V - 1 made in that partition is gone, and nothing in
Spark notices. A new driver starts after `downtime` and the query goes on from the damaged state.

With `rollback = false` it is its own correct twin: the same kill and restart, no file touched.
Its record (`RolledBack`) says what it did: the operator, partition, version and batch rolled
back, and the bytes the lost delta held, so that a test can tell a plant that did not bite.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from faults.base import Details, Observation
from faults.driver import DriverRestart
from faults.kinds import DOWNTIME, FaultKind, Key

OPERATOR = 0   # the first stateful operator (a windowed count has one)


@dataclass
class RolledBack(Details):
    """The kind's own fields in its summary.json record: what the fault put back."""

    operator: int | None = None
    partition: int | None = None
    version: int | None = None        # the store version whose file was put back (batch + 1)
    batch: int | None = None          # the committed batch whose updates were lost
    lost_bytes: int | None = None     # how large the file it replaced was
    file: str | None = None           # which: "delta", "changelog" or "zip" (RocksDB's snapshot)
    stores: int | None = None         # how many stores' files went back (a stream-stream join has four)


def committed(checkpoint: Path) -> list[int]:
    """The batches the checkpoint's commit log holds, in order."""
    return sorted(int(p.name) for p in (checkpoint / "commits").glob("*") if p.name.isdigit())


# a store's file per version, in the order looked for: the HDFS-backed store's delta, RocksDB's
# changelog (changelog checkpointing), RocksDB's snapshot (one per version without changelogs)
VERSION_FILES = (".delta", ".changelog", ".zip")
# the snapshot a version may also have, deleted so that Spark rebuilds the version from its files
SNAPSHOTS = {".delta": ".snapshot", ".changelog": ".zip"}


def rollback_target(checkpoint: Path) -> tuple[int, int, str] | None:
    """(partition, version, suffix) to put back: the newest committed version V (the last
    committed batch plus one) of the partition whose version file for V is largest, among those
    where V - 1's file exists too and batch V - 1 changed the partition's state (else putting it
    back loses nothing: the plant would not bite); None when no partition has such a version yet.
    The fault waits for one."""
    done = committed(checkpoint)
    if len(done) < 2:
        return None
    version = done[-1] + 1
    best = None
    for part in sorted((checkpoint / "state" / str(OPERATOR)).glob("[0-9]*")):
        for suffix in VERSION_FILES:
            pairs = [(d / f"{version}{suffix}", d / f"{version - 1}{suffix}") for d in stores(part)]
            pairs = [(newest, older) for newest, older in pairs if newest.exists() and older.exists()]
            if pairs:
                size = sum(newest.stat().st_size for newest, _ in pairs)
                if any(changed(n, o, suffix) for n, o in pairs) and (best is None or size > best[3]):
                    best = (int(part.name), version, suffix, size)
                break
    return None if best is None else best[:3]


def stores(part: Path) -> list[Path]:
    """Where a partition's version files are: the partition's directory (an operator with one
    store), or each store's own directory under it (a stream-stream join's four: each side's
    keyToNumValues and keyWithIndexToValue), all put back together so that the stores agree."""
    if any(part.glob("[0-9]*.*")):
        return [part]
    return sorted(d for d in part.iterdir() if d.is_dir() and any(d.glob("[0-9]*.*"))) or [part]


def changed(newest: Path, older: Path, suffix: str) -> bool:
    """Whether the version in `newest` holds another state than `older`'s: for RocksDB's snapshot
    zip, its metadata's SST files and key count differ (a batch that changed nothing writes a
    zip with the same state, bytes aside); for a delta or changelog, its bytes (a batch that
    changed nothing writes an empty one, the same bytes as another empty one)."""
    if suffix == ".zip":
        return _snapshot_state(newest) != _snapshot_state(older)
    return newest.read_bytes() != older.read_bytes()


def _snapshot_state(path: Path) -> tuple:
    """A RocksDB snapshot zip's state, from its `metadata` entry ("v1" then JSON): its SST
    files and key counts; the zip's bytes when it has no such entry."""
    import json
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            text = z.read("metadata").decode()
        meta = json.loads(text.split("\n", 1)[1] if text.startswith("v") else text)
        ssts = sorted(f.get("dfsSstFileName", "") for f in meta.get("sstFiles", []))
        return tuple(ssts), meta.get("numKeys"), meta.get("numInternalKeys")
    except (OSError, KeyError, ValueError, IndexError, zipfile.BadZipFile):
        return (path.read_bytes(),)


def _of_stores(stores: int | None) -> str:
    """"s of its 4 stores" after the file kind, for an operator with more than one store."""
    return f"s of its {stores} stores" if (stores or 1) > 1 else ""


def _crc(path: Path) -> Path:
    return path.with_name(f".{path.name}.crc")


class StateRollback(DriverRestart):
    """The kill, the new driver after `downtime` and its observation are DriverRestart's."""

    seen = RolledBack()

    def _inject(self) -> None:
        checkpoint = Path(self.targets.checkpoint())
        # the effect needs two committed versions of the state: wait for them before the kill
        self.targets.wait(lambda: rollback_target(checkpoint), "batch",
                          "the state store wrote no two versions of a partition (a delta, changelog or "
                          "snapshot file each)")
        self.kill_driver()
        if not self.spec.get("rollback", True):
            return
        found = rollback_target(checkpoint)   # again: the dead driver may have committed one more
        if found is None:
            return
        partition, version, suffix = found
        lost, put_back = 0, 0
        for where in stores(checkpoint / "state" / str(OPERATOR) / str(partition)):
            newest, older = where / f"{version}{suffix}", where / f"{version - 1}{suffix}"
            if not (newest.exists() and older.exists()):
                continue
            lost += newest.stat().st_size
            put_back += 1
            shutil.copyfile(older, newest)
            if _crc(older).exists():
                shutil.copyfile(_crc(older), _crc(newest))
            else:
                _crc(newest).unlink(missing_ok=True)
            self.changed_file(newest, "overwritten", f"with version {version - 1}'s {suffix[1:]}: batch "
                                                     f"{version - 1}'s updates of partition {partition} lost",
                              batch=version - 1)
            snapshot = where / f"{version}{SNAPSHOTS[suffix]}" if suffix in SNAPSHOTS else None
            if snapshot is not None and snapshot.exists():
                snapshot.unlink()
                _crc(snapshot).unlink(missing_ok=True)
                why = f"so that Spark rebuilds the version from its {suffix[1:]}s"
                self.changed_file(snapshot, "deleted", why, batch=version - 1)
        self.seen = RolledBack(OPERATOR, partition, version, version - 1, lost, suffix[1:], put_back)

    def observe(self) -> Observation:
        seen = super().observe()
        if not self.spec.get("rollback", True):
            seen.details = self.seen
            return seen
        seen.landed = self.seen.version is not None
        seen.proof = (f"operator {self.seen.operator}'s partition {self.seen.partition}: state version "
                      f"{self.seen.version} put back to version {(self.seen.version or 1) - 1}'s "
                      f"{self.seen.file}{_of_stores(self.seen.stores)} "
                      f"({self.seen.lost_bytes} bytes of batch {self.seen.batch}'s updates lost)"
                      if seen.landed else "no state file was put back")
        seen.detail = f"{seen.proof}; {seen.detail}"
        seen.details = self.seen
        return seen


STATE_ROLLBACK = FaultKind(
    "state-rollback", StateRollback,
    about="kill the driver, put one state-store version file back to the previous version's content "
          "(`rollback = false`: leave it), and start a new driver after `downtime`",
    models="a state store restored from an older copy, or a lost write of a state file, under a checkpoint "
           "whose logs say the newer version is there",
    keys=(Key("rollback", "boolean", "put the state file back (false: the correct twin)", default=True),
          DOWNTIME),
    targets=("driver",), default_target="driver", restarts=True, kills_driver=True, details=RolledBack,
    recovery_keys=("first_batch_after_s", "batches_reexecuted"))
