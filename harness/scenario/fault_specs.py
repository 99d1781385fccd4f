"""The scenario's `[[faults]]` array and `[nemesis]`, validated into FaultSpecs before
anything starts, from the registered kinds (faults/registry.py).

Each mistake names the dotted path (`faults[1].target`) and the fix: an unknown kind, a
fault after the workload ends, a target that does not exist (executor 5 of 2), a
missing or negative duration, a fault the run cannot carry out (a broker restart on an
external Kafka, a sink lock on a sink that is not PostgreSQL).
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from faults import nemesis
from faults.kinds import COMMON_KEYS, CaseView, FaultKind, Precondition, Preparation
from faults.registry import KINDS, drawable
from faults.spec import FORMS, RESTART_MARGIN_S, START, Anchor, FaultSpec, parse_anchor
from harness.errors import ScenarioError
from harness.scenario.model import Case, Services
from workloads.sinks import SINKS
from workloads.validate import Section, bad, parse_duration_ms

log = logging.getLogger(__name__)
_TARGET = re.compile(r"([a-z]+)(?::(\d+|random))?")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,")


@dataclass(frozen=True)
class Context:
    """What a fault is checked against: the workload's length (and the key that sets it, for
    the fix of a fault that does not fit), the warm-up, the services, the cases."""

    workload_s: float
    services: Services
    cases: tuple[Case, ...] = ()
    duration_key: str = "workload.duration"
    warmup_s: float = 0.0
    pipeline: Any = None     # the scenario's [pipeline] (a case may have its own)

    @property
    def master(self) -> str:
        return self.services.spark.master


def _external(what: str, key: str) -> Callable[[Context, Case | None], str | None]:
    def check(ctx: Context, case: Case | None) -> str | None:
        named = getattr(getattr(ctx.services, what), key)
        return (f"services.{what}.{key} names an external {what}, and the harness touches only what it "
                "started itself") if named else None
    return check


def _own_executors(ctx: Context, case: Case | None) -> str | None:
    if executors_of(ctx.master) is not None or ctx.services.spark.standalone:
        return None
    return (f"the master {ctx.master} runs executors on machines the harness did not start them on, so it "
            'cannot signal them (via = "spark-api" asks Spark to kill one instead)')


def _local_executors(ctx: Context, case: Case | None) -> str | None:
    master = ctx.master
    if ctx.services.spark.standalone or master.startswith(("local", "spark://127.0.0.1", "spark://localhost")):
        return None
    return (f"the master {master} may run executors on other machines, and this fault's stage reads the "
            "case's control directory, which only this machine has")


def _kafka_cluster(ctx: Context, case: Case | None) -> str | None:
    if ctx.services.kafka.brokers > 1:
        return None
    return ("the harness's Kafka is one broker: a fault that loses one and expects the others to elect a "
            "new leader needs services.kafka.brokers = 3")


def _own_standalone(ctx: Context, case: Case | None) -> str | None:
    if ctx.services.spark.standalone:
        return None
    return (f"the master {ctx.master} is not a standalone cluster of the harness's own; write "
            '[services.spark] master = "standalone"')


def _postgres_sink(ctx: Context, case: Case | None) -> str | None:
    if case is None or case.sink == "postgres":
        return None
    return f"case {case.name} writes to the {case.sink} sink, not to PostgreSQL"


def _commit_gate(ctx: Context, case: Case | None) -> str | None:
    if case is None or case.sink not in SINKS or SINKS[case.sink].commit_gate:
        return None
    return (f"case {case.name} writes through the {case.sink} sink, Spark's own, not a foreachBatch sink, "
            "so no batch can be held in its commit window")


def _faketime(ctx: Context, case: Case | None) -> str | None:
    from workloads import clock

    if clock.library() is not None:
        return None
    return ("libfaketime is not installed (Debian's faketime package: apt-get install faketime; "
            "python -m harness.sysdeps installs it)")


def _fuse(ctx: Context, case: Case | None) -> str | None:
    from harness.services.fuse_mount import fuse_problem

    return fuse_problem()


def _one_own_broker(ctx: Context, case: Case | None) -> str | None:
    if ctx.services.kafka.brokers == 1:
        return None
    return ("a clock fault on the broker runs on the harness's single broker only; "
            "services.kafka.brokers is more")


def _state_store(ctx: Context, case: Case | None) -> str | None:
    from harness.check.registry import CUSTOM
    from harness.check.registry import kind as pipeline_kind

    own = (case.pipeline if case is not None else None) or ctx.pipeline
    if own is None or own.kind == CUSTOM or not pipeline_kind(own.kind).stateless_for(own.values):
        return None
    where = f"case {case.name}'s pipeline" if case is not None and case.pipeline else "the pipeline"
    return (f"{where} ({own.kind}) keeps no state, so no state store commits or runs maintenance; "
            "use a stateful pipeline (tumbling_count, dedup, session_count...)")


# the harness's preconditions, by name: each checked once for the run, or for each case
PRECONDITIONS: dict[str, Precondition] = {p.name: p for p in (
    Precondition("own-kafka", _external("kafka", "bootstrap_servers")),
    Precondition("own-postgres", _external("postgres", "url")),
    Precondition("own-executors", _own_executors),
    Precondition("local-executors", _local_executors),
    Precondition("kafka-cluster", _kafka_cluster),
    Precondition("own-standalone", _own_standalone),
    Precondition("postgres-sink", _postgres_sink, per_case=True),
    Precondition("commit-gate", _commit_gate, per_case=True),
    Precondition("faketime", _faketime),
    Precondition("one-own-broker", _one_own_broker),
    Precondition("fuse", _fuse),
    Precondition("state-store", _state_store, per_case=True),
)}


def requirements(kind: FaultKind, spec: FaultSpec) -> tuple[str, ...]:
    """The preconditions a fault needs: the kind's, given its keys, and the commit gate."""
    return (*kind.requires(spec), *(("commit-gate",) if kind.needs_commit_gate else ()))


