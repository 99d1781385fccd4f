"""The history store: a directory that `python -m harness history add STORE RUN_DIR...` appends
runs to, one JSON file a run (`runs/<run id>.json`), so that a CI cache, an artifact or a branch
carries it from night to night and two nights never write the same file.

An entry is one case of one run: the scenario (name, hash, quick), the case's series and repeat,
the commit, the versions (Spark, Kafka, Delta, Python, Java, the harness), the machine, when it
ran, every figure of the figure registry (harness/results/figures.py), the verdict, the event
counts and the faults asked and seen. A series is one case's figure over the runs of one
scenario hash on one kind of machine (its usable CPUs): a run of another hash starts a new
series, never mixed into the old one.
"""

from __future__ import annotations

import json
import os
import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.errors import HarnessError
from harness.results import figures

FORMAT = 1
VERSIONS = ("spark", "kafka", "delta", "python", "java", "harness")


def moved_versions(a: dict, b: dict) -> list[str]:
    """The versions that changed from `a` to `b`; one an older summary.json did not record
    (delta before schema 3) is unknown there, not a change."""
    return [k for k in VERSIONS if a.get(k) is not None and a.get(k) != b.get(k)]


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
    verdict: dict                # expected, observed, holds
    events: dict                 # expected, lost, duplicated, unexpected
    faults: dict                 # asked, seen, kinds_not_seen
    status: str
    report: str | None = None    # where its report.html is (a path or a URL)
    flake_rate: float | None = None   # a hunt's shrinking flake rate, where the run was a hunt

    @property
    def series_key(self) -> tuple[str, str, bool, int]:
        """Runs comparable with each other: the same scenario, hash, quick or not, and CPUs."""
        return (self.scenario, self.scenario_hash, self.quick, int(self.machine.get("cpus_usable") or 0))

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

    def value(self, figure: str) -> float | None:
        values = [float(v) for v in (e.figures.get(figure) for e in self.entries) if v is not None]
        return statistics.median(values) if values else None

    @property
    def holds(self) -> bool:
        return all(e.verdict.get("holds") for e in self.entries)

    def count(self, key: str) -> int | None:
        values = [int(v) for v in (e.events.get(key) for e in self.entries) if v is not None]
        return max(values) if values else None


@dataclass
class Series:
    """One case of one scenario hash on one kind of machine, night by night in time order."""

    scenario: str
    scenario_hash: str
    quick: bool
    cpus: int
    case: str
    nights: list[Night] = field(default_factory=list)

    @property
    def label(self) -> str:
        quick = " (quick)" if self.quick else ""
        return f"{self.scenario}{quick} {self.case}"

    def values(self, figure: str) -> list[float | None]:
        return [n.value(figure) for n in self.nights]


def entries_of(summary_path: Path, report: str | None = None) -> list[Entry]:
    """The entries of one run, from its summary.json (any version the harness reads)."""
    from harness.results import summary as summary_mod

    run = summary_mod.load(summary_path)
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
                     "holds": case.verdict.holds},
            events={k: case.events.get(k) for k in ("expected", "lost", "duplicated", "unexpected")},
            faults={"asked": len(asked), "seen": len(seen),
                    "not_seen": sorted({f.kind for f in asked if not f.observed})},
            status=run.status, report=report, flake_rate=flake))
    return out


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
            raise HarnessError(f"{self.path}: not a history store (no history.json there)",
                               f"create it with: python -m harness history add {self.path} RUN_DIR")
        return self

    def add(self, run_dir: Path, report: str | None = None) -> list[Entry]:
        """Append one run (its directory or its summary.json); refused when it is there already."""
        run_dir = Path(run_dir)
        summary_path = run_dir / "summary.json" if run_dir.is_dir() else run_dir
        if not summary_path.is_file():
            raise HarnessError(f"{run_dir}: no summary.json there",
                               "give a run directory or its summary.json")
        entries = entries_of(summary_path, report)
        if not entries:
            raise HarnessError(f"{run_dir}: the run has no cases", "add a run that ran its cases")
        run_id = entries[0].run_id
        target = self.runs_dir / f"{run_id}.json"
        if target.exists():
            raise HarnessError(f"run {run_id} is in the history already ({target})",
                               "add each run once; a run of the same commit again is a new run (A/A)")
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        if not self.exists():
            about = {"format": FORMAT, "what": "the nightly history of python -m harness history"}
            (self.path / "history.json").write_text(json.dumps(about, indent=2) + "\n")
        tmp = target.with_suffix(".tmp")
        run = {"run_id": run_id, "entries": [e.to_json() for e in entries]}
        tmp.write_text(json.dumps(run, indent=1) + "\n")
        os.replace(tmp, target)   # a night half-written is never read
        return entries

    def entries(self) -> list[Entry]:
        self.require()
        out: list[Entry] = []
        for path in sorted(self.runs_dir.glob("*.json")) if self.runs_dir.is_dir() else []:
            try:
                out += [Entry.from_json(e) for e in json.loads(path.read_text())["entries"]]
            except (ValueError, KeyError, TypeError) as exc:
                raise HarnessError(f"{path}: not a run of the history ({exc})",
                                   "remove the file, or add the run again from its run directory") from None
        return out

    def series(self) -> list[Series]:
        """Every series, its nights in the order they ran."""
        return group(self.entries())


def group(entries: list[Entry]) -> list[Series]:
    by: dict[tuple, dict[str, list[Entry]]] = defaultdict(lambda: defaultdict(list))
    for e in entries:
        by[(*e.series_key, e.case)][e.run_id].append(e)
    out = []
    for (scenario, h, quick, cpus, case), runs in sorted(by.items()):
        nights = [Night(es[0].run_id, es[0].started_at, es[0].commit, es[0].dirty, es[0].versions,
                        es[0].machine, es[0].report, tuple(sorted(es, key=lambda e: e.repeat)))
                  for es in runs.values()]
        nights.sort(key=lambda n: (n.started_at, n.run_id))
        out.append(Series(scenario, h, quick, cpus, case, nights))
    return out
