"""The scenario's `[[faults]]` array, validated into FaultSpecs before anything starts.

Each mistake names the dotted path (`faults[1].target`) and the fix: an unknown kind, a
fault after the workload ends, a target that does not exist (executor 5 of 2), a
missing or negative duration.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from faults import nemesis
from faults.spec import KINDS, MODES, RESTART_MARGIN_S, RESTARTING, VIAS, FaultSpec
from harness.errors import ScenarioError
from workloads.generator._validate import Section, bad

_TARGET = re.compile(r"([a-z]+)(?::(\d+|random))?")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,")
_DEFAULT_DOWNTIME = "3s"


def needs_proxy(faults: tuple[FaultSpec, ...]) -> set[str]:
    """The paths ("kafka", "postgres") that a network fault acts on: they go through Toxiproxy."""
    return {f.target for f in faults if f.kind == "network"}


def parse_nemesis(s: Section, workload_s: float, default_seed: int) -> tuple[FaultSpec, ...]:
    """[nemesis] kinds, interval, seed -> the seeded plan (empty without the table)."""
    if not s.data:
        return ()
    kinds = s.raw("kinds")
    if not isinstance(kinds, list) or not kinds:
        raise bad(s.field("kinds"), kinds, "expected a non-empty array of fault kinds",
                  f'write kinds = ["kill-executor", "pause"] (kinds: {", ".join(KINDS)})')
    for i, kind in enumerate(kinds):
        if kind == "network":
            raise bad(f"{s.field('kinds')}[{i}]", kind, "needs its own keys (target, latency, ...)",
                      "declare network faults in [[faults]]")
        if kind not in KINDS:
            close = difflib.get_close_matches(str(kind), KINDS, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise bad(f"{s.field('kinds')}[{i}]", kind, "is not a fault kind",
                      f"{hint}write one of {', '.join(KINDS)}")
    interval_s = s.duration_ms("interval", gt=0) / 1000
    if interval_s > workload_s:
        raise bad(s.field("interval"), s.raw("interval"), f"is longer than the workload ({workload_s:g}s)",
                  "choose an interval shorter than workload.duration, so that a fault fits in it")
    return nemesis.plan(tuple(kinds), interval_s, s.integer("seed", default_seed), workload_s)


def executors_of(master: str) -> int | None:
    """How many executors a `local-cluster[N,cores,mem]` master starts; None for other masters."""
    match = _LOCAL_CLUSTER.match(master)
    return int(match[1]) if match else None


def parse_faults(raw: Any, workload_s: float, master: str, where: str = "faults") -> tuple[FaultSpec, ...]:
    """`[[faults]]` -> FaultSpecs, in the order of their `at`."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise bad(where, raw, "expected an array of tables", f"write each fault as a [[{where}]] table")
    specs = [_fault(item, f"{where}[{i}]", workload_s, master) for i, item in enumerate(raw)]
    return tuple(sorted(specs, key=lambda f: f.at_s))


def _fault(item: Any, path: str, workload_s: float, master: str) -> FaultSpec:
    kind_name = _kind(item, path)
    kind = KINDS[kind_name]
    s = Section(item, path, ("kind", "at", *kind.keys))
    at_s = s.duration_ms("at") / 1000
    if at_s >= workload_s:
        raise bad(s.field("at"), s.raw("at"), f"is not before the workload ends ({workload_s:g}s)",
                  "inject faults while events are being sent: choose an `at` earlier than "
                  "workload.duration (with --quick, [quick] may shorten it)")
    target = _target(s, kind_name, master)
    lasts_s = max(s.duration_ms("duration", "0s"), s.duration_ms("downtime", _DEFAULT_DOWNTIME)) / 1000
    if kind_name in RESTARTING and at_s + lasts_s + RESTART_MARGIN_S > workload_s:
        raise bad(s.field("at"), s.raw("at"), f"leaves too little workload after the restart: {kind_name} "
                  f"needs {RESTART_MARGIN_S:g}s of events after its downtime to see the new process at work",
                  f"choose an `at` of at most {max(0.0, workload_s - lasts_s - RESTART_MARGIN_S):g}s, "
                  "or a longer workload.duration")
    duration_s = 0.0
    if "duration" in kind.keys:
        duration_s = s.duration_ms("duration", gt=0) / 1000
    downtime_s = s.duration_ms("downtime", _DEFAULT_DOWNTIME) / 1000 if "downtime" in kind.keys else 0.0
    via = s.choice("via", VIAS, "signal") if "via" in kind.keys else "signal"
    extra = _network(s) if kind_name == "network" else {}
    return FaultSpec(kind=kind_name, at_s=at_s, target=target, duration_s=duration_s, extra=extra,
                     downtime_s=downtime_s,
                     via=via,
                     mode=s.choice("mode", MODES, "hard") if "mode" in kind.keys else "hard")


def _network(s: Section) -> dict:
    """The toxics of a network fault: at least one of latency, bandwidth and reset."""
    toxics = {"latency_ms": s.duration_ms("latency", "0ms"), "jitter_ms": s.duration_ms("jitter", "0ms")}
    if "bandwidth" in s:
        toxics["bandwidth_kbps"] = s.integer("bandwidth", gt=0)
    reset = s.raw("reset", False)
    if not isinstance(reset, bool):
        raise bad(s.field("reset"), reset, "expected true or false", "write reset = true")
    toxics["reset"] = reset
    if not (toxics["latency_ms"] or "bandwidth_kbps" in toxics or reset):
        raise ScenarioError(f"{s.path} does nothing: a network fault needs latency, bandwidth or reset",
                            'add e.g. latency = "500ms", bandwidth = 64 (KB/s) or reset = true')
    return toxics


def _kind(item: Any, path: str) -> str:
    if not isinstance(item, dict):
        raise bad(path, item, "expected a table", "write it as a [[faults]] table")
    if "kind" not in item:
        raise ScenarioError(f"{path}.kind is missing", f"add kind = one of {', '.join(KINDS)}")
    kind = item["kind"]
    if kind not in KINDS:
        close = difflib.get_close_matches(str(kind), KINDS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise bad(f"{path}.kind", kind, "is not a fault kind",
                  f"{hint}write one of {', '.join(KINDS)}")
    return kind


def _target(s: Section, kind_name: str, master: str) -> str:
    kind = KINDS[kind_name]
    target = s.string("target", kind.default_target) if "target" in kind.keys else kind.default_target
    match = _TARGET.fullmatch(target)
    if match is None or match[1] not in kind.targets:
        allowed = ", ".join(f'"{t}:N"' if t == "executor" else f'"{t}"' for t in kind.targets)
        raise bad(s.field("target"), target, f"is not a target of {kind_name}", f"write one of {allowed}")
    if match[1] == "executor":
        index = match[2] or "0"
        count = executors_of(master)
        if index != "random" and count is not None and int(index) >= count:
            raise bad(s.field("target"), target, f"there is no executor {index}: "
                      f"the master {master} starts {count} (executor:0 to executor:{count - 1})",
                      f"write executor:0 to executor:{count - 1}, or executor:random")
        target = f"executor:{index}"
    return target
