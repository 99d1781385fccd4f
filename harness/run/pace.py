"""The query's pace, measured while a case runs: its committed batches (from the checkpoint),
when the query became warm, and how long any wait for it should be.

Everything the harness times is anchored to the query's progress, not to constants tuned on
one machine (ducktape's wait_until with a deadline from the run, Jepsen's generator phases):

- The warm-up ends when batch times have settled (harness/metrics/warmup.py), at or after
  `[measure] warmup`; at the latest a third of the workload in, said so. The measured window starts
  there (harness/run/collect.py applies the same rule to the same batches after the run), and
  faults anchored at "warmup" or "batch N" count from it.
- A wait that decides "not observed" is a number of the query's recent batch times and of its
  driver's measured start-ups (faults/targets.py: Pace), never a fixed 10 s or 120 s.
- The workload goes on past its duration until the query has read past every fault
  (run/schedule.py): `read_past()` counts the committed batches that did.

Batches are read from the checkpoint (offsets/N's and commits/N's mtimes: a batch's start and
end), incrementally, so the pace is known with measurement off too.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from faults.spec import START, WARMUP, Anchor
from faults.targets import pace_basis, pace_wait_s
from harness.check.checkpoint import initial_offsets, journal_of, offsets_file
from harness.metrics.warmup import Done, Warm, limit_ms, warm

RECENT = 5               # batches a "batch time" is the median of
REFRESH_S = 0.25         # the checkpoint is read at most this often


@dataclass
class _Log:
    """What has been read of one checkpoint so far."""

    ends: dict[int, dict[int, int] | None] = field(default_factory=dict)   # batch -> end offsets
    planned: dict[int, float] = field(default_factory=dict)           # batch -> offsets/N mtime (ms)
    committed: dict[int, float] = field(default_factory=dict)         # batch -> commits/N mtime (ms)
    first: dict[int, int] | None = None                               # sources/0/0


class Pace:
    """A case's pace while it runs (it implements faults.targets.Pace for the injectors).

    `checkpoints()`: the case's checkpoint directories so far; the rest is set by the stages
    as the case goes: `started(s)` for each driver start-up measured, `sending(t0, end)` when
    the workload's clock starts."""

    def __init__(self, checkpoints: Callable[[], list[Path]], topic: str, warmup_s: float = 0.0,
                 workload_s: float = 0.0):
        self.checkpoints, self.topic = checkpoints, topic
        self.warmup_s, self.workload_s = warmup_s, workload_s
        self.start_ups: list[float] = []
        self.t0_ms: float | None = None
        self.send_end_ms: float | None = None
        self._logs: dict[Path, _Log] = {}
        self._read_at = 0.0
        self._done: list[Done] = []
        self._ends: list[dict[int, int]] = []   # each of _done's end offsets, in the same order
        self._warm: Warm | None = None
        self._lock = threading.Lock()

    # -- what the stages tell it ----------------------------------------------------------
    def started(self, seconds: float) -> None:
        """A driver took `seconds` from its process's start to its first committed batch."""
        self.start_ups.append(seconds)

    def sending(self, t0_ms: float, end_ms: float) -> None:
        """The workload's first event is due at `t0_ms`; its last before `end_ms`."""
        self.t0_ms, self.send_end_ms = t0_ms, end_ms

    # -- figures ----------------------------------------------------------------------------
    @property
    def start_s(self) -> float:
        """The longest start-up of the case's drivers so far (a restart's is often the longest)."""
        return max(self.start_ups, default=20.0)

    @property
    def batch_s(self) -> float:
        """A batch time now: the median of the last RECENT batches with input (before any, the
        driver's start-up, since the first batch is the slowest)."""
        done = self.done()
        if not done:
            return self.start_s
        return statistics.median(d.duration_ms for d in done[-RECENT:]) / 1000

    def wait_s(self, what: str) -> float:
        return pace_wait_s(what, self.batch_s, self.start_s)

    def basis(self, what: str) -> str:
        return pace_basis(what, self.batch_s, self.start_s)

    def done(self) -> list[Done]:
        """Every committed batch with input of the case so far, in commit order."""
        with self._lock:
            if time.monotonic() - self._read_at >= REFRESH_S:
                self._refresh()
                self._read_at = time.monotonic()
            return list(self._done)

    def read_past(self, since_s: float, mark: dict[int, int] | None) -> int:
        """How many batches with input committed after `since_s` (epoch s) read past `mark`
        (partition -> end offset): their end offsets reach it on every partition (a partition
        the batch does not name has read nothing). Without a mark, every batch planned after
        `since_s` counts (it read whatever was there when it was planned)."""
        self.done()   # read the checkpoint, at most every REFRESH_S
        with self._lock:
            pairs = list(zip(self._done, self._ends, strict=True))
        since_ms = since_s * 1000
        if mark is None:
            return sum(1 for d, _ in pairs if d.planned_ms > since_ms)
        return sum(1 for d, ends in pairs if d.committed_ms > since_ms
                   and all(ends.get(p, 0) >= offset for p, offset in mark.items()))

    # -- the warm-up and the anchors --------------------------------------------------------
    def warm(self) -> Warm | None:
        """When the warm-up ended, once it has (None before; None before sending starts)."""
        if self._warm is not None or self.t0_ms is None:
            return self._warm
        since = self.t0_ms + self.warmup_s * 1000
        found = warm(self.done(), since, limit_ms(self.t0_ms, self.warmup_s, self.workload_s),
                     time.time() * 1000)
        if found is not None:
            self._warm = found
        return found

    def reached(self, anchor: Anchor) -> float | None:
        """When (epoch seconds) the query reached `anchor`; None: not yet."""
        if self.t0_ms is None:
            return None
        if anchor.after == START:
            return self.t0_ms / 1000 + anchor.plus_s
        w = self.warm()
        if w is None:
            return None
        if anchor.after == WARMUP:
            return w.at_ms / 1000 + anchor.plus_s
        after = [d for d in self.done() if d.committed_ms > w.at_ms]
        return after[anchor.batches - 1].committed_ms / 1000 if len(after) >= anchor.batches else None

    def not_reached(self, anchor: Anchor) -> str:
        """Why `anchor` has not been reached: how far the query got."""
        w = self.warm()
        if anchor.after == START or self.t0_ms is None:
            return "the workload had not started"
        if w is None:
            done = self.done()
            return (f"the warm-up had not ended (batch times had not settled; {len(done)} batches with "
                    "input committed)")
        after = [d for d in self.done() if d.committed_ms > w.at_ms]
        at = (w.at_ms - self.t0_ms) / 1000
        return f"the warm-up ended at {at:.1f} s and {len(after)} batches with input committed after it"

    # -- reading the checkpoint ---------------------------------------------------------------
    def _refresh(self) -> None:
        done: list[tuple[Done, dict[int, int]]] = []
        for query, cp in enumerate(self.checkpoints()):
            log = self._logs.setdefault(Path(cp), _Log())
            self._read(Path(cp), log)
            done += _batches(query, log)
        done.sort(key=lambda pair: pair[0].committed_ms)
        self._done, self._ends = [d for d, _ in done], [ends for _, ends in done]

    def _read(self, cp: Path, log: _Log) -> None:
        if log.first is None and (cp / "sources" / "0" / "0").exists():
            log.first = initial_offsets(cp, self.topic)
        for root in (cp, journal_of(cp)):
            for n, path in _numbered(root / "offsets"):
                if n not in log.ends:
                    read = _stat_and_parse(path, self.topic)
                    if read is not None:
                        log.planned[n], log.ends[n] = read
            for n, path in _numbered(root / "commits"):
                if n not in log.committed:
                    try:
                        log.committed[n] = path.stat().st_mtime_ns / 1e6
                    except OSError:
                        continue


