"""Every registered fault kind at its defaults, on the default stack (issue 41): what a nemesis or
the hunt draws, and what a user who writes `kind = "restart-broker"` and nothing else gets.

The default stack is the harness's own single Kafka broker, PostgreSQL and a Spark
local-cluster, a Kafka source and the PostgreSQL sink. Each kind gets a `[[faults]]` table with
only its required keys. Alone on that stack it either loads, and then it must run and land, or is
refused at load time with the reason (`refused()`). The kinds that load run several to a case
(`plan()`): tests/test_fault_registry.py checks the split and that the plan loads;
tests/test_every_kind_e2e.py runs it, in tox -e test.
"""

from __future__ import annotations

from pathlib import Path

from faults.kinds import REQUIRED, FaultKind, Key
from faults.registry import KINDS
from faults.spec import FaultSpec
from harness.errors import ScenarioError
from harness.scenario import load
from harness.scenario.fault_specs import requirements
from workloads.validate import parse_duration_ms

DEFAULT_STACK = """\
name = "{name}"
drain_timeout = "180s"

[workload]
partitions = 2
duration = "{duration}"
max_duration = "{max_duration}"
seed = 5
rate = {{ eps = 300 }}
delay = {{ distribution = "uniform", max = "500ms" }}

[pipeline]
window = "2s"
watermark = "1s"

[measure]
state_check = false

[[cases]]
name = "{name}"
guarantee = "at-least-once"
"""

# [measure] state_check = false: this plan asks whether each kind lands and its case ends with a
# verdict; the state check would copy the checkpoint before each of its 5-14 faults and read each
# copy at the end (20-40 s more a case in a fresh clone's CI, 691 s for tox -e test), and it is
# judged under faults elsewhere (every_fault.toml in tox -e e2e, the state-rollback plants)
# what Spark does at these kinds' defaults ends the query for good, so each goes last in its case:
# kafka-retention under Spark's failOnDataLoss, lose-unsynced's torn checkpoint (docs/faults.md)
ENDS_THE_QUERY = ("kafka-retention", "lose-unsynced")
# each fault at a batch of the query's progress after the one before it: 2 batches after one that
# restarts nothing, 5 after one that restarts a process, so that the new one has run batches first
# and the fault before is done with. Faults may overlap (harness/run/schedule.py), but this test
# asks whether each lands alone: at 3, a replay-batch whose hold waited for kill-driver's new
# driver took its batch only after the restart-broker three batches on had crashed the broker
# (both landed, the broker's restart inside the replay's; two cores, every-kind run at 01:38)
AFTER_PLAIN, AFTER_RESTART = 2, 5
# the workload's nominal length is the least the loader takes (the largest margin a fault needs
# after it, and ROOM_S): the run goes on while a fault waits for its batch and until the query read
# past the last (docs/scenario.md), so it lasts as long as the schedule needs on this machine, not
# a guess of seconds a batch; MAX_DURATION_S only ends a run that is stuck (a loaded CI machine ran
# 36 batches in 191 s with the restarts; pinned to one core, this plan reached its last fault at
# 245 s, the earlier one with its clocks moved back at 310 s)
ROOM_S = 10.0
MAX_DURATION_S = 900.0


# a clock's move: forward, and short
CLOCK_MOVE = "+5s"


def required(key: Key):
    """A value for a key the kind requires: the key's example, but a clock moved a little
    forward (CLOCK_MOVE). A move stalls the driver's processing-time trigger for as long as the
    move, either way (libfaketime moves its monotonic clock too, and a timed wait that began
    across the move waits it out): clock-skew -30s then clock-jump -30s held this plan's query
    for 60 s between two batches (commits/22 at 01:15:13.9, offsets/23 at 01:16:14.0, pinned to
    one core), and +30s each held a batch 31 s in a fresh clone's CI run (docs/faults.md); a
    nemesis's ±30 s decides nothing here that 5 s does not: whether the kind lands."""
    if key.type == "signed-duration" and key.choices:
        return CLOCK_MOVE
    return key.example()


def table(kind: FaultKind, at: str) -> dict:
    """The kind's `[[faults]]` table at `at`, with its required keys alone."""
    return {"kind": kind.name, "at": at, **{k.name: required(k) for k in kind.keys if k.default is REQUIRED}}


def _toml(value) -> str:
    return "true" if value is True else f'"{value}"' if isinstance(value, str) else repr(value)


