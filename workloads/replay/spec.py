"""`[workload] kind = "replay"`: the user's own records, sent to Kafka as they are.

    [workload]
    kind = "replay"
    file = "data/clicks.jsonl"     # JSON lines, CSV or Parquet, or a directory of them
    event_time = "ts"              # epoch ms or ISO-8601
    key = "user"                   # optional: the Kafka key, and the partition by its hash
    speed = 10.0                   # N times the recorded pace of event time; or [workload.rate]
    partitions = 2                 # topic, partitions, seed, duration, [workload.delay]: as ever

Pacing is either `speed` (a record is sent when the recorded event time, running ahead in
file order, reaches it at N times its pace) or the generator's `[workload.rate]` shapes (the
k-th record at the k-th send time of the shape). `[workload.delay]` (with `late_share` and
`late_by`) sends records later still, on top of their recorded order. `duration` defaults to
the file's length at that pace (a constant rate: rows / eps; `speed`: the event-time span /
speed); a shorter duration sends the records up to it.

The knobs of generated events (keys, payload, time, duplicates, Nexmark's) are refused: the
records carry their own. The spec is a WorkloadSpec (every stage of the harness reads it as
one) with the replay's own fields beside.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from workloads.errors import SpecError
from workloads.generator.spec import NEXMARK_KEYS, TOP_KEYS, WorkloadSpec
from workloads.generator.spec import parse as parse_generated
from workloads.replay.records import Source, files_of
from workloads.replay.scan import Scan, scan
from workloads.validate import Section, bad

KIND = "replay"
OWN = ("kind", "file", "event_time", "key", "speed")
NOT_HERE = ("keys", "payload", "time", "duplicates", *NEXMARK_KEYS)


@dataclass(frozen=True, kw_only=True)
class ReplaySpec(WorkloadSpec):
    """A workload of the user's records (`kind = "replay"`)."""

    source: Source
    speed: float | None = None      # None: paced by `rate`
    scanned: Scan | None = None     # the pass over the file made when the scenario was loaded

    @property
    def rows(self) -> int:
        return self.scanned.rows if self.scanned else 0

    def describe(self) -> dict:
        out = WorkloadSpec.describe(replace(self, kind="events"))   # the generator's keys, as for its events
        for key in ("keys", "payload", "time", "duplicates"):
            out.pop(key, None)
        s = self.scanned
        out.update(kind=KIND, replay={
            "file": str(self.source.path), "format": self.source.format, "event_time": self.source.event_time,
            "key": self.source.key, "speed": self.speed, "rows": self.rows,
            "event_time_ms": None if s is None else {"min": s.min_ms, "max": s.max_ms},
            "out_of_order_share": None if s is None else round(s.out_of_order_share, 6),
            "schema": s and s.schema})
        return out


def is_replay(raw: Any) -> bool:
    return isinstance(raw, dict) and raw.get("kind") == KIND


def parse(raw: Any, path: str = "workload", base_dir: Path = Path(".")) -> ReplaySpec:
    """Validate a replay's [workload] table; `file` is relative to `base_dir` (the scenario's)."""
    # every key a replay takes: its own and the generator's it passes on, so that a misspelled
    # one is named with a replay's keys (`sped` was "did you mean seed?", not speed)
    s = Section(raw, path, (*OWN, *(k for k in TOP_KEYS if k not in OWN), *NOT_HERE))
    for key in NOT_HERE:
        if key in s:
            raise bad(s.field(key), s.raw(key), "is a knob of generated events; a replay sends your records "
                      "as they are, with their own keys, fields and times", f"remove {s.field(key)}")
    file = Path(s.string("file"))
    file = file if file.is_absolute() else (Path(base_dir) / file).resolve()
    try:
        files_of(file)
    except SpecError:
        raise
    except Exception as exc:  # a Problem naming the path
        raise SpecError(f"{s.field('file')} = {str(file)!r}: {getattr(exc, 'problem', exc)}",
                        getattr(exc, "fix", "")) from None
    source = Source(file, s.string("event_time"), s.string("key", None))
    scanned = _scanned(source, s)
    speed = s.number("speed", None, gt=0) if "speed" in s else None
    if speed is not None and "rate" in s:
        raise bad(s.field("speed"), speed, f"paces the records by their event time, and {s.field('rate')} "
                  "paces them by a rate shape", "keep one of the two")
    generated = {k: v for k, v in raw.items() if k not in OWN}
    generated.setdefault("duration", _duration(s, scanned, speed, generated.get("rate")))
    if speed is not None:   # the mean rate of the file at that pace (for the reports)
        generated["rate"] = {"eps": max(scanned.rows / _seconds(generated["duration"], path), 1e-3)}
    base = parse_generated(generated, path)
    own = {f.name: getattr(base, f.name) for f in fields(WorkloadSpec)}
    return ReplaySpec(**{**own, "kind": KIND}, source=source, speed=speed, scanned=scanned)


def _scanned(source: Source, s: Section) -> Scan:
    try:
        return scan(source)
    except SpecError:
        raise
    except Exception as exc:  # a Problem naming the file and row
        raise SpecError(f"{s.field('file')}: {getattr(exc, 'problem', exc)}",
                        getattr(exc, "fix", "")) from None


def _duration(s: Section, scanned: Scan, speed: float | None, rate: Any) -> str:
    """The file's length at its pace, as a duration string (a whole number of ms, at least 1 s)."""
    if speed is not None:
        ms = (scanned.max_ms - scanned.first_ms) / speed
    else:
        shape = rate.get("shape", "constant") if isinstance(rate, dict) else "constant"
        eps = rate.get("eps") if isinstance(rate, dict) else None
        if shape != "constant" or not isinstance(eps, int | float) or eps <= 0:
            raise SpecError(f"{s.field('duration')} is missing, and a {shape} rate does not say how long "
                            f"{scanned.rows:,} records last",
                            f"add {s.field('duration')}, or pace the records with a constant rate or speed")
        ms = scanned.rows / eps * 1000
    return f"{max(math.ceil(ms) + 1, 1000)}ms"


def _seconds(duration: Any, path: str) -> float:
    from workloads.validate import parse_duration_ms

    return parse_duration_ms(duration, f"{path}.duration") / 1000
