"""Spark's own file sink, Parquet (exactly-once), and a reader of what it committed.

The file sink writes each batch's files, then lists them in its metadata log,
`<dir>/_spark_metadata/<batch>` (every 10th batch a `<batch>.compact` holding the whole
list so far). A reader that goes through the log sees each committed row once; the files
it does not list (a batch that was being written when the driver died, written again
after the restart) are what a naive reader listing the directory would see twice.
`read()` goes through the log; `report()` counts the files and rows outside it.

A Spark format sink, not a `foreachBatch` one: the driver hands `start()` the output and a
function that configures its DataStreamWriter. So it has no commit gate, and the faults
that hold a batch in the commit window (delay-commit, replay-batch) do not apply to it.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote, urlparse

from workloads.sinks import SinkContext

METADATA = "_spark_metadata"


class ParquetFileSink:
    """Parquet files in `<case dir>/<name>/`, committed through `_spark_metadata`."""

    streaming_format = True      # the driver starts it with start(writer), not foreachBatch

    def __init__(self, ctx: SinkContext):
        if ctx.guarantee != "exactly-once":
            raise ValueError(f"the parquet file sink is exactly-once, not {ctx.guarantee!r}")
        self.ctx = ctx
        self.path = Path(ctx.workdir) / ctx.name

    def setup(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)

    def start(self, df, configured):
        """`configured(df)`: the DataStreamWriter with the query's name, trigger and checkpoint."""
        return configured(df).format("parquet").option("path", str(self.path)).start()

    def write(self, batch_df, batch_id: int) -> None:
        raise NotImplementedError("the parquet file sink is Spark's own: the driver calls start()")

    def committed_files(self) -> dict[Path, tuple[int, int]]:
        """Each file the log lists -> (the batch whose log entry first listed it, the time
        that entry was written, in epoch ms: when a reader could first see the file)."""
        log_dir = self.path / METADATA
        entries = []
        for entry in log_dir.iterdir() if log_dir.is_dir() else []:
            name = entry.name.removesuffix(".compact")
            if name.isdigit():
                entries.append((int(name), entry))
        files: dict[Path, tuple[int, int]] = {}
        for batch, entry in sorted(entries, key=lambda e: e[0]):
            at_ms = entry.stat().st_mtime_ns // 1_000_000
            for line in entry.read_text().splitlines():
                if not line.startswith("{"):
                    continue
                item = json.loads(line)
                if item.get("action", "add") != "add" or item.get("isDir"):
                    continue
                path = Path(unquote(urlparse(item["path"]).path))
                files.setdefault(path, (batch, at_ms))
        return files

    def read(self):
        """The committed rows, with the batch that committed them and when."""
        import pandas as pd
        import pyarrow.parquet as pq

        parts = []
        for path, (batch, at_ms) in sorted(self.committed_files().items(), key=lambda f: f[1]):
            table = pq.read_table(path, columns=list(self.ctx.columns)).to_pandas()
            parts.append(table.assign(batch_id=batch, committed_ms=at_ms))
        if not parts:
            return pd.DataFrame(columns=[*self.ctx.columns, "batch_id", "committed_ms"])
        return pd.concat(parts, ignore_index=True)

    def report(self) -> dict:
        """The files on disk against those in the log: what a naive reader would see too."""
        return files_outside(self.path, set(self.committed_files()), METADATA)

    def close(self) -> None:
        pass


def files_outside(root: Path, listed: set[Path], log_dir: str) -> dict:
    """The Parquet files under `root` (but not in `log_dir`) against those a log lists:
    the ones it does not list, and their rows, are what a reader of the raw files sees too.
    A file cut short (its writer was killed) has no footer: it counts as unreadable."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    on_disk = [p for p in root.rglob("*.parquet") if log_dir not in p.parts]
    outside = [p for p in on_disk if p not in listed]
    rows = unreadable = 0
    for path in outside:
        try:
            rows += pq.ParquetFile(path).metadata.num_rows
        except (OSError, pa.ArrowInvalid):
            unreadable += 1
    return {"files_in_log": len(listed), "files_on_disk": len(on_disk), "files_outside_log": len(outside),
            "rows_outside_log": rows, "files_unreadable": unreadable}
