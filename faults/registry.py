"""Every fault kind, registered once: adding a kind is one module plus one line here, or, for
a kind of a user's own, one line in a scenario (`fault_kinds = ["my_faults:MY_KIND"]`, which
the loader passes to `add`).

The scenario loader, the nemesis, the hunt, the schedule, the recovery figures and
docs/faults.md's table all read `KINDS` (faults/kinds.py says what a kind declares).
"""

from __future__ import annotations

from faults import (
    batch,
    broker,
    checkpoint,
    clock,
    cluster,
    commit,
    driver,
    kafka,
    network,
    process,
    sink,
    source,
    storage,
    tasks,
    unsynced,
)
from faults.kinds import RECOVERY_KEYS, RESTART_KEYS, FaultKind, register

KINDS: dict[str, FaultKind] = register(
    process.KILL_EXECUTOR_FAULT,
    process.PAUSE_FAULT,
    driver.KILL_DRIVER_FAULT,
    driver.REPLAY_BATCH_FAULT,
    driver.RESTART_WITH_FAULT,
    commit.DELAY_COMMIT_FAULT,
    sink.STALL_SINK_FAULT,
    broker.RESTART_BROKER_FAULT,
    network.NETWORK_FAULT,
    batch.FAIL_BATCH_FAULT,
    tasks.FAIL_TASK_FAULT,
    checkpoint.CORRUPT_CHECKPOINT_FAULT,
    kafka.KAFKA_PARTITIONS_FAULT,
    kafka.KAFKA_RETENTION_FAULT,
    cluster.KILL_BROKER_FAULT,
    cluster.KILL_WORKER_FAULT,
    clock.CLOCK_SKEW_FAULT,
    clock.CLOCK_JUMP_FAULT,
    storage.DISK_FULL_FAULT,
    storage.IO_ERROR_FAULT,
    unsynced.LOSE_UNSYNCED_FAULT,
    source.HIDE_COMMIT_FAULT,
    source.DELETE_SOURCE_FILES_FAULT,
)


BUILT_IN = frozenset(KINDS)


def add(new: FaultKind) -> None:
    """Register a kind of a user's own (a scenario's `fault_kinds`); the same kind again is a
    no-op, another kind under a registered name a ValueError."""
    if not isinstance(new, FaultKind):
        raise TypeError(f"{new!r} is not a faults.kinds.FaultKind")
    known = KINDS.get(new.name)
    if known is not None and known is not new:
        raise ValueError(f"fault kind {new.name!r} is registered already"
                         + (" (a built-in kind)" if new.name in BUILT_IN else ""))
    KINDS[new.name] = new


def kind(name: str) -> FaultKind:
    """The registered kind `name` (a KeyError names an unknown one)."""
    return KINDS[name]


def kind_of(name: str, traits: dict | None = None) -> FaultKind | None:
    """The kind of a fault's record: the registered one, else one built from the record's own
    `traits` (a user's kind, read from a summary without its scenario), else None (a summary
    from before traits were recorded)."""
    known = KINDS.get(name)
    if known is not None:
        return known
    return FaultKind.stand_in(name, traits) if traits else None


def make(spec, targets):
    """The injector for `spec` (a faults.spec.FaultSpec), acting on `targets`."""
    return KINDS[spec.kind].injector(spec, targets)


def recovery_keys(name: str) -> tuple[str, ...]:
    """The recovery figures a fault of kind `name` records: every kind's, a restarting kind's
    start-up (RESTART_KEYS), then its own."""
    kind = KINDS[name]
    shared = (*RECOVERY_KEYS, *(RESTART_KEYS if kind.restarts else ()))
    return (*shared, *(k for k in kind.recovery_keys if k not in shared))


def drawable() -> tuple[str, ...]:
    """The kinds a nemesis or the hunt can invent a fault of."""
    return tuple(name for name, k in KINDS.items() if k.drawable)


def table() -> str:
    """docs/faults.md's table of the built-in kinds, in Markdown (python -m harness.docs writes it)."""
    from faults.kinds import REQUIRED

    rows = ["| kind | keys (default) | targets | what happens, and what must be seen | what it models |",
            "|---|---|---|---|---|"]
    for name, k in KINDS.items():
        if name not in BUILT_IN:
            continue
        keys = []
        for key in k.keys:
            if key.type == "target":
                keys.append(f"`target` (`{k.default_target}`)")
            else:
                default = "required" if key.default is REQUIRED else key.shown_default()
                listed = ", ".join(f"`{c}`" for c in key.choices)
                # a signed duration takes any value; its choices are what a nemesis draws
                choices = (f"; a nemesis draws {listed}" if key.type == "signed-duration" else f": {listed}"
                           ) if key.choices else ""
                keys.append(f"`{key.name}` ({default}{choices})")
        targets = ", ".join(f"`{t}:N`, `{t}:random`" if t == "executor" else f"`{t}`" for t in k.targets)
        flags = [*(["restarts a process"] if k.restarts else []),
                 *(["a `foreachBatch` sink's commit window"] if k.needs_commit_gate else [])]
        about = k.about + (f" ({'; '.join(flags)})" if flags else "")
        rows.append(f"| `{name}` | {', '.join(keys) or '-'} | {targets} | {about} | {k.models} |")
    return "\n".join(rows)
