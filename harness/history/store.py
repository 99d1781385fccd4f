"""The history store: a directory that `python -m harness history add STORE RUN_DIR...` appends
runs to, one JSON file a run (`runs/<run id>.json`), so that a CI cache, an artifact or a branch
carries it from night to night and two nights never write the same file.

An entry is one case of one run: the scenario (name, hash, quick), the case's series and repeat,
the commit, the versions (Spark, Kafka, Delta, Python, Java, the harness), the machine, when it
ran, every figure of the figure registry (harness/results/figures.py), the verdict (its status:
PASS, FAIL or UNKNOWN), the event counts and the faults asked and seen.

A series is what can be compared: one case of one scenario hash, quick or not,
- on one machine (CPU model, usable CPUs, memory: harness/history/machine.py), for the figures
  that are absolute times and rates: a night on another machine starts or joins that machine's
  series, never mixed into another's;
- on every machine, for the figures that travel (`Figure.travels`: ratios to references
  measured on the same machine) and for correctness, which no machine excuses.
A version change (Spark, Kafka, Delta, Java, Python) stays in the series and is marked: a
Spark upgrade that slows the pipeline is what a nightly exists to catch.
"""

from __future__ import annotations

import json
import os
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.errors import HarnessError
from harness.results import figures
from harness.results.figures import Figure
from harness.results.machine import Machine
from harness.results.verdict import FAIL, PASS, UNKNOWN, worst

FORMAT = 1
VERSIONS = ("spark", "kafka", "delta", "python", "java", "harness")


def moved_versions(a: dict, b: dict) -> list[str]:
    """The versions that changed from `a` to `b`; one an older summary.json did not record
    (delta before schema 3) is unknown there, not a change."""
    return [k for k in VERSIONS if a.get(k) is not None and a.get(k) != b.get(k)]


ENDED_EARLY = ("aborted", "error")   # a run's status when not every case ran


def verdict_status(verdict: dict) -> str:
    """An entry's verdict status; an entry written before the status was kept derives it as
    summary.json does: held is PASS, an unchecked output UNKNOWN, else FAIL."""
    if verdict.get("status"):
        return str(verdict["status"])
    if not verdict.get("holds"):
        return FAIL
    return UNKNOWN if verdict.get("observed") == "unchecked" else PASS


@dataclass(frozen=True)
class Entry:
    """One case of one run, as the history keeps it."""

    run_id: str
    started_at: str
    scenario: str
    scenario_hash: str
    quick: bool
    case: str                    # the case's series (its name without the -r<k> of --repeat)
    repeat: int
    commit: str | None
    dirty: bool | None
    versions: dict
    machine: dict                # cpus, cpus_usable, memory_bytes, cpu_model, spark_master
    figures: dict                # figure name -> value (None: not measured)
    verdict: dict                # expected, observed, holds, status, detail
    events: dict                 # expected, lost, duplicated, unexpected
    faults: dict                 # asked, seen, kinds_not_seen
    status: str                  # the run's: completed, aborted, error, schedule-missed
    report: str | None = None    # where its report.html is (a path or a URL)
    flake_rate: float | None = None   # a hunt's shrinking flake rate, where the run was a hunt

    @property
    def workload(self) -> tuple[str, str, bool]:
        """What ran: the same scenario, hash, quick or not."""
        return (self.scenario, self.scenario_hash, self.quick)

    @property
    def on(self) -> Machine:
        return Machine.of(self.machine)

    @property
    def verdict_status(self) -> str:
        """The case's verdict, UNKNOWN where it passed in a run that ended early (aborted, or an
        error after this case): the run's other cases never ran, so the night is not a pass."""
        return UNKNOWN if self.passed_in_a_run_cut_short else verdict_status(self.verdict)

    @property
    def passed_in_a_run_cut_short(self) -> bool:
        """The case passed, but its run ended early (aborted, or an error after this case)."""
        return self.status in ENDED_EARLY and verdict_status(self.verdict) == PASS

    def judged(self, figure: Figure) -> float | None:
        """The value of `figure` that is judged (the registry's rule: a count the guarantee allows
        is not; at-most-once's throughput with what it lost counted back)."""
        return figure.judged_value(self.figures.get(figure.name), self.verdict.get("expected"), self.events)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Entry:
        return cls(**d)