def precondition(kind: FaultKind, name: str) -> Precondition:
    """The precondition `name` that `kind` requires: one of its own, or the harness's; an unknown
    name (a typo in a user's kind) is a ScenarioError saying which it may have meant."""
    known = {**PRECONDITIONS, **{p.name: p for p in kind.preconditions}}
    if name in known:
        return known[name]
    close = difflib.get_close_matches(str(name), known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ScenarioError(f"{kind.name} requires the precondition {name!r}, which neither the harness nor the "
                        "kind declares",
                        f"{hint}name one of {', '.join(known)} in its `requires`, or declare it in the "
                        "kind's `preconditions` (docs/faults.md, \"A fault kind of your own\")")


def why_not(spec: FaultSpec, ctx: Context) -> str | None:
    """The reason `spec` cannot run in this scenario, or None."""
    kind = KINDS[spec.kind]
    for name in requirements(kind, spec):
        need = precondition(kind, name)
        for case in (ctx.cases if need.per_case else (None,)):
            reason = need.check(ctx, case)
            if reason:
                return f"{spec.kind} needs {name}: {reason}"
    return None


def preparation(faults: tuple[FaultSpec, ...]) -> Preparation:
    """What the run must set up for the schedule's faults: each kind's `prepare`, merged."""
    out = Preparation()
    for f in faults:
        out = out.merge(KINDS[f.kind].prepare(f))
    return out


def set_up(faults: tuple[FaultSpec, ...], case: CaseView) -> Callable[[], None]:
    """Run the kinds' own set-ups (Preparation.setup) for `case`, once each, before its first
    driver starts; returns what undoes them, newest first, once its last driver has stopped. A
    set-up that raises stops the case before anything runs: the error names the set-up."""
    undos: list[Callable[[], None]] = []
    for setup in preparation(faults).setup:
        try:
            undo = setup(case)
        except Exception as exc:
            name = getattr(setup, "__qualname__", repr(setup))
            raise ScenarioError(f"case {case.name}: the fault set-up {name} raised "
                                f"{type(exc).__name__}: {exc}",
                                "fix the set-up, or drop the fault that asks for it") from exc
        if undo is not None:
            undos.append(undo)

    def undo_all() -> None:
        for undo in reversed(undos):
            try:
                undo()
            except Exception:  # noqa: BLE001 - one failing undo must not keep the others from running
                log.exception("undoing a fault's set-up for case %s", case.name)
    return undo_all


def needs_proxy(faults: tuple[FaultSpec, ...]) -> set[str]:
    """The paths ("kafka", "postgres") Spark must reach through Toxiproxy for the schedule's
    faults (each kind's `prepare` says)."""
    return set(preparation(faults).proxies)


def partition_steps(faults: tuple[FaultSpec, ...], partitions: int) -> list[tuple[float, int]]:
    """The generator's partition counts over time, (seconds from the first event sent, total),
    from the kinds that add partitions mid-run (their `prepare`)."""
    steps, total = [], partitions
    added = sorted(preparation(faults).partition_steps)
    for at_s, count in added:
        total += count
        steps.append((at_s, total))
    return steps


def clock_targets(faults: tuple[FaultSpec, ...]) -> frozenset[str]:
    """The processes that must start on a clock file of their own: "driver", "executor",
    "broker" (the clock faults' `prepare`)."""
    return preparation(faults).clocks


def source_fs(faults: tuple[FaultSpec, ...]) -> bool:
    """Whether Spark reaches a Delta source's table through a FUSE file system (hide-commit)."""
    return preparation(faults).source_fs


def storage_fs(faults: tuple[FaultSpec, ...]) -> bool:
    """Whether Spark reaches the case's checkpoint through the harness's FUSE file system."""
    return preparation(faults).storage


def writeback_s(faults: tuple[FaultSpec, ...]) -> float | None:
    """How long after a file is first dirtied the case's FUSE file system takes it as written
    back, when a fault drops unsynced writes (the shortest asked); None: it tracks nothing."""
    return preparation(faults).writeback_s


def fault_conf(faults: tuple[FaultSpec, ...]) -> dict[str, str]:
    """The Spark settings the schedule's faults need: each kind's own (`driver_conf`), and those
    a fault's keys ask for (its `prepare`'s `spark_conf`)."""
    out: dict[str, str] = {}
    for f in faults:
        out.update(KINDS[f.kind].driver_conf)
    return {**out, **dict(preparation(faults).spark_conf)}


def task_stage(faults: tuple[FaultSpec, ...]) -> bool:
    """Whether the driver adds fail-task's stage to the query (a kind's `prepare` asks for it)."""
    return preparation(faults).task_stage


def parse_nemesis(s: Section, ctx: Context, default_seed: int) -> tuple[FaultSpec, ...]:
    """[nemesis] kinds, interval, span, seed -> the seeded plan (empty without the table)."""
    if not s.data:
        return ()
    kinds = s.raw("kinds")
    can = drawable()
    if not isinstance(kinds, list) or not kinds:
        raise bad(s.field("kinds"), kinds, "expected a non-empty array of fault kinds",
                  f'write kinds = ["kill-executor", "pause"] (kinds: {", ".join(can)})')
    for i, name in enumerate(kinds):
        path = f"{s.field('kinds')}[{i}]"
        _known(name, path)
        if name not in can:
            raise bad(path, name, "cannot be drawn by a nemesis: " + KINDS[name].why_not_drawable,
                      f"declare {name} faults in [[faults]]; a nemesis draws {', '.join(can)}")
    interval_s = s.duration_ms("interval", gt=0) / 1000
    if interval_s > ctx.workload_s:
        raise bad(s.field("interval"), s.raw("interval"),
                  f"is longer than the workload ({ctx.workload_s:g}s)",
                  "choose an interval shorter than workload.duration, so that a fault fits in it")
    span_s = s.duration_ms("span", f"{interval_s * 500:g}ms", gt=0) / 1000
    if span_s > interval_s / 2:
        raise bad(s.field("span"), s.raw("span"), f"is longer than half the interval ({interval_s / 2:g}s)",
                  "a fault must be over before the next one: choose a span of at most half the interval")
    tables = nemesis.plan(tuple(kinds), interval_s, s.integer("seed", default_seed), ctx.workload_s,
                          span_s=span_s)
    return tuple(fault(t, f"nemesis (fault {i} drawn: {t['kind']} at {t['at']})", ctx)
                 for i, t in enumerate(tables))


def executors_of(master: str) -> int | None:
    """How many executors a `local-cluster[N,cores,mem]` master starts; None for other masters."""
    match = _LOCAL_CLUSTER.match(master)
    return int(match[1]) if match else None


def parse_faults(raw: Any, ctx: Context, where: str = "faults") -> tuple[FaultSpec, ...]:
    """`[[faults]]` -> FaultSpecs, in the order of their `at`."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise bad(where, raw, "expected an array of tables", f"write each fault as a [[{where}]] table")
    specs = [fault(item, f"{where}[{i}]", ctx) for i, item in enumerate(raw)]
    return tuple(sorted(specs, key=lambda f: f.at_s))


def fault(item: Any, path: str, ctx: Context) -> FaultSpec:
    """One `[[faults]]` table -> its FaultSpec, or ScenarioError naming the dotted path."""
    kind = KINDS[_kind(item, path)]
    s = Section(item, path, (*COMMON_KEYS, *kind.key_names))
    anchor = _anchor(s, kind, ctx)
    target = _target(s, kind, ctx)
    spec = FaultSpec(kind=kind.name, at_s=anchor.plus_s, target=target, **kind.parse(s),
                     anchor=anchor if anchor.by_progress else None)
    if not kind.fits(_earliest(anchor, ctx), spec.lasts_s, ctx.workload_s):
        raise _no_room(s, kind, spec, anchor, ctx)
    try:
        reason = why_not(spec, ctx)
    except ScenarioError as exc:   # a precondition its kind names that nobody declares
        raise ScenarioError(f"{path}: {exc.problem}", exc.fix) from None
    if reason:
        raise ScenarioError(f"{path}: {reason}",
                            "drop this fault, or run it in a scenario whose services and sinks allow it")
    return spec


def _anchor(s: Section, kind: FaultKind, ctx: Context) -> Anchor:
    """`at`: a duration from the first event sent, or a progress anchor ("warmup", "batch 3")."""
    raw = s.raw("at")
    if not isinstance(raw, str) or raw.strip()[:1].isdigit() or raw.strip()[:1] == "-":
        at_s = s.duration_ms("at") / 1000   # its own errors: a bare number, a wrong unit
        if at_s >= ctx.workload_s:
            raise bad(s.field("at"), raw, f"is not before the workload ends ({ctx.workload_s:g}s)",
                      f"inject faults while events are being sent: choose an `at` earlier than "
                      f"{ctx.workload_s:g}s, or a longer {ctx.duration_key}")
        return Anchor(START, at_s)
    try:
        anchor = parse_anchor(raw, lambda text: parse_duration_ms(text, s.field("at")))
    except ValueError as exc:
        raise bad(s.field("at"), raw, str(exc), f"write one of {FORMS}") from None
    except ScenarioError:
        raise bad(s.field("at"), raw, "is neither a duration nor a progress anchor",
                  f"write one of {FORMS}") from None
    if anchor.by_progress and not kind.by_progress:
        raise bad(s.field("at"), raw, f"{kind.name} cannot be placed by the query's progress: "
                  f"{kind.why_not_by_progress}", 'write `at` in seconds, e.g. at = "10s"')
    return anchor


def _earliest(anchor: Anchor, ctx: Context) -> float:
    """The earliest a fault at `anchor` can come, in seconds from the first event sent: the
    warm-up's declared minimum for a progress anchor (when it ends is known only as it runs)."""
    return anchor.plus_s if anchor.after == START else ctx.warmup_s + anchor.plus_s


def _no_room(s: Section, kind: FaultKind, spec: FaultSpec, anchor: Anchor, ctx: Context) -> ScenarioError:
    """A fault that does not fit the workload, with the key to change and a value that works."""
    earliest, need = _earliest(anchor, ctx), kind.margin_s(spec.lasts_s)
    why = (f"{kind.name} needs {need:g}s of workload after it ({spec.lasts_s:g}s of its own and "
           f"{RESTART_MARGIN_S:g}s of events for the new process to show it is back)")
    at_most = ctx.workload_s - need
    longer = f"set {ctx.duration_key} to at least {earliest + need:g}s"
    if anchor.by_progress:
        return bad(s.field("at"), s.raw("at"), f"leaves too little workload: the warm-up takes at least "
                   f"{ctx.warmup_s:g}s and {why}", longer)
    if at_most < 0:
        return bad(s.field("at"), s.raw("at"), f"no `at` fits a {ctx.workload_s:g}s workload: {why}", longer)
    return bad(s.field("at"), s.raw("at"), f"leaves too little workload after it: {why}",
               f"choose an `at` of at most {at_most:g}s, or {longer}")


def _known(name: Any, path: str) -> str:
    if name not in KINDS:
        close = difflib.get_close_matches(str(name), KINDS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise bad(path, name, "is not a fault kind", f"{hint}write one of {', '.join(KINDS)}")
    return name


def _kind(item: Any, path: str) -> str:
    if not isinstance(item, dict):
        raise bad(path, item, "expected a table", "write it as a [[faults]] table")
    if "kind" not in item:
        raise ScenarioError(f"{path}.kind is missing", f"add kind = one of {', '.join(KINDS)}")
    return _known(item["kind"], f"{path}.kind")


def _target(s: Section, kind: FaultKind, ctx: Context) -> str:
    master = ctx.master
    brokers = None if ctx.services.kafka.bootstrap_servers else ctx.services.kafka.brokers
    workers = ctx.services.spark.workers if ctx.services.spark.standalone else None
    target = s.string("target", kind.default_target) if "target" in kind.key_names else kind.default_target
    match = _TARGET.fullmatch(target)
    if match is None or match[1] not in kind.targets:
        raise bad(s.field("target"), target, f"is not a target of {kind.name}",
                  f"write one of {', '.join(shown_targets(kind))}")
    for what, count in (("broker", brokers), ("worker", workers)):
        if match[1] == what and match[2] and match[2] != "random" and count is not None:
            first = 1 if what == "broker" else 0
            if not first <= int(match[2]) < first + count:
                raise bad(s.field("target"), target, f"there is no {what} {match[2]}: the run starts {count} "
                          f"({what}:{first} to {what}:{first + count - 1})",
                          f"write {what}:{first} to {what}:{first + count - 1}")
    if match[1] == "executor":
        index = match[2] or "0"
        count = executors_of(master)
        if index != "random" and count is not None and int(index) >= count:
            raise bad(s.field("target"), target, f"there is no executor {index}: "
                      f"the master {master} starts {count} (executor:0 to executor:{count - 1})",
                      f"write executor:0 to executor:{count - 1}, or executor:random")
        target = f"executor:{index}"
    return target


def shown_targets(kind: FaultKind) -> list[str]:
    """The targets of `kind` as a scenario writes them."""
    numbered = ("executor", "worker")
    # a kind that also takes "leader" means something by a bare "broker"; network does not
    only_numbered = {*numbered, *(("broker",) if "leader" not in kind.targets else ())}
    return [f'"{t}:N"' if t in only_numbered else f'"{t}"' for t in kind.targets] + (
        ['"executor:random"'] if "executor" in kind.targets else []) + (
        ['"broker:N"'] if "broker" in kind.targets and "leader" in kind.targets else [])
