"""A fault kind described once: its keys, targets, injector, and what the harness must know
about it (Jepsen's nemesis "package": everything about a family in one place).

A fault module declares its kinds next to its injectors, and `faults/registry.py` lists
them, one line each. Everything else reads the registry: the scenario loader parses a
`[[faults]]` table with `FaultKind.parse`, the nemesis and the hunt draw one with
`FaultKind.draw`, the schedule asks `restarts`, the recovery figures come from
`recovery_keys`, and docs/faults.md's table is `registry.table()`.

    KILL_DRIVER = FaultKind(
        "kill-driver", KillDriver, about="...", models="...",
        keys=(DOWNTIME,), targets=("driver",), restarts=True, kills_driver=True,
        recovery_keys=("downtime_s", "first_batch_after_s"))

A kind owns everything about itself: whether it kills the driver, what the run must prepare
for it (`prepare`: proxies, partitions the generator spreads over, fail-task's stage), the
fields of its record (`details`), the clause a finding's story tells of it (`explain`), and
the workload it needs after it (`margin_s`), which the loader, the nemesis and the hunt share.
A scenario may register kinds of its own (`fault_kinds`, harness/scenario/load.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from faults.base import Details
from faults.spec import RESTART_MARGIN_S, FaultSpec
from workloads.validate import REQUIRED, Section, bad, parse_duration_ms

# the keys every fault has besides its own: kind, and `at` (from the first event sent)
COMMON_KEYS = ("kind", "at")
# where a key's value goes in a FaultSpec: these four are fields of their own, every other
# key goes into `extra` under its `store` name
_SPEC_FIELDS = {"duration": "duration_s", "downtime": "downtime_s", "via": "via", "mode": "mode"}
# recovery figures every kind records (faults/base.Observation.facts, plus the lag's, which
# the runner computes for every fault from the lag at each batch's end)
RECOVERY_KEYS = ("downtime_s", "first_batch_after_s", "lag_recovered_s", "batches_reexecuted",
                 "events_reread")
# ... and those of a kind whose heal starts a process: its start-up, which downtime_s (from the
# kill to the new process ready) adds to the `downtime` asked for (Fault.startup_s)
RESTART_KEYS = ("startup_s",)


@dataclass(frozen=True)
class Key:
    """One key of a fault kind, as a scenario writes it.

    `type` is one of: duration (a string with a unit; stored in seconds for `duration` and
    `downtime`, in milliseconds as `<store>` otherwise), choice, integer, boolean, table.
    `default` REQUIRED means the key must be written. `draw` says how a nemesis or the hunt
    picks a value: "default", "choice" (uniformly among `choices`), "span" (the drawn
    fault's length), "short" (at most 2 s of it)."""

    name: str
    type: str
    about: str
    default: Any = REQUIRED
    choices: tuple = ()
    store: str = ""        # the name in FaultSpec.extra ("" = the key's own, or its spec field)
    gt: float | None = None
    ge: float | None = None
    draw: str = "default"
    sample: Any = None     # a value it accepts, where the type's own example is refused
    # the values the hunt covers, each a choice of its own (None: the key left out): the points
    # of a batch a kill lands at, the rows a failing task hands over (harness/hunt/plan.py)
    cover: tuple = ()

    def read(self, s: Section) -> Any:
        """The value of this key in `s` (or its default), checked; raises with the dotted path."""
        bounds = {k: v for k, v in (("gt", self.gt), ("ge", self.ge)) if v is not None}
        if self.type == "duration":
            if self.default is None and self.name not in s:
                return 0.0 if self.name in ("duration", "downtime") else None   # optional, left out
            ms = s.duration_ms(self.name, self.default, **bounds)
            return ms / 1000 if self.name in ("duration", "downtime") else ms
        if self.type == "signed-duration":
            return _signed_ms(s, self.name, self.default)
        if self.type == "text":
            return s.string(self.name, self.default)
        if self.type == "choice":
            return s.choice(self.name, self.choices, self.default)
        if self.type == "integer":
            return s.integer(self.name, self.default, **bounds)
        if self.type == "boolean":
            return s.boolean(self.name, self.default)
        if self.type == "table":
            value = s.raw(self.name, self.default if self.default is not REQUIRED else None)
            if not isinstance(value, dict):
                raise bad(s.field(self.name), value, "expected a table",
                          f"write {self.name} = {{ key = \"value\" }}")
            return dict(value)
        raise ValueError(f"key {self.name}: unknown type {self.type!r}")

    @property
    def field(self) -> str:
        """Where the value goes: a FaultSpec field, or `extra.<name>`."""
        return _SPEC_FIELDS.get(self.name) or f"extra.{self.store or self.name}"

    def shown_default(self) -> str:
        if self.default is REQUIRED:
            return "required"
        if isinstance(self.default, bool):
            return "true" if self.default else "false"
        return "-" if self.default is None else f"`{self.default}`" if self.default != {} else "`{}`"

    def example(self) -> Any:
        """A value the key accepts (the docs test and the registry test write it)."""
        if self.sample is not None:
            return self.sample
        if self.type == "duration":
            return "2s"
        if self.type == "signed-duration":
            return "-30s"
        if self.type == "choice":
            return self.choices[-1]
        if self.type == "integer":
            return int((self.gt if self.gt is not None else (self.ge or 0) - 1) + 2)
        if self.type == "boolean":
            return True
        return {}

    def wrong(self) -> Any:
        """A value the key refuses."""
        return {"duration": "2 parsecs", "signed-duration": "-2 parsecs", "choice": "no-such-value",
                "integer": "many", "boolean": "yes", "table": 3, "text": 3}[self.type]


def _signed_ms(s: Section, key: str, default: Any) -> int:
    """A duration with a sign ("-30s", "+2m", "90s") in milliseconds."""
    raw = s.raw(key, default)
    if raw is REQUIRED:
        s.duration_ms(key)   # raises: the key is missing
    text = str(raw).strip()
    sign = -1 if text.startswith("-") else 1
    body = text[1:] if text[:1] in "+-" else text
    try:
        ms = parse_duration_ms(body, s.field(key))
    except Exception:
        raise bad(s.field(key), raw, "expected a signed duration", 'write e.g. "-30s" or "+2m"') from None
    if ms == 0:
        raise bad(s.field(key), raw, "moves the clock by nothing", 'write e.g. "-30s" or "+2m"')
    return sign * ms


# keys several kinds share
DURATION = Key("duration", "duration", "how long the fault lasts", gt=0, draw="span")
DOWNTIME = Key("downtime", "duration", "how long the process stays down before it is started again",
               default="3s", draw="short")


# `target` is checked by the harness against the cluster (executor 5 of 2): its choices are
# the kind's `targets`, its default the kind's `default_target`
TARGET = Key("target", "target", "what the fault acts on: one of the kind's targets", default=None)


@dataclass(frozen=True)
class CaseView:
    """What a kind's own set-up (Preparation.setup) sees of a case: its name, its directory (the
    set-up's own files go there), the query's checkpoint as the harness reads it, the commit
    gate's control directory, the case's topic and Kafka, PostgreSQL (None without it), the
    sink's table and the scenario's seed."""

    name: str
    dir: Path
    checkpoint: Path
    control_dir: Path
    topic: str
    bootstrap_servers: str
    postgres_url: str | None
    sink_table: str
    seed: int


# a kind's own set-up for a case: called before the case's first driver starts, it may return
# an undo, called once the case's last driver has stopped
SetUp = Callable[[CaseView], "Callable[[], None] | None"]


@dataclass(frozen=True)
class Precondition:
    """What a fault needs of the scenario or of the machine, checked by the loader before anything
    starts. `check(ctx, case)` returns why it does not hold, or None: `ctx` is the scenario's
    harness.scenario.fault_specs.Context (`services`, `cases`, `pipeline`, `master`,
    `workload_s`), and `case` (its `name`, `sink`, `guarantee`, `pipeline`) one case of it for a
    check `per_case`, else None. The harness's own are harness/scenario/fault_specs.py
    PRECONDITIONS; a kind may declare its own (FaultKind.preconditions) and name them in its
    `requires` beside those."""

    name: str
    check: Callable[[Any, Any], str | None]
    per_case: bool = False
    about: str = ""


@dataclass(frozen=True)
class Preparation:
    """What a run must set up before a fault of a kind can act (FaultKind.prepare):
    `proxies`: the paths ("kafka", "postgres") Spark must reach through Toxiproxy;
    `partition_steps`: (seconds from the first event sent, partitions added) from which the
    generator spreads events over partitions added mid-run; `task_stage`: the driver adds
    fail-task's stage to the query; `clocks`: the processes that start under libfaketime, on a
    clock file a clock fault moves (workloads/clock.py); `storage`: Spark reaches the case's
    checkpoint through the harness's FUSE file system (workloads/faultfs.py); `writeback_s`:
    it tracks unsynced writes; `spark_conf`: settings the fault needs; `source_fs`: a Delta
    source's table on a FUSE file system; `setup`: the kind's own set-up, for what none of those
    covers (a user's kind: a backup job, a file to write before the driver starts)."""

    proxies: frozenset[str] = frozenset()
    partition_steps: tuple[tuple[float, int], ...] = ()
    task_stage: bool = False
    clocks: frozenset[str] = frozenset()   # processes started on a clock file: "driver", "executor", "broker"
    storage: bool = False                  # the case's checkpoint on the harness's FUSE file system
    # ... which keeps track of writes not yet durable, taking a file as written back that many
    # seconds after it was first dirtied (lose-unsynced)
    writeback_s: float | None = None
    # Spark settings every driver of the case gets for this fault (kill-executor at phase
    # "maintenance" runs maintenance every few seconds); [services.spark] conf still wins
    spark_conf: tuple[tuple[str, str], ...] = ()
    source_fs: bool = False                # a Delta source's table on a FUSE file system of its own
    # the kind's own set-up, for what none of the above covers: each is called with the case
    # (CaseView) before its first driver starts, and may return an undo for after its last
    setup: tuple[SetUp, ...] = ()

    def merge(self, other: Preparation) -> Preparation:
        """What two faults need together: every proxy, step, clock, setting and set-up of both;
        a file system when either needs it; the shorter writeback."""
        writeback = [w for w in (self.writeback_s, other.writeback_s) if w is not None]
        return Preparation(
            proxies=self.proxies | other.proxies,
            partition_steps=self.partition_steps + other.partition_steps,
            task_stage=self.task_stage or other.task_stage, clocks=self.clocks | other.clocks,
            storage=self.storage or other.storage, writeback_s=min(writeback) if writeback else None,
            spark_conf=self.spark_conf + other.spark_conf, source_fs=self.source_fs or other.source_fs,
            setup=self.setup + tuple(f for f in other.setup if f not in self.setup))


@dataclass(frozen=True)
class BatchView:
    """What a finding knows of one batch, for a kind's `explain`: its number in its own
    checkpoint and when (seconds from the first event sent) offsets/N, its rows in the sink
    and commits/N appeared (None: unknown, or never)."""

    local: int
    planned_s: float | None = None
    sink_s: float | None = None
    committed_s: float | None = None


class RecordView(Protocol):
    """A fault as carried out (harness.results.model.FaultRecord), as `explain` reads it."""

    kind: str
    started_s: float | None
    ended_s: float | None
    target: str
    spec: dict
    details: Details


def _nothing(spec: FaultSpec) -> Preparation:
    return Preparation()


@dataclass(frozen=True)
class FaultKind:
    """Everything the harness knows about one kind of fault."""

    name: str
    injector: type                       # a faults.base.Fault subclass, built as Injector(spec, targets)
    about: str                           # what happens, and what must be seen (the docs table)
    models: str                          # the real failure it stands for
    keys: tuple[Key, ...] = ()           # besides kind and at
    targets: tuple[str, ...] = ()        # what `target` may name: "executor" (executor:N), "driver"...
    default_target: str = ""
    restarts: bool = False               # its heal starts a process (a driver, the broker)
    needs_commit_gate: bool = False      # it holds a batch in a foreachBatch sink's commit window
    recovery_keys: tuple[str, ...] = ()  # its own figures in recovery{}, beyond RECOVERY_KEYS
    # the preconditions a fault of this kind needs, by name, given its spec (its target, its
    # via...); the harness checks each before anything starts: its own (harness/scenario/
    # fault_specs.py PRECONDITIONS: "own-kafka", "own-postgres", "own-executors", "postgres-sink",
    # "fuse"...) and the kind's (`preconditions`)
    requires: Callable[[Any], tuple[str, ...]] = lambda spec: ()
    preconditions: tuple[Precondition, ...] = ()   # its own, which `requires` may name
    check: Callable[[dict, Section], None] | None = None   # keys that constrain each other
    nemesis_targets: tuple[str, ...] = ()   # the targets a nemesis draws from (default: default_target)
    # Spark settings every driver of a case gets when its scenario has a fault of this kind
    driver_conf: Mapping[str, str] = field(default_factory=dict)
    drawable: bool = True                # False: a nemesis cannot invent its keys (network)
    why_not_drawable: str = ""
    kills_driver: bool = False           # it kills (or fails) the driver and starts a new one
    # an error it causes may end the query, and then it starts a new driver (the storage faults):
    # such a driver's exit is the fault's doing, not an incident of its own
    may_end_query: bool = False
    # a job must go on after it (a machine's crash): Spark refusing to restart is a finding the
    # hunt stops on, not the loud stop it is after a fault that destroys what Spark needs
    # (kafka-retention under failOnDataLoss, a damaged checkpoint)
    refusal_breaks: bool = False
    details: type[Details] = Details     # its own fields in summary.json's record
    prepare: Callable[[FaultSpec], Preparation] = _nothing   # what the run sets up for it
    # the clause a finding's story tells of what a fault of this kind did to a batch (None:
    # nothing to say of it), from its record and what the finding knows of the batch
    explain: Callable[[RecordView, BatchView], str | None] | None = None
    by_progress: bool = True             # whether `at` may be a progress anchor ("batch 3")
    source: str = ""                     # the source it acts on ("kafka", "delta"), if one only
    why_not_by_progress: str = ""

    def traits(self) -> dict:
        """What the harness must know of the kind once its faults have run, recorded with each
        fault in summary.json (`traits`): a report, compare or the history read a summary without
        the scenario, and so without a user's kinds (registry.kind_of builds them back)."""
        return {name: list(self.targets) if name == "targets" else getattr(self, name) for name in TRAITS}

    @classmethod
    def stand_in(cls, name: str, traits: Mapping[str, Any]) -> FaultKind:
        """A kind this process has not registered, as its recorded `traits` describe it: enough for
        the incidents and the findings (kills_driver, restarts...), nothing to inject."""
        from faults.base import Fault

        known: dict[str, Any] = {k: tuple(v) if k == "targets" else v for k, v in traits.items()
                                 if k in TRAITS}
        return cls(name, Fault, about="a kind not registered here, as its record describes it", models="",
                   **known)

    def margin_s(self, lasts_s: float) -> float:
        """The workload a fault of this kind needs after its `at`: its own length, and for a kind
        whose heal starts a process, RESTART_MARGIN_S of events after that for the new process
        to show it is back. The loader, the nemesis and the hunt all ask this."""
        return lasts_s + (RESTART_MARGIN_S if self.restarts else 0.0)

    def fits(self, at_s: float, lasts_s: float, workload_s: float) -> bool:
        """Whether a fault at `at_s` lasting `lasts_s` fits a workload of `workload_s`: it comes
        before the workload ends, and a restarting kind leaves its margin after it."""
        return at_s < workload_s and (not self.restarts or at_s + self.margin_s(lasts_s) <= workload_s)

    @property
    def key_names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.keys)

    def key(self, name: str) -> Key:
        return next(k for k in self.keys if k.name == name)

    def parse(self, s: Section) -> dict:
        """The kind's keys of `s`, as FaultSpec fields: {"duration_s": ..., "extra": {...}}.
        `target` is left to the caller, which knows the cluster (executor 5 of 2)."""
        values: dict[str, Any] = {"extra": {}}
        for key in self.keys:
            if key.type == "target":
                continue
            if key.default is None and key.name not in s:
                continue   # an optional key without a default: absent
            value = key.read(s)
            spec_field = _SPEC_FIELDS.get(key.name)
            if spec_field:
                values[spec_field] = value
            else:
                values["extra"][key.store or key.name] = value
        if self.check is not None:
            self.check(values, s)
        return values

    def draw(self, rng: random.Random, at_s: float, span_s: float, asked: bool = False) -> dict:
        """A `[[faults]]` table of this kind at `at_s`, lasting at most `span_s`, its keys drawn
        from `rng`: what a nemesis or the hunt adds to a plan (parsed like any other). A kind
        kept from drawing is drawn only when `asked` for by name (the hunt's --kinds)."""
        if not self.drawable and not asked:
            raise ValueError(f"{self.name} cannot be drawn: {self.why_not_drawable}")
        raw: dict[str, Any] = {"kind": self.name, "at": _seconds(at_s)}
        for key in self.keys:
            if key.type == "target":
                raw["target"] = rng.choice(self.nemesis_targets or (self.default_target,))
            elif key.draw == "span":
                raw[key.name] = _seconds(span_s)
            elif key.draw == "short":
                raw[key.name] = _seconds(min(2.0, span_s))
            elif key.draw == "choice":
                raw[key.name] = rng.choice(key.choices)
        return raw

    def covered(self) -> Key | None:
        """The key whose values the hunt's coverage enumerates (Key.cover), if the kind has one."""
        return next((k for k in self.keys if k.cover), None)