@dataclass(frozen=True)
class Night:
    """One run of a series: its entries' values for one case (the median over --repeat runs)."""

    run_id: str
    started_at: str
    commit: str | None
    dirty: bool | None
    versions: dict
    machine: dict
    report: str | None
    entries: tuple[Entry, ...]
    _values: dict = field(default_factory=dict, compare=False, repr=False)   # figure -> value, read once

    @property
    def on(self) -> Machine:
        return Machine.of(self.machine)

    def value(self, figure: str) -> float | None:
        """The judged value of `figure` (the median of the night's runs), None where not judged."""
        if figure not in self._values:
            values = self.values(figure)
            self._values[figure] = statistics.median(values) if values else None
        return self._values[figure]

    def values(self, figure: str) -> list[float]:
        """Each run's judged value of `figure` this night (several with --repeat)."""
        f = figures.figure(figure)
        return [v for v in (e.judged(f) for e in self.entries) if v is not None]

    @property
    def status(self) -> str:
        """The night's verdict: the worst of its runs' (FAIL, UNKNOWN, PASS)."""
        return worst(e.verdict_status for e in self.entries)

    @property
    def expected(self) -> str:
        return str(self.entries[0].verdict.get("expected") or "?")

    def count(self, key: str) -> int | None:
        values = [int(v) for v in (e.events.get(key) for e in self.entries) if v is not None]
        return max(values) if values else None

    @property
    def date(self) -> str:
        """"11-26 08:15"."""
        return self.started_at[5:16].replace("T", " ")

    def text(self) -> str:
        """"2026-11-26 08:15, run 20261126T081520-bench-a1f6, commit eb40def"."""
        when = self.started_at[:16].replace("T", " ")
        return f"{when}, run {self.run_id}, commit {(self.commit or '?')[:7]}"


@dataclass
class Series:
    """One case of one scenario hash, night by night in time order: on one machine (`machine`),
    or on every machine (`machine` None: the figures that travel, and correctness)."""

    scenario: str
    scenario_hash: str
    quick: bool
    case: str
    machine: Machine | None
    nights: list[Night] = field(default_factory=list)

    @property
    def label(self) -> str:
        quick = " (quick)" if self.quick else ""
        return f"{self.scenario}{quick} {self.case} {self.where}"

    @property
    def where(self) -> str:
        return f"on {self.machine.text()}" if self.machine else "on every machine"

    @property
    def group(self) -> tuple:
        """The series whose noise is pooled: one workload on one machine (or on every one)."""
        return (self.scenario, self.scenario_hash, self.quick, self.machine)

    @property
    def anchor(self) -> str:
        """An id for its part of the trend page."""
        where = "all" if self.machine is None else "-".join(
            "".join(ch for ch in str(x) if ch.isalnum()) for x in (self.machine.cpu_model,
                                                                   self.machine.cpus_usable,
                                                                   self.machine.memory_gib))
        return f"s-{self.scenario_hash}-{'q' if self.quick else 'f'}-{self.case}-{where}"

    def judges(self, figure: Figure) -> bool:
        """Whether this series judges `figure`'s speed: an absolute figure on one machine, a
        figure that travels on every machine. A count some guarantee allows (lost, duplicated)
        is correctness's: above 0 where forbidden it is a FAIL, and not judged where allowed."""
        return (figure.better is not None and figure.allowed_under is None
                and figure.travels == (self.machine is None))

    def values(self, figure: str) -> list[float | None]:
        return [n.value(figure) for n in self.nights]