def scenario_text(name: str, tables: list[dict], duration_s: float) -> str:
    body = "".join("\n[[faults]]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in t.items()) for t in tables)
    return DEFAULT_STACK.format(name=name, duration=f"{duration_s:g}s",
                                max_duration=f"{max(MAX_DURATION_S, duration_s):g}s") + body


def refused(tmp: Path) -> dict[str, str]:
    """Kind -> the loader's reason, for each kind refused alone on the default stack at its defaults."""
    out = {}
    for name, kind in KINDS.items():
        path = tmp / f"{name}.toml"
        path.write_text(scenario_text("alone", [table(kind, "5s")], 120.0))
        try:
            load(path)
        except ScenarioError as exc:
            out[name] = exc.problem.split(": ", 1)[1]
    return out


def _needs_fuse(kind: FaultKind, at_s: float) -> bool:
    return "fuse" in requirements(kind, FaultSpec(kind.name, at_s, kind.default_target))


def _halves(members: list[FaultKind]) -> list[tuple[str, list[FaultKind]]]:
    """The kinds off FUSE, in their order, as two cases of about equal length (a fault's batches
    after it: AFTER_RESTART or AFTER_PLAIN), so that tox -e test's two workers run them side by
    side: as one case, 14 kinds took 430 s of a fresh clone's CI run, the lane's longest test."""
    def cost(kind: FaultKind) -> int:
        return AFTER_RESTART if kind.restarts else AFTER_PLAIN

    total, spent, cut = sum(map(cost, members)), 0, len(members)
    for i, kind in enumerate(members):
        if spent >= total / 2:
            cut = i
            break
        spent += cost(kind)
    return [("every-kind", members[:cut]), ("every-kind-restarts", members[cut:])]


def plan(kinds: list[str]) -> dict[str, list[dict]]:
    """The kinds, several to a case: those on the harness's FUSE file system apart, the others in
    two halves (`_halves`). In each case a
    kind placed in seconds only comes first (kafka-partitions), then those that restart nothing,
    then those that restart a process, then one that ends the query; each at a batch of the
    query's progress that leaves the one before it room (AFTER_PLAIN, AFTER_RESTART)."""
    groups: dict[str, list[FaultKind]] = {"every-kind": [], "every-kind-storage": []}
    for name in kinds:
        kind = KINDS[name]
        groups["every-kind-storage" if _needs_fuse(kind, 1.0) else "every-kind"].append(kind)
    for members in groups.values():
        members.sort(key=lambda k: (k.by_progress, k.name in ENDS_THE_QUERY, k.restarts))
    out = {}
    for case, members in [*_halves(groups.pop("every-kind")), *groups.items()]:
        ending = [k.name for k in members if k.name in ENDS_THE_QUERY]
        assert len(ending) <= 1, f"{case}: more than one kind ends the query ({ending})"
        batch, tables = 2, []
        for kind in members:
            if not kind.by_progress:
                tables.append(table(kind, "2s"))
                continue
            tables.append(table(kind, f"batch {batch}"))
            batch += AFTER_RESTART if kind.restarts else AFTER_PLAIN
        out[case] = tables
    return out


def _lasts_s(kind: FaultKind) -> float:
    """How long a fault of the kind lasts at its defaults: its downtime (3 s), or 2 s of duration."""
    keys = {k.name: k for k in kind.keys}
    if "downtime" in keys and keys["downtime"].default not in (REQUIRED, None):
        return parse_duration_ms(keys["downtime"].default, "downtime") / 1000
    return 2.0 if "duration" in keys else 0.0


def duration_s(tables: list[dict]) -> float:
    """The workload's nominal length: the largest margin a fault of the case needs after it (a
    restart's downtime and 20 s of events), and ROOM_S. The run goes on past it while a fault
    waits for its batch (up to MAX_DURATION_S)."""
    kinds = [KINDS[t["kind"]] for t in tables]
    return max(kind.margin_s(_lasts_s(kind)) for kind in kinds) + ROOM_S


def write(tmp: Path, kinds: list[str]) -> list[Path]:
    """The plan's scenarios, one case each, in `tmp`."""
    paths = []
    for case, tables in plan(kinds).items():
        path = tmp / f"{case}.toml"
        path.write_text(scenario_text(case, tables, duration_s(tables)))
        paths.append(path)
    return paths
