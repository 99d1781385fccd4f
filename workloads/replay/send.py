"""Send the user's records to Kafka open-loop, and write ground truth: `replay()`.

Each record goes as the user's own bytes (the JSON line as it is in the file, or a CSV or
Parquet row as one JSON object), its key the `key` column's text, its partition chosen by
the replay (workloads/replay/pace.py), and one Kafka header, `harness-id`, its row number in
the file: the payload is never touched. The generator's sender, anchors and report do the
rest, as for generated events: ground truth is each record's row (`event_id`), key, event
time, partition, offset and append time (workloads/generator/truth.py's schema).

The harness's own records (the warm-up before the run, the watermark flush after it,
`send_control`) must pass through the job's own parsing and watermark, so they are made in
the records' own format: the file's first record with its event time set, every other
number set to a negative mark of its own and every text to `__control__<mark>`, so that
they neither collide with a real record (a dedup key, a join key) nor with each other. They
also carry the header `harness-control`. Jobs see them as records; the batch oracle reads
them as the stream did.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from workloads.errors import Problem
from workloads.generator import truth
from workloads.generator.anchors import Locator, prepare
from workloads.generator.plan import Block
from workloads.generator.run import SendStats, connected_sender, send_all
from workloads.generator.stages import Drain, Feeder
from workloads.replay.pace import Paced, Pacer
from workloads.replay.records import blocks

ID_HEADER = "harness-id"
CONTROL_HEADER = "harness-control"
CONTROL_TEXT = "__control__"


def replay(spec, bootstrap_servers: str, truth_dir: Path, *, topic: str | None = None,
           start_ms: int | None = None, pace: bool = True, progress: Callable[[int, int], None] | None = None,
           keep_going: Callable[[], bool] | None = None) -> dict:
    """Send the records of `spec` (a ReplaySpec) to Kafka; write truth; return the generator's
    report. `progress(sent, planned)` and `keep_going()` as workloads.generator.generate() takes
    them: past the duration, records go on while keep_going() says so, up to the cap (and the
    file's end)."""
    from workloads.generator.run import START_LEAD_MS

    topic = topic or spec.topic
    planned = _planned(spec)
    sender = connected_sender(bootstrap_servers, topic, spec.partitions, spec.partitions, pace=pace,
                              on_tick=None if progress is None else (lambda sent: progress(sent, planned)))
    start_ms = start_ms if start_ms is not None else time.time_ns() // 1_000_000 + START_LEAD_MS
    horizon_s = getattr(spec, "cap_s", spec.duration_s) if keep_going is not None else None
    pacer = Pacer(spec, start_ms, horizon_s)
    writer = TruthWriter(truth.part_path(truth_dir, 0))
    stats = SendStats(spec, start_ms, (), pacer.horizon_s)
    locator = Locator(spec.partitions)
    texts: dict[int, list[str] | None] = {}

    def record(block, sent_us, seq, anchors, reports) -> None:
        offset, append = locator.place(block.partition, seq, reports)
        done = (block, sent_us, offset, append, anchors & (offset >= 0))
        stats.add(*done)
        writer.write(*done, keys=texts.pop(int(block.event_id[0])))

    end_us = start_ms * 1000 + spec.duration_s * 1e6
    past: set[int] = set()   # the first row of each block past the duration

    def prepared(paced: Paced):
        block = as_block(paced)
        keys = [None] * len(paced) if paced.keys is None else [k.encode() for k in paced.keys]
        item = prepare(block, keys, paced.values)
        item.headers = [[(ID_HEADER, b"%d" % r)] for r in paced.row.tolist()]
        texts[int(block.event_id[0])] = paced.keys
        if int(paced.nominal_us.max()) > end_us:
            past.add(int(block.event_id[0]))
        return item

    feeder = Feeder((prepared(p) for p in pacer.blocks(blocks(spec.source))), "replay-read")
    send_all(feeder, sender, Drain(record, "truth"), writer, stats,
             lambda block: int(block.event_id[0]) in past, keep_going)
    report = stats.report(sender, locator, (0, 1), pace, topic)
    report["replay"] = {"file": str(spec.source.path), "rows": spec.rows, "sent": report["events"]}
    if locator.failed:
        errors = (sender.errors + locator.errors)[:5]
        raise Problem(f"{locator.failed:,} records are not confirmed in Kafka: {errors}",
                      f"give the replay a topic no other producer writes to; truth marks them with offset -1 "
                      f"in {writer.path}")
    return report


def _planned(spec) -> int:
    """The records the duration holds: the file's, or as many as the rate sends in it."""
    if spec.speed is not None:
        return spec.rows
    from workloads.generator import shapes

    return min(spec.rows, shapes.expected_count(spec.shape))


def as_block(p: Paced) -> Block:
    """Paced records as the generator's Block (what its sender, anchors and report read); the
    key column's text travels beside it (its `key` is unused, 0)."""
    n = len(p)
    zeros = np.zeros(n, dtype=np.int64)
    return Block(event_id=p.row, key=zeros, event_time_ms=p.event_time_ms, intended_us=p.intended_us,
                 partition=p.partition, late_by_design=p.late, user=zeros, item=zeros, amount=zeros,
                 event_type=np.zeros(n, dtype=np.int8))


class TruthWriter:
    """Ground truth of the replayed records, in the generator's schema (truth.SCHEMA): the row
    as event_id, the key column's text as key; user, item, amount and event_type are 0."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.writer = pq.ParquetWriter(self.path, truth.SCHEMA, use_dictionary=["key", "event_type"])

    def write(self, block: Block, sent_us, offset, append_ms, reported,
              keys: list[str] | None = None) -> None:
        n = len(block)
        zeros32 = np.zeros(n, dtype=np.int32)
        columns = {
            "event_id": block.event_id, "key": pa.array(keys if keys is not None else [""] * n, pa.string()),
            "event_time_ms": block.event_time_ms, "intended_ms": block.intended_us // 1000,
            "sent_ms": sent_us // 1000, "partition": block.partition, "offset": offset,
            "append_ms": append_ms,
            "late_by_design": block.late_by_design, "user": zeros32, "item": zeros32,
            "amount": np.zeros(n, dtype=np.int64),
            "event_type": pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int8)),
                                                         pa.array(["record"], pa.string())),
            "control": np.zeros(n, dtype=bool), "reported": reported,
        }
        self.writer.write_table(pa.table(columns, schema=truth.SCHEMA))

    def close(self) -> Path:
        self.writer.close()
        return self.path


# -- the harness's own records, in the user's format ---------------------------------------------
def control_value(template: dict, event_time: str, mark: int, event_time_ms: int) -> bytes:
    """The record `template` (the file's first) made a control record: `event_time` at
    `event_time_ms` (in the template's own form: epoch ms, or ISO-8601), every other number
    `mark` (negative), every text `__control__<-mark>`, booleans and nulls as they are."""
    def remade(value):
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, int | float):
            return mark
        if isinstance(value, str):
            return f"{CONTROL_TEXT}{-mark}"
        if isinstance(value, list):
            return [remade(v) for v in value]
        if isinstance(value, dict):
            return {k: remade(v) for k, v in value.items()}
        return value

    out = {k: remade(v) for k, v in template.items()}
    out[event_time] = _time_like(template.get(event_time), event_time_ms)
    return json.dumps(out, separators=(",", ":")).encode()


def _time_like(example, ms: int):
    """`ms` in the form of `example`: epoch ms for a number, ISO-8601 (UTC, ms) for a string."""
    if isinstance(example, str):
        stamp = datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
        return stamp.replace("+00:00", "Z")
    return ms


def control_mark(first_id: int, index: int) -> int:
    """A control record's mark: negative and unique in the run (warm-up ids are negative
    already; the flush's follow the records' ids and are moved below every warm-up's)."""
    ident = first_id + index
    return ident if ident < 0 else -(1_000_000_000 + ident)


def send_control(spec, bootstrap_servers: str, topic: str, partitions: int, first_id: int,
                 event_time_ms: int) -> list[dict]:
    """One control record per partition, in the records' format (ids from `first_id` on), as
    workloads.generator.send_control sends the generator's: the rows of ground truth for them."""
    from workloads.generator.run import send_control as send

    # Spark's first batch filters late rows with watermark 0: a warm-up record at event time 0
    # would be late in it, so a replay's goes at 1 ms (the generator's events are set aside anyway)
    event_time_ms = max(event_time_ms, 1)
    template = json.loads(spec.scanned.sample[0])

    def message(p: int) -> tuple[bytes, bytes, list]:
        mark = control_mark(first_id, p)
        return (control_value(template, spec.source.event_time, mark, event_time_ms),
                f"{CONTROL_TEXT}{-mark}".encode(),
                [(ID_HEADER, b"%d" % (first_id + p)), (CONTROL_HEADER, b"1")])

    return send(bootstrap_servers, topic, partitions, first_id, event_time_ms, message)
