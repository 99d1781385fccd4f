"""The result of a run, typed: the run, its cases, their faults, incidents and findings.

Built in one place (harness/run/collect.py for a case, harness/run/runner.py for the
run) and serialised to summary.json with `to_json()`; read back with `from_json()`, from
this schema version or an older one (harness/results/summary.py). Each headline figure
has one accessor, which the figure registry (harness/results/figures.py) reads for the
terminal table, report.html, compare, the history and the pytest plugin:

  CaseResult.throughput       events/s processed, over the measured window
  CaseResult.latency          event-time percentiles, over the output after the warm-up
  CaseResult.recovery_s       the longest any fault's backlog took to drain

A case's sections that no code reads by name beyond the report (batch_time, generator,
resources, spark_settings...) are kept as written, in `sections`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from harness.results import figures


def _get(d: dict | None, *path: str) -> Any:
    for key in path:
        if not isinstance(d, dict) or d.get(key) is None:
            return None
        d = d[key]
    return d


# a verdict's status (harness/results/verdict.py has the rules): UNKNOWN is never a pass
PASS, FAIL, UNKNOWN = "PASS", "FAIL", "UNKNOWN"
STATUSES = (PASS, FAIL, UNKNOWN)
_WORSE = {PASS: 0, UNKNOWN: 1, FAIL: 2}


def worst(statuses) -> str:
    """The status of several verdicts together: FAIL over UNKNOWN over PASS (PASS for none)."""
    return max(statuses, key=_WORSE.__getitem__, default=PASS)


@dataclass
class Verdict:
    """Whether the case's guarantee held, and in one sentence why (not). `status` is PASS, FAIL or
    UNKNOWN; `holds` is True for PASS alone. Built without a status (a summary from before it was
    written), the status is derived: a check that never ran (`observed` unchecked) is UNKNOWN
    unless it failed, else `holds` says PASS or FAIL."""

    expected: str
    observed: str          # exactly-once, at-least-once, at-most-once, none, unchecked
    holds: bool
    detail: str
    status: str = ""

    def __post_init__(self) -> None:
        if not self.status:
            self.status = (FAIL if not self.holds else UNKNOWN if self.observed == "unchecked" else PASS)
        if self.status not in STATUSES:
            raise ValueError(f"verdict status {self.status!r} is none of {', '.join(STATUSES)}")
        self.holds = self.status == PASS

    @classmethod
    def from_json(cls, d: dict) -> Verdict:
        return cls(d["expected"], d["observed"], d["holds"], d["detail"], d.get("status") or "")


@dataclass
class FaultRecord:
    """One fault of the schedule as it was carried out. The runner builds it
    (harness/run/schedule.py); `details` is the kind's own typed record (FaultKind.details)."""

    kind: str
    at_s: float | None                 # as asked, from the first event sent; a progress anchor: when reached
    started_s: float | None
    ended_s: float | None
    target: str
    observed: bool
    detail: str = ""
    spec: dict = field(default_factory=dict)
    recovery: dict = field(default_factory=dict)
    landed: bool | None = None         # None: a summary from before it was recorded
    landed_detail: str | None = None
    outcome: str | None = None         # accepted, ignored, refused: what Spark did with a restart
    outcome_detail: str | None = None
    details: Any = None                # faults.base.Details (the kind's own fields)
    at: str | None = None              # as the scenario wrote it: "5s", "warmup", "batch 2"
    landed_s: float | None = None      # when it took effect (the kill, the hold), from the first event
    missed: str | None = None          # never injected: why its time or anchor did not come in the workload
    # what it changed, for the findings: faults.base.Change.to_json() of each (files, batches)
    changes: list = field(default_factory=list)
    # what the harness knows of its kind (faults.kinds.FaultKind.traits): read back without the
    # scenario, a user's kind is known by them (faults.registry.kind_of)
    traits: dict | None = None

    def __post_init__(self) -> None:
        if self.details is None:
            from faults.base import Details

            self.details = Details()

    @classmethod
    def from_json(cls, d: dict) -> FaultRecord:
        from faults.base import Unknown
        from faults.registry import KINDS

        names = {f.name for f in fields(cls)} - {"details"}
        own = KINDS[d["kind"]].details if d.get("kind") in KINDS else Unknown
        rest = {k: v for k, v in d.items() if k not in names}
        return cls(**{k: v for k, v in d.items() if k in names}, details=own.from_json(rest))

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "details"}
        if not out["spec"]:
            del out["spec"]   # optional in the schema; a scheduled fault always has one
        if not out["changes"]:
            del out["changes"]   # optional: most faults change no file
        out = {k: v for k, v in out.items() if v is not None or k not in _OPTIONAL_FAULT_FIELDS}
        return {**out, **self.details.to_json()}

    @property
    def asked(self) -> str:
        """When the schedule asked for it, as written: "5s", "batch 2"."""
        return self.at if self.at is not None else f"{self.at_s:g}s"

    @property
    def took_effect(self) -> str:
        """When it took effect: "landed 17.3 s", "missed", "not injected"."""
        if self.missed:
            return "missed"
        landed = self.landed_s if self.landed_s is not None else self.started_s
        return "not injected" if landed is None else f"landed {landed:.1f} s"

    @property
    def when(self) -> str:
        """When it was asked and when it took effect: "5s, landed 17.3 s" (the table and report)."""
        return self.asked if self.missed else f"{self.asked}, {self.took_effect}"


