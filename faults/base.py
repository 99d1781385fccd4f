"""The base of every injector: its spec, its targets, when it acted, and what was seen."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from faults.spec import FaultSpec
from faults.targets import Targets


class Missed(Exception):
    """The run offered the fault nothing to act on (a fail-task whose query never wrote two rows
    to one sink partition in a batch): the schedule did not fit the run, as a progress anchor
    that never came does (the fault is missed: status schedule-missed), not a failure of the job."""


@dataclass
class Details:
    """A kind's own fields in its summary.json record (`cases[].faults[]`), beside the fields
    every fault has: a kind declares a subclass (FaultKind.details) and its injector fills one
    in. The base has none. What the checker and the findings ask of any kind's record is a
    method here, so that they never name a kind."""

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Details:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def deleted_ranges(self) -> list[dict]:
        """Records Kafka deleted before the query read them ([{"partition", "from", "to"}], `to`
        exclusive): the checker takes them out of ground truth."""
        return []

    def changed_file(self) -> str | None:
        """A file of the query's checkpoint the fault changed, as the case's directory names it."""
        return None


@dataclass(frozen=True)
class Change:
    """One thing a fault changed that a finding may have to tell: a file it deleted, truncated,
    emptied or overwrote, or a batch whose log entries it removed, so that Spark plans it again.
    Every kind, built-in or a user's, records its changes one way (Fault.changed_file,
    Fault.removed_batch), and summary.json keeps them in the fault's record (`changes`): a
    finding reads them with neither the kind nor the scenario at hand (a report rebuilt later).

    `action`: "deleted", "truncated", "emptied", "overwritten", "dropped" (unsynced writes lost),
    "torn", or REMOVED_BATCH; `path`: the file as the case's directory names it
    ("checkpoint/offsets/10"); `batch`: the batch of the query's checkpoint it concerns (its own
    number, as offsets/N names it); `was`: what it held before, when that matters (the offsets a
    removed offsets/N had planned); `detail`: the change in a clause ("deleted (412 bytes)")."""

    action: str
    path: str = ""
    batch: int | None = None
    was: str = ""
    detail: str = ""

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v not in ("", None)}

    @classmethod
    def from_json(cls, d: dict) -> Change:
        return cls(**{k: d[k] for k in ("action", "path", "batch", "was", "detail") if k in d})

    def clause(self) -> str:
        """The change as a story tells it: "checkpoint/commits/10 deleted (412 bytes)", "batch 10's
        offsets/10 and commits/10 removed, so Spark planned it again"."""
        if self.action == REMOVED_BATCH:
            return self.detail or f"batch {self.batch}'s log entries removed, so Spark planned it again"
        return f"{self.path} {self.detail or self.action}"


# a batch's offsets/N (and commits/N) removed: Spark plans batch N again, over other offsets
REMOVED_BATCH = "removed-batch"


def log_batch(path: Path | str) -> int | None:
    """The batch a checkpoint's log file is of (offsets/N, commits/N), else None."""
    path = Path(path)
    return int(path.name) if path.name.isdigit() and path.parent.name in ("offsets", "commits") else None


@dataclass
class Unknown(Details):
    """The record of a kind this harness does not know (a user's kind not loaded): kept whole."""

    fields_: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return dict(self.fields_)

    @classmethod
    def from_json(cls, d: dict) -> Details:
        return cls(dict(d))


@dataclass
class Observation:
    """Whether the fault's effect was seen, in a sentence, with figures for recovery.

    `landed` is the proof that it hit the window it aims at, not just that it ran ("the
    exception came after the sink's write of batch 7 returned and before commits/7"): None
    for a kind that aims at no window of its own (then observed is the proof). A fault that
    did not land fails its case, as an unobserved one does. `outcome` is what Spark did with
    a restart the fault made it take: "accepted", "ignored" or "refused" (with Spark's
    sentence in `outcome_detail`): a refused restart is a finding, not a harness error.
    `details`: the kind's own record (FaultKind.details)."""

    observed: bool
    detail: str
    facts: dict = field(default_factory=dict)
    landed: bool | None = None
    proof: str = ""
    outcome: str | None = None
    outcome_detail: str = ""
    details: Details | None = None