def entries_of(summary_path: Path, report: str | None = None) -> list[Entry]:
    """The entries of one run, from its summary.json (any version the harness reads)."""
    from harness.results import summary as summary_mod

    try:
        run = summary_mod.load(summary_path)
    except (ValueError, KeyError, TypeError) as exc:
        raise HarnessError(f"{summary_path}: not a summary this harness reads ({exc})",
                           "add run directories written by `python -m harness run`") from None
    env, scenario = run.environment, run.scenario
    if not scenario.get("hash"):
        raise HarnessError(f"{summary_path}: the run records no scenario hash (summary.json version "
                           f"{run.schema_version})",
                           "add runs written by a harness of schema version 3 or later")
    report = report or (str(summary_path.parent / "report.html")
                        if (summary_path.parent / "report.html").exists() else None)
    flake = ((run.sections.get("hunt") or {}).get("shrink") or {}).get("flake_rate")
    out = []
    for case in run.cases:
        asked = [f for f in case.faults]
        seen = [f for f in asked if f.observed]
        out.append(Entry(
            run_id=run.run_id, started_at=run.started_at, scenario=str(scenario.get("name")),
            scenario_hash=str(scenario["hash"]), quick=bool(scenario.get("quick")),
            case=case.series or case.name, repeat=case.repeat,
            commit=env.get("git_sha"), dirty=env.get("git_dirty"),
            versions={k: env.get(k) for k in VERSIONS},
            machine={"cpus": env.get("cpus"), "cpus_usable": env.get("cpus_usable") or env.get("cpus"),
                     "memory_bytes": env.get("memory_bytes"), "cpu_model": env.get("cpu_model"),
                     "spark_master": env.get("spark_master")},
            figures={f.name: f.value(case) for f in figures.FIGURES},
            verdict={"expected": case.verdict.expected, "observed": case.verdict.observed,
                     "holds": case.verdict.holds, "status": case.verdict.status,
                     "detail": case.verdict.detail},
            events={k: case.events.get(k) for k in ("expected", "lost", "duplicated", "unexpected")},
            faults={"asked": len(asked), "seen": len(seen),
                    "not_seen": sorted({f.kind for f in asked if not f.observed})},
            status=run.status, report=report, flake_rate=flake))
    return out


@dataclass(frozen=True)
class Added:
    """What `add` did with one run: added it, or found it there already (nothing written)."""

    run_id: str
    entries: list[Entry]
    already: bool = False

    def text(self) -> str:
        e = self.entries[0]
        what = (f"{len(self.entries)} case(s) of {e.scenario} (hash {e.scenario_hash}, commit "
                f"{(e.commit or '?')[:7]}, {e.on.text()})")
        if self.already:
            return f"run {self.run_id} is in the history already: nothing added ({what})"
        return f"added run {self.run_id}: {what}"