_OPTIONAL_FAULT_FIELDS = ("landed", "landed_detail", "outcome", "outcome_detail", "at", "landed_s", "missed",
                          "traits")


@dataclass
class Incident:
    """Something nobody scheduled that happened while the case ran: an executor lost or
    added, a driver or service process that exited."""

    at_s: float | None        # from the first event sent (negative: before it)
    kind: str                 # executor-lost, executor-added, driver-exit, service-exit
    target: str               # "executor 1", "driver (pid 123)", "kafka (pid 456)"
    cause: str                # Spark's reason, the exit code or the signal
    source: str               # where it was seen: "spark" (the driver's listener), "process"
    scheduled: bool = False   # True when a fault of the schedule explains it

    @classmethod
    def from_json(cls, d: dict) -> Incident:
        return cls(at_s=d.get("at_s"), kind=d["kind"], target=d["target"], cause=d["cause"],
                   source=d["source"], scheduled=bool(d.get("scheduled", False)))

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Finding:
    """One class of anomaly in a case's output, with the fewest records that prove it and
    the story of how it came about."""

    cls: str                  # lost, duplicated, unexpected, wrong-value, dropped-late-wrongly...
    count: int
    witness: list[dict] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    checkpoint_files: list[str] = field(default_factory=list)
    story: str = ""

    @classmethod
    def from_json(cls, d: dict) -> Finding:
        return cls(cls=d["class"], count=d["count"], witness=d.get("witness", []), faults=d.get("faults", []),
                   checkpoint_files=d.get("checkpoint_files", []), story=d.get("story", ""))

    def to_json(self) -> dict:
        return {"class": self.cls, "count": self.count, "witness": self.witness, "faults": self.faults,
                "checkpoint_files": self.checkpoint_files, "story": self.story}


@dataclass
class Percentiles:
    """Latency percentiles in ms (None: no output)."""

    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    p999: float | None = None
    max: float | None = None
    count: int | None = None

    @classmethod
    def from_json(cls, d: dict | None) -> Percentiles:
        d = d or {}
        return cls(**{f.name: d.get(f.name) for f in fields(cls)})