class Fault:
    """inject() makes it happen, heal() undoes it (once, always), observe() checks the effect.

    What every injector may know about itself, declared here rather than found with hasattr:
    when it was injected, when it took effect (`landed_at`: the kill, the hold's start, the
    lock), when it was healed; a killed process's `killed_at` and its replacement's
    `restarted_at`; `refused`, Spark's sentence when it would not run the query again."""

    def __init__(self, spec: FaultSpec, targets: Targets):
        self.spec, self.targets = spec, targets
        self.injected_at: float | None = None   # wall-clock seconds
        self.landed_at: float | None = None     # when it took effect (default: its injection)
        self.healed_at: float | None = None
        self.killed_at: float | None = None     # a kind that kills a process: when
        self.restarted_at: float | None = None  # ... and when its replacement was up
        self.heal_began: float | None = None    # when heal() began (a restart: when it was asked for)
        self.refused: str | None = None         # Spark refused the restart: its sentence
        self.target = spec.target               # what it acted on, as recorded ("executor:0 (pid 123)")
        self.what_changed: list[Change] = []    # what it changed, for the findings (summary.json)
        self._healing = False

    def inject(self) -> None:
        self.injected_at = time.time()
        self._inject()
        if self.landed_at is None and self.killed_at is not None:
            self.landed_at = self.killed_at

    def land(self) -> None:
        """Wait until the fault took effect, and set `landed_at` (a request that a batch must
        take first: delay-commit's). By default a fault took effect when it was injected."""
        if self.landed_at is None:
            self.landed_at = self.killed_at or self.injected_at

    def heal(self) -> None:
        """Undo the fault, once; `healed_at` is when it is undone (a restarted driver is ready)."""
        if self.healed_at is None and not self._healing:
            self._healing = True
            self.heal_began = time.time()
            try:
                self._heal()
            finally:
                self.healed_at = time.time()

    def _inject(self) -> None:
        raise NotImplementedError

    def startup_s(self) -> float | None:
        """How long the process its heal started took to be ready: the new driver's or broker's
        start-up, which `downtime_s` (from the kill to ready) adds to the `downtime` asked for;
        None when its heal started nothing."""
        if self.restarted_at is None or self.heal_began is None:
            return None
        return round(self.restarted_at - self.heal_began, 3)

    def changed_file(self, path: Path, action: str, detail: str = "", batch: int | None = None,
                     was: str = "") -> Change:
        """Record that the fault changed the file at `path` (deleted, truncated, ...: see Change),
        named as the case's directory names it ("checkpoint/offsets/10")."""
        change = Change(action, self._named(path), log_batch(path) if batch is None else batch, was, detail)
        self.what_changed.append(change)
        return change

    def removed_batch(self, batch: int, was: str = "", detail: str = "") -> Change:
        """Record that the fault removed batch `batch`'s log entries (offsets/N, and commits/N):
        Spark plans it again, over the offsets it finds then. `was`: what the removed offsets/N
        had planned (its source offsets), so that a finding can tell the two runs apart."""
        path = self._named(Path(self.targets.checkpoint()) / "offsets" / str(batch))
        change = Change(REMOVED_BATCH, path, batch, was,
                        detail or f"batch {batch}'s offsets/{batch} and commits/{batch} removed, so Spark "
                                  f"planned batch {batch} again")
        self.what_changed.append(change)
        return change

    def _named(self, path: Path) -> str:
        """`path` from the case's directory (the checkpoint's parent), or whole when elsewhere."""
        try:
            return str(Path(path).relative_to(Path(self.targets.checkpoint()).parent))
        except (ValueError, TypeError, AttributeError):
            return str(path)

    def _heal(self) -> None:
        """Nothing to undo by default (a kill is over once it happened)."""

    def restore(self) -> bool:
        """At the case's end: put back what the fault left down for the rest of the case (a
        node killed without `downtime`), so that the next case starts on the whole cluster.
        Whether anything was put back (nothing by default)."""
        return False

    def observe(self) -> Observation:
        raise NotImplementedError


def held_text(held: dict) -> str:
    """"batch 4 (85 rows)", or "batch 4" when the sink does not count its rows (counting a
    DataFrame would run the batch twice)."""
    rows = held.get("rows")
    return f"batch {held['batch_id']}" + (f" ({rows:,} rows)" if rows is not None else "")

