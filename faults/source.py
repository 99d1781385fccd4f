"""Faults on a Delta source (`[source] kind = "delta"`, workloads/delta_source.py): a commit
file missing from the log's listings for a span, and the data files of versions the query has
not read deleted (a vacuum, a retention job).

hide-commit: the table is on a FUSE file system of its own (workloads/faultfs.py) for the case;
for `duration`, every listing of `_delta_log` leaves out the newest commit file there was when
the fault came, version N (or, when the query had planned N already, the next one, from its
first listing), while the appender goes on committing N+1, N+2: a listing with a gap,
as an object store's eventually consistent listing gives (delta-io/delta PR 6314). The file is
still there for whoever opens it by name. Delta's source with `failOnDataLoss` (its default)
fails on a gap; without it, it may skip version N, and the checker counts N's rows lost. A query
that fails gets a new driver once the listings are whole again, as a job's retry would.

delete-source-files: the commit gate holds the next batch before anything runs its plan (its
offsets, and so its versions, are logged and its files not yet read); the data files of the
oldest versions it is to read are deleted until `records` records are gone; the batch goes on.
Spark fails the query on a missing file (outcome refused) unless `spark.sql.files.
ignoreMissingFiles` is set, and then the checker counts the rows as deleted_before_read.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from faults import fs
from faults.base import Details, Fault, Missed, Observation
from faults.kafka import Deleted, deletion_seen
from faults.kinds import DURATION, FaultKind, Key, Preparation
from faults.storage import RetriedQuery, recorded_failures
from faults.targets import RefusedTarget
from workloads import delta_source
from workloads.pipelines.control import PAUSE_BATCH, held_files, held_since, request, withdraw


def _table(fault: Fault) -> Path:
    table = fault.targets.source_table
    if table is None:
        raise RefusedTarget("the case's query does not read a Delta table ([source] kind = \"delta\")")
    return table


def _versions(table: Path) -> list[int]:
    log = table / delta_source.LOG
    return sorted(int(p.name[:20]) for p in log.glob("*.json") if p.name[:20].isdigit())


@dataclass
class HiddenCommit(Details):
    """The version the listings left out, how many listings did, how many of those listed a
    later version (a gap), and the newest version there was when it ended."""

    version: int = -1
    listings: int = 0
    newest_meanwhile: int = -1
    query_failed: str = ""
    gap_listings: int = 0      # of them, listings that showed a later version


class HideCommit(RetriedQuery):
    version = -1
    planned = 0
    before = before_gaps = 0
    newest = -1

    def _inject(self) -> None:
        table, control, stats = _table(self), self.targets.source_control, self.targets.source_stats
        if control is None or stats is None:
            raise RefusedTarget("the source table is not on the harness's FUSE file system")
        versions = _versions(table)
        if not versions:
            raise RefusedTarget("the source table has no commit yet")
        # the newest commit the query has not planned yet: the newest there is, or, when the
        # query has planned it already, the next one, left out of listings from its first
        self.planned = _planned_through(Path(self.targets.checkpoint()))
        self.version = max(versions[-1], self.planned + 1)
        self.before = recorded_failures(stats).get("readdir:hidden", {}).get("count", 0)
        self.before_gaps = recorded_failures(stats).get("readdir:gap", {}).get("count", 0)
        self._watch()
        name = rf"^/{delta_source.LOG}/{self.version:020d}\.json$"
        fs.write(control, {"mode": "hide", "match": name})
        self.target = (f"{delta_source.LOG}/{self.version:020d}.json of the source table "
                       f"(version {self.version}" + (", the next commit: the query had planned "
                                                     f"through {self.planned})" if self.version > versions[-1]
                                                     else ")"))

    def _heal(self) -> None:
        control = self.targets.source_control
        self.newest = _versions(_table(self))[-1]
        if control is not None:
            fs.write(control, {"mode": "none"})
        super()._heal()

    def observe(self) -> Observation:
        time.sleep(0.3)   # the file system writes its record at most every 0.2 s
        stats = self.targets.source_stats
        failed = recorded_failures(stats) if stats else {}
        listings = failed.get("readdir:hidden", {}).get("count", 0) - self.before
        gaps = failed.get("readdir:gap", {}).get("count", 0) - self.before_gaps
        details = HiddenCommit(self.version, listings, self.newest, self.died or "", gaps)
        if listings <= 0:
            self.targets.expect_down(False)
            raise Missed(f"no listing of the table's log came while version {self.version} was hidden "
                         f"({self.spec.duration_s:g} s)")
        gap = gaps > 0
        seen = (f"{listings} listing(s) of the log left out version {self.version}"
                + (f", {gaps} of them with a later version listed (up to {self.newest})" if gap else
                   ", none with a later version listed"))
        observation = self._outcome(seen, details)
        # it aims at Spark's listings of the log: landed when one left the version out; whether
        # one also showed a later version (a gap) is said, not required (Delta also notices a
        # missing newest commit it knew of: DELTA_STREAMING_TRAILING_COMMIT_MISSING, run 1f25)
        observation.landed = True
        observation.proof = (f"{listings} listing(s) of the log left out version {self.version}; "
                             + (f"{gaps} of them showed a later version" if gap else
                                "none showed a later version (no gap in what was listed)"))
        return observation


@dataclass
class DeletedFiles(Deleted):
    """The data files delete-source-files deleted, by version, and the topic's records in them
    ([{"partition", "from", "to"}], which the checker takes out of ground truth when unread)."""

    files: list = field(default_factory=list)
    versions: list = field(default_factory=list)


def _planned_through(checkpoint: Path) -> int:
    """The last version of the table the query's newest offsets file plans to read (0: none)."""
    logs = [int(p.name) for p in (checkpoint / "offsets").glob("*") if p.name.isdigit()]
    return _read_through(checkpoint, max(logs)) if logs else 0