def _batches(query: int, log: _Log) -> list[tuple[Done, dict[int, int]]]:
    """The committed batches with input of one checkpoint, each with its end offsets: each reads
    from where the one before it ended (the first from sources/0/0; a partition added later,
    from 0)."""
    out, previous = [], dict(log.first or {})
    for n in sorted(log.ends):
        ends = log.ends[n]
        if ends is None:   # a damaged offsets/N (corrupt-checkpoint): no batch Spark could run
            continue
        rows = sum(max(0, end - previous.get(p, 0)) for p, end in ends.items())
        previous.update(ends)
        if n in log.committed and rows > 0:
            out.append((Done(query, n, log.planned[n], log.committed[n], rows), ends))
    return out


def _numbered(directory: Path) -> list[tuple[int, Path]]:
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return [(int(name), directory / name) for name in names if name.isdigit()]


def _stat_and_parse(path: Path, topic: str) -> tuple[float, dict[int, int] | None] | None:
    """offsets/N's mtime and its first source's end offsets (None: a file Spark could not read
    either); None when the file is gone or still being written."""
    try:
        mtime = path.stat().st_mtime_ns / 1e6
        if path.stat().st_size == 0:
            return None
    except OSError:
        return None
    read = offsets_file(path, topic)
    if read is None:
        return mtime, None
    _, ends = read
    return mtime, dict(ends[0]) if ends else {}
