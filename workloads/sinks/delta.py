"""Delta Lake, three ways, and one reader that goes through the table's log.

- `DeltaStreamSink` (sink "delta"): Delta's own streaming sink. Each batch's files and a
  `txn` action (appId = the query's id, version = the batch id) go into one commit, and a
  batch Spark runs again after a restart finds its version recorded and writes nothing:
  exactly-once.
- `DeltaBatchSink` (sink "delta_batch"): a `foreachBatch` append.
  - exactly-once: the documented idempotent write, with the options `txnAppId` (the
    table's name) and `txnVersion` (the batch id); Delta skips a version it has seen.
    Delta skips it without reading the batch, and since Spark 4.1 a stateful query whose
    foreachBatch leaves partitions unread fails (STATE_STORE_COMMIT_VALIDATION_FAILED):
    the harness found this under replay-batch. So a batch id the log already has is run to
    its end into Spark's `noop` format instead.
  - at-least-once: a plain append, so a batch run again lands twice.
  - at-most-once: a plain append; the driver restarts on a fresh checkpoint at the latest
    offsets, as for Postgres.

`read()` is what a Delta reader sees: the files the committed versions of `_delta_log`
add and do not remove, each with the version's batch id and the time its commit file was
written (when a reader could first see it). It reads the log's JSON commits with the
standard library and the files with pyarrow, so the harness needs no Spark to read it.
`report()` counts the Parquet files on disk that no commit lists: the writes of a batch
that died before its commit, which a reader of the raw files would see as well.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from workloads.sinks import SinkContext
from workloads.sinks.files import files_outside

LOG = "_delta_log"
_COMMIT = re.compile(r"^(\d{20})\.json$")
_SPARK_TYPES = {"STRING": "string", "LONG": "bigint", "INT": "int", "DOUBLE": "double", "BOOLEAN": "boolean"}


@dataclass(frozen=True)
class Commit:
    """One committed version of the table, as far as a reader of rows cares."""

    version: int
    at_ms: int                  # the commit file's modification time
    batch_id: int | None        # from its txn action, else from the harness's userMetadata
    adds: tuple[str, ...]       # data files it adds (paths as the log writes them)
    removes: tuple[str, ...]


def commits(table: Path) -> list[Commit]:
    """The table's committed versions, oldest first (the log's JSON files; a version's
    file is written whole, by rename, so a reader never sees half of one)."""
    log = Path(table) / LOG
    found = []
    for entry in log.iterdir() if log.is_dir() else []:
        match = _COMMIT.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry))
    out = []
    for version, entry in sorted(found):
        at_ms = entry.stat().st_mtime_ns // 1_000_000
        batch_id, adds, removes = None, [], []
        for line in entry.read_text().splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            if "add" in action:
                adds.append(action["add"]["path"])
            elif "remove" in action:
                removes.append(action["remove"]["path"])
            elif "txn" in action:
                batch_id = int(action["txn"]["version"])
            elif "commitInfo" in action and batch_id is None:
                batch_id = _metadata_batch(action["commitInfo"].get("userMetadata"))
        out.append(Commit(version, at_ms, batch_id, tuple(adds), tuple(removes)))
    return out


def txn_version(table: Path, app_id: str) -> int | None:
    """The newest `txnVersion` the log records for `app_id` (None: none), newest file first."""
    log = Path(table) / LOG
    names = [e.name for e in log.iterdir() if _COMMIT.match(e.name)] if log.is_dir() else []
    for name in sorted(names, reverse=True):
        for line in (log / name).read_text().splitlines():
            if '"txn"' in line:
                txn = json.loads(line).get("txn") or {}
                if txn.get("appId") == app_id:
                    return int(txn["version"])
    return None


def _metadata_batch(text: str | None) -> int | None:
    try:
        value = json.loads(text or "")
    except ValueError:
        return None
    return int(value["batch_id"]) if isinstance(value, dict) and "batch_id" in value else None


def _file(table: Path, path: str) -> Path:
    """A path of the log (relative and URL-encoded, or an absolute URI) as a local file."""
    parsed = urlparse(path)
    if parsed.scheme:
        return Path(unquote(parsed.path))
    return Path(table) / unquote(path)


class _DeltaTable:
    """The part both sinks share: the table's place, creation, reader and report."""

    def __init__(self, ctx: SinkContext):
        self.ctx = ctx
        self.path = Path(ctx.workdir) / ctx.name

    def setup(self) -> None:
        """Create the empty table with the output's columns (in the driver, which has a
        session), so that a reader finds a table before the first batch commits."""
        from delta.tables import DeltaTable
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is None:
            raise RuntimeError("a Delta sink's setup() runs in the driver, with a Spark session")
        builder = DeltaTable.createIfNotExists(spark).location(str(self.path))
        for name, kind in self.ctx.columns.items():
            builder = builder.addColumn(name, _SPARK_TYPES[kind.upper()])
        builder.execute()

    def live_files(self) -> dict[Path, Commit]:
        """Each data file the committed versions add and do not remove -> the commit adding it."""
        live: dict[Path, Commit] = {}
        for commit in commits(self.path):
            for path in commit.removes:
                live.pop(_file(self.path, path), None)
            for path in commit.adds:
                live[_file(self.path, path)] = commit
        return live

    def read(self):
        """The rows of the table's committed versions, with each version's batch id and time."""
        import pandas as pd
        import pyarrow.parquet as pq

        parts = []
        for path, commit in sorted(self.live_files().items(), key=lambda f: f[1].version):
            table = pq.read_table(path, columns=list(self.ctx.columns)).to_pandas()
            batch = -1 if commit.batch_id is None else commit.batch_id
            parts.append(table.assign(batch_id=batch, committed_ms=commit.at_ms))
        if not parts:
            return pd.DataFrame(columns=[*self.ctx.columns, "batch_id", "committed_ms"])
        return pd.concat(parts, ignore_index=True)

    def report(self) -> dict:
        """The versions, and the Parquet files on disk against those the log keeps."""
        return {"versions": len(commits(self.path)),
                **files_outside(self.path, set(self.live_files()), LOG)}

    def close(self) -> None:
        pass