def _hold_next(targets, control: Path) -> int:
    """Ask the gate to hold the next batch before its write; that batch's id."""
    mark = held_files(control)
    request(control, PAUSE_BATCH)
    targets.wait(lambda: held_since(control, PAUSE_BATCH, mark), "batch", "no batch reached foreachBatch")
    return held_since(control, PAUSE_BATCH, mark)[0]["batch_id"]


def _read_through(checkpoint: Path, batch: int) -> int:
    """The last version of the table batch `batch` of the checkpoint read to its end (-1: none;
    no batch before: version 0, the empty one)."""
    path = Path(checkpoint) / "offsets" / str(batch)
    if batch < 0 or not path.exists():
        return 0
    for line in path.read_text().splitlines()[2:]:
        try:
            offset = json.loads(line)
        except ValueError:
            continue
        if delta_source.is_delta_offset(offset):
            if offset.get("isInitialSnapshot", offset.get("isStartingVersion", False)):
                whole = int(offset["index"]) >= delta_source.END_INDEX
                return int(offset["reservoirVersion"]) if whole else 0
            return int(offset["reservoirVersion"]) - (1 if int(offset.get("index", -1)) < 0 else 0)
    return 0


class DeleteSourceFiles(Fault):
    deleted: DeletedFiles | None = None
    batch = -1

    def _inject(self) -> None:
        table, control = _table(self), self.targets.control_dir
        records = int(self.spec.get("records", 100))
        checkpoint = Path(self.targets.checkpoint())
        gone: list[int] = []
        deadline = time.monotonic() + self.targets.pace.wait_s("batch")
        try:
            # the held batch must read versions of the table: a batch without data (a stateful
            # query's watermark batch) plans none, and the next one is held instead
            while not gone and time.monotonic() < deadline:
                self.batch = batch = _hold_next(self.targets, control)
                done, end = _read_through(checkpoint, batch - 1), _read_through(checkpoint, batch)
                manifest = delta_source.Manifest(delta_source.manifest_path(table))
                planned = [v for v in sorted(manifest.files) if done < v <= end and manifest.files[v]]
                for v in planned:   # only what this held batch is to read
                    if sum(manifest.records[g] for g in gone) >= records:
                        break
                    (table / manifest.files[v]).unlink(missing_ok=True)
                    self.changed_file(table / manifest.files[v], "deleted",
                                      f"deleted: version {v}'s data file, {manifest.records[v]:,} records")
                    gone.append(v)
                if not gone:
                    withdraw(control, PAUSE_BATCH)   # let it go, and hold the next
                    time.sleep(0.2)
        finally:
            withdraw(control, PAUSE_BATCH)
        if not gone:
            raise Missed(f"no held batch planned a version of the table to read within "
                         f"{self.targets.pace.wait_s('batch'):g} s")
        ranges = []
        for v in gone:
            before, after = manifest.through(v - 1), manifest.through(v)
            ranges += [{"partition": p, "from": before.get(p, 0), "to": o} for p, o in sorted(after.items())
                       if o > before.get(p, 0)]
        self.deleted = DeletedFiles(deleted=ranges, files=[manifest.files[v] for v in gone], versions=gone)
        self.target = f"the source table's files of versions {gone[0]}-{gone[-1]} (batch {batch})"

    def observe(self) -> Observation:
        details = self.deleted or DeletedFiles()
        count = sum(d["to"] - d["from"] for d in details.deleted)
        versions = details.versions
        return deletion_seen(
            self.targets, self.batch, count, details,
            seen=(f"{count:,} records in {len(details.files)} file(s) of versions "
                  f"{versions[0]}-{versions[-1]} the query had not read were deleted"),
            accepted="Spark read on without them (spark.sql.files.ignoreMissingFiles)",
            proof=(f"every deleted version was in batch {self.batch}'s planned range, after what batch "
                   f"{self.batch - 1} had read, and the batch was held before it read any"))