@dataclass
class CaseResult:
    """One case of a run: its guarantee, its verdict, what was measured and what happened."""

    name: str
    guarantee: str
    pipeline: str
    sink: str
    events: dict                       # produced, expected, delivered, lost, duplicated, ...
    verdict: Verdict
    throughput_eps: dict
    latency_ms: dict
    backpressure: dict
    faults: list[FaultRecord] = field(default_factory=list)
    series: str = ""
    repeat: int = 1
    error: str | None = None
    latency_measured_ms: dict | None = None
    incidents: list[Incident] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    sections: dict = field(default_factory=dict)   # every other field of summary.json's case

    # -- the headline figures: the only way anything reads them --------------------------
    @property
    def throughput(self) -> float | None:
        """Events/s Spark processed over the measured window (after the warm-up): None when too
        few batches ran in it (not_measured says why); the whole run's rate for a summary
        without a measured window."""
        measured = self.throughput_eps.get("measured")
        if isinstance(measured, dict) and "processed" in measured:
            return measured["processed"]
        return self.throughput_eps.get("processed")

    @property
    def offered(self) -> float | None:
        """Events/s offered over the measured window (the whole run's without one)."""
        measured = _get(self.throughput_eps, "measured", "offered")
        return measured if measured is not None else self.throughput_eps.get("offered")

    @property
    def batch_p50_ms(self) -> float | None:
        """The median time of a batch with input (Spark's triggerExecution)."""
        return _get(self.sections, "batch_time", "phases_ms", "triggerExecution", "median")

    @property
    def latency(self) -> Percentiles:
        """Event-time latency over the output that became visible after the warm-up (all of
        it for a summary that has no measured window)."""
        return self.latency_of("event_time")

    def latency_of(self, kind: str) -> Percentiles:
        """Percentiles of `kind` (event_time, processing_time, event_time_newest), measured."""
        measured = _get(self.latency_measured_ms, kind)
        return Percentiles.from_json(measured if measured is not None else _get(self.latency_ms, kind))

    @property
    def p99_ms(self) -> float | None:
        return self.latency.p99

    def not_measured(self, headline: str) -> str | None:
        """Why the headline figure `headline` (throughput_eps, p99_ms, recovery_s) has no value,
        when it has none: too few batches in the measured window, no fault that drained..."""
        window = self.sections.get("measured_window") or {}
        said = (window.get("not_measured") or {}).get(headline)
        if said:
            return said
        if headline == "recovery_s" and self.faults and self.recovery_s is None:
            notes = [f"{f.kind} ({f.asked}): {f.recovery.get('note')}" for f in self.faults
                     if f.recovery.get("note")]
            return "no fault's backlog drained to its level before it" + (f": {notes[0]}" if notes else "")
        return None

    @property
    def recovery_s(self) -> float | None:
        """The longest time any fault's backlog took to drain (from the fault's start until
        the lag was back at its level before it); None without a fault that drained."""
        times = [t for t in (f.recovery.get("lag_recovered_s") for f in self.faults) if t is not None]
        if times:
            return max(times)
        return self.backpressure.get("recovery_s")

    def __repr__(self) -> str:
        """What a failed assertion on the case shows: its verdict, and each finding's story."""
        verdict = self.verdict
        lines = [f"<case {self.name}: {self.guarantee}, observed {verdict.observed}: {verdict.detail}"]
        lines += [f"  {f.cls} ({f.count:,}): {f.story}" for f in self.findings]
        return "\n".join(lines) + ">"

    @property
    def missed(self) -> list[FaultRecord]:
        """The faults whose time or anchor did not come while the workload was sent: the schedule
        did not fit the run (the run's status is schedule-missed), so the case did not run what it
        was asked to: its verdict is UNKNOWN unless it failed (it says nothing of the pipeline)."""
        return [f for f in self.faults if f.missed]

    @property
    def workload_text(self) -> str | None:
        """How long the workload was sent, when that is not simply its duration: "sent for 64 s
        (its 55 s duration + 9 s: a fault had not been read past)", or cut at its cap. None when it
        was sent for its duration (or a summary from before the workload could wait)."""
        w = self.sections.get("workload") or {}
        extended, sent = w.get("extended_by_s") or 0, w.get("sent_for_s")
        if sent is None or (not extended and not w.get("cut_at_max_duration")):
            return None
        cut = (f", cut at max_duration ({w.get('max_duration_s'):g} s)" if w.get("cut_at_max_duration")
               else "")
        return (f"workload sent for {sent:g} s (its {w.get('duration_s'):g} s duration + {extended:g} s"
                f"{cut}): {w.get('why')}")

    @property
    def lost(self) -> int:
        return int(self.events.get("lost") or 0)

    @property
    def duplicated(self) -> int:
        return int(self.events.get("duplicated") or 0)

    # -- JSON ------------------------------------------------------------------------------
    @classmethod
    def from_json(cls, d: dict) -> CaseResult:
        known = {f.name for f in fields(cls)} - {"sections"}
        typed = {k: v for k, v in d.items() if k in known}
        typed.update(
            verdict=Verdict.from_json(d["verdict"]),
            faults=[FaultRecord.from_json(f) for f in d.get("faults", [])],
            incidents=[Incident.from_json(i) for i in d.get("incidents", [])],
            findings=[Finding.from_json(f) for f in d.get("findings", [])])
        return cls(**typed, sections={k: v for k, v in d.items() if k not in known})

    def to_json(self) -> dict:
        out: dict[str, Any] = {"name": self.name, "series": self.series or self.name, "repeat": self.repeat,
                               "guarantee": self.guarantee, "pipeline": self.pipeline, "sink": self.sink}
        out.update(self.sections)
        out.update({"faults": [f.to_json() for f in self.faults],
                    "incidents": [i.to_json() for i in self.incidents],
                    "findings": [f.to_json() for f in self.findings],
                    "error": self.error, "events": self.events, "verdict": asdict(self.verdict),
                    "throughput_eps": self.throughput_eps, "latency_ms": self.latency_ms,
                    "backpressure": self.backpressure})
        if self.latency_measured_ms is not None:
            out["latency_measured_ms"] = self.latency_measured_ms
        out["headline"] = figures.headline(self)
        return out