class DeltaStreamSink(_DeltaTable):
    """Delta's streaming sink (exactly-once): Spark's own, started with start()."""

    streaming_format = True

    def __init__(self, ctx: SinkContext):
        if ctx.guarantee != "exactly-once":
            raise ValueError(f"Delta's streaming sink is exactly-once, not {ctx.guarantee!r}")
        super().__init__(ctx)

    def start(self, df, configured):
        return configured(df).format("delta").start(str(self.path))

    def write(self, batch_df, batch_id: int) -> None:
        raise NotImplementedError("Delta's streaming sink is Spark's own: the driver calls start()")


class DeltaBatchSink(_DeltaTable):
    """`foreachBatch` into Delta: idempotent (exactly-once) or a plain append."""

    guarantees = ("exactly-once", "at-least-once", "at-most-once")

    def __init__(self, ctx: SinkContext):
        if ctx.guarantee not in self.guarantees:
            raise ValueError(f"DeltaBatchSink gives one of {self.guarantees}, not {ctx.guarantee!r}")
        super().__init__(ctx)
        self.last_rows: int | None = None    # not counted: that would run the batch twice

    def write(self, batch_df, batch_id: int) -> None:
        if self.ctx.guarantee == "exactly-once":
            done = txn_version(self.path, self.ctx.name)
            if done is not None and batch_id <= done:
                # Delta would skip it unread, and Spark would fail the query (see the module's doc)
                batch_df.write.format("noop").mode("overwrite").save()
                return
        writer = (batch_df.write.format("delta").mode("append")
                  .option("userMetadata", json.dumps({"batch_id": batch_id})))
        if self.ctx.guarantee == "exactly-once":
            # Delta's idempotent write: a (txnAppId, txnVersion) already committed is skipped
            writer = writer.option("txnAppId", self.ctx.name).option("txnVersion", batch_id)
        writer.save(str(self.path))

    __call__ = write