_SOURCE_ONLY = ("it acts on a Delta source only, which a scenario chooses ([source] kind = \"delta\"); "
                "declare it in [[faults]]")


def _mounted(spec) -> Preparation:
    return Preparation(source_fs=True)


HIDE_COMMIT_FAULT = FaultKind(
    "hide-commit", HideCommit,
    about="for `duration`, every listing of the Delta source's `_delta_log` leaves out the newest commit "
          "file there was when the fault came (the next one, when the query had planned that already), while "
          "later versions are committed and listed (the file is "
          "still there by name); the listings that left it out must be counted. A query that fails on the "
          "gap gets a new driver once the listings are whole",
    models="an object store's eventually consistent listing that misses one commit (delta-io/delta PR 6314)",
    keys=(DURATION,), targets=("table",), default_target="table", restarts=True, may_end_query=True,
    source="delta", requires=lambda spec: ("fuse",), details=HiddenCommit, prepare=_mounted,
    drawable=False, why_not_drawable=_SOURCE_ONLY)

DELETE_SOURCE_FILES_FAULT = FaultKind(
    "delete-source-files", DeleteSourceFiles,
    about="delete the data files of the oldest versions of the Delta source the query has not read, until "
          "`records` records are gone (the commit gate holds the next batch meanwhile, its versions planned, "
          "its files unread); Spark fails the query (outcome `refused`) unless "
          "`spark.sql.files.ignoreMissingFiles` is set, and then the checker counts them as "
          "`deleted_before_read`",
    models="a VACUUM or a retention job deleting files a lagging stream has not read",
    keys=(Key("records", "integer", "at least how many records to delete, a version's file at a time",
              default=100, ge=1),),
    targets=("table",), default_target="table", needs_commit_gate=True, source="delta",
    recovery_keys=("records_deleted",), details=DeletedFiles, drawable=False, why_not_drawable=_SOURCE_ONLY)