@dataclass
class RunResult:
    """One run: what ran, where, and each case's result."""

    run_id: str
    status: str                         # completed, aborted, error
    scenario: dict
    environment: dict
    cases: list[CaseResult] = field(default_factory=list)
    error: str | None = None
    started_at: str = ""
    ended_at: str = ""
    schema_version: int = 0             # the version it was read from; written as the current one
    sections: dict = field(default_factory=dict)   # watermark_sweep, sustain, hunt...

    def case(self, name: str) -> CaseResult:
        """The case `name` (a KeyError lists the cases there are)."""
        for c in self.cases:
            if c.name == name:
                return c
        names = ", ".join(c.name for c in self.cases)
        raise KeyError(f"no case {name!r} in run {self.run_id} (cases: {names})")

    @property
    def holds(self) -> bool:
        """Every case's verdict held (PASS: an UNKNOWN one did not)."""
        return all(c.verdict.holds for c in self.cases)

    @property
    def verdict_status(self) -> str:
        """The worst of the cases' verdicts: FAIL, else UNKNOWN, else PASS (the CLI's exit 1, 4, 0)."""
        return worst(c.verdict.status for c in self.cases)

    @classmethod
    def from_json(cls, d: dict) -> RunResult:
        known = {f.name for f in fields(cls)} - {"sections", "cases"}
        typed = {k: v for k, v in d.items() if k in known}
        return cls(**typed, cases=[CaseResult.from_json(c) for c in d.get("cases", [])],
                   sections={k: v for k, v in d.items() if k not in known | {"cases"}})

    def to_json(self, version: int) -> dict:
        return {"schema_version": version, "run_id": self.run_id, "status": self.status,
                "scenario": self.scenario, "environment": self.environment,
                "cases": [c.to_json() for c in self.cases], "error": self.error,
                "started_at": self.started_at, "ended_at": self.ended_at, **self.sections}