# what a fault's record keeps of its kind (FaultKind.traits)
TRAITS = ("restarts", "kills_driver", "may_end_query", "needs_commit_gate", "refusal_breaks", "source",
          "targets")


def _seconds(s: float) -> str:
    """A duration string TOML and the parser agree on: "12.5s", "3s"."""
    return f"{round(s, 3):g}s"


def by_target(needs: Mapping[str, tuple[str, ...]]) -> Callable[[Any], tuple[str, ...]]:
    """`requires` for a kind whose preconditions depend on what it targets:
    {"broker": ("own-kafka",)} -> a broker target needs the harness's own Kafka."""
    return lambda spec: needs.get(spec.target_kind, ())


def always(*names: str) -> Callable[[Any], tuple[str, ...]]:
    """`requires` for a kind that needs `names` whatever its keys say."""
    return lambda spec: names


def register(*kinds: FaultKind) -> dict[str, FaultKind]:
    """name -> kind, refusing a name registered twice."""
    out: dict[str, FaultKind] = {}
    for kind in kinds:
        if kind.name in out:
            raise ValueError(f"fault kind {kind.name!r} is registered twice")
        out[kind.name] = kind
    return out


def describe(plan: list[dict]) -> str:
    """A plan in one line: "kill-driver at 12.5s (point after-write); stall-sink at 30s (duration 2s)"."""
    if not plan:
        return "no fault"
    parts = []
    for table in plan:
        keys = ", ".join(f"{k} {v}" for k, v in table.items() if k not in ("kind", "at"))
        parts.append(f"{table['kind']} at {table['at']}" + (f" ({keys})" if keys else ""))
    return "; ".join(parts)