class Store:
    """The directory of the history: `history.json` (its format) and `runs/<run id>.json`."""

    def __init__(self, path: Path):
        self.path = Path(path)

    @property
    def runs_dir(self) -> Path:
        return self.path / "runs"

    def exists(self) -> bool:
        return (self.path / "history.json").is_file()

    def require(self) -> Store:
        if not self.exists():
            inside = sorted(p.parent for p in self.path.glob("*/history.json")) if self.path.is_dir() else []
            if inside:
                raise HarnessError(f"{self.path}: not a history store (no history.json there); "
                                   f"{inside[0]} is one",
                                   f"give the store itself: {inside[0]}")
            raise HarnessError(f"{self.path}: not a history store (no history.json there)",
                               f"give the store's directory, or start one with: "
                               f"python -m harness history add {self.path} RUN_DIR")
        return self

    def add(self, *run_dirs: Path, report: str | None = None) -> list[Added]:
        """Append runs (directories or summary.json files), all or none: every run is read
        before any is written, and a run that cannot be read adds nothing. A run that is there
        already is left as it was (`Added.already`), so that a retried night completes."""
        read: dict[str, list[Entry]] = {}
        for run_dir in run_dirs:
            entries = _read(Path(run_dir), report)
            read.setdefault(entries[0].run_id, entries)
        out = [Added(run_id, entries, self._target(run_id).exists()) for run_id, entries in read.items()]
        self._write([a for a in out if not a.already])
        return out

    def _target(self, run_id: str) -> Path:
        return self.runs_dir / f"{run_id}.json"

    def _write(self, added: list[Added]) -> None:
        """Each run to a temporary file first, then all renamed into place; on an error, none
        of them stays (a night half-written is never read)."""
        if not added:
            return
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        if not self.exists():
            about = {"format": FORMAT, "what": "the nightly history of python -m harness history"}
            (self.path / "history.json").write_text(json.dumps(about, indent=2) + "\n")
        tmps = [self._target(a.run_id).with_suffix(".tmp") for a in added]
        done: list[Path] = []
        try:
            for a, tmp in zip(added, tmps, strict=True):
                run = {"run_id": a.run_id, "entries": [e.to_json() for e in a.entries]}
                tmp.write_text(json.dumps(run, indent=1) + "\n")
            for a, tmp in zip(added, tmps, strict=True):
                os.replace(tmp, self._target(a.run_id))
                done.append(self._target(a.run_id))
        except BaseException:
            for path in [*tmps, *done]:
                path.unlink(missing_ok=True)
            raise

    def entries(self) -> list[Entry]:
        self.require()
        out: list[Entry] = []
        for path in sorted(self.runs_dir.glob("*.json")) if self.runs_dir.is_dir() else []:
            try:
                out += [Entry.from_json(e) for e in json.loads(path.read_text())["entries"]]
            except (ValueError, KeyError, TypeError) as exc:
                raise HarnessError(f"{path}: not a run of the history ({exc})",
                                   "remove the file, or add the run again from its run directory") from None
        if not out:
            raise HarnessError(f"{self.path}: the history has no runs (history.json and nothing else)",
                               f"add a night first: python -m harness history add {self.path} RUN_DIR")
        return out

    def series(self) -> list[Series]:
        """Every series, its nights in the order they ran: each case on each machine, then
        each case on every machine."""
        return group(self.entries())


def _read(run_dir: Path, report: str | None) -> list[Entry]:
    summary_path = run_dir / "summary.json" if run_dir.is_dir() else run_dir
    if not summary_path.is_file():
        raise HarnessError(f"{run_dir}: no summary.json there; nothing was added",
                           "give run directories or their summary.json files, then add them all again")
    entries = entries_of(summary_path, report)
    if not entries:
        raise HarnessError(f"{run_dir}: the run has no cases; nothing was added",
                           "add runs that ran their cases")
    return entries


def group(entries: Iterable[Entry]) -> list[Series]:
    """The series of these entries: per case, one on each machine, and one on every machine."""
    by: dict[tuple, dict[str, list[Entry]]] = defaultdict(lambda: defaultdict(list))
    for e in entries:
        by[(*e.workload, e.case, e.on)][e.run_id].append(e)
        by[(*e.workload, e.case, None)][e.run_id].append(e)
    out = []
    for (scenario, h, quick, case, machine), runs in sorted(by.items(), key=lambda kv: _order(kv[0])):
        nights = [Night(es[0].run_id, es[0].started_at, es[0].commit, es[0].dirty, es[0].versions,
                        es[0].machine, es[0].report, tuple(sorted(es, key=lambda e: e.repeat)))
                  for es in runs.values()]
        nights.sort(key=lambda n: (n.started_at, n.run_id))
        out.append(Series(scenario, h, quick, case, machine, nights))
    return out


def _order(key: tuple) -> tuple:
    scenario, h, quick, case, machine = key
    return (scenario, h, quick, machine is None, repr(machine), case)
