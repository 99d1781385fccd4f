"""`python -m harness history check STORE`: the changes of every series, speed and correctness.

Its first line is the answer: ALARM (a FAIL, a correctness flip or a change for the worse in
speed among the newest NEWEST nights; a FAIL stays until its case has run again), CANNOT
JUDGE (no alarm, but a night whose verdict is UNKNOWN among them), or OK; and, when some
series has too few nights or no noise estimate to judge its speed yet, which ones (exit 0 for
speed alone, never for correctness). Then every
alarm, FAILs first; per workload and machine, the noise of each figure and which estimate it
is (harness/history/noise.py) with the smallest change it can tell within NEWEST nights; then
every change found, the newest first.

Exit codes: 1 an alarm; 4 no alarm, but a night that cannot be judged (UNKNOWN, as `run`'s 4);
0 neither; 2 bad input (no store, no runs in it, a run file it cannot read). `--json FILE`
writes the same as data, for the nightly's confirmation job.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from harness.history import changes as changes_mod
from harness.history import correctness, noise
from harness.history.noise import Noise
from harness.history.store import Entry, Series, Store, group
from harness.results import figures

NEWEST = changes_mod.NEWEST


@dataclass
class Checked:
    series: list[Series]
    noise: dict[int, dict[str, Noise]] = field(default_factory=dict)   # id(series) -> figure -> noise
    speed: list[changes_mod.Change] = field(default_factory=list)
    flips: list[correctness.Flip] = field(default_factory=list)
    # per scenario (its name, quick or not), its newest NEWEST runs: what a check alarms on
    recent: dict[tuple, set[str]] = field(default_factory=dict)

    def live(self, s: Series) -> bool:
        """Whether the series ran among its scenario's newest NEWEST runs: a series that has
        not (a scenario hash since changed, a machine not seen lately) raises nothing new."""
        return s.nights[-1].run_id in self.recent.get((s.scenario, s.quick), set())

    def recent_night(self, flip: correctness.Flip) -> bool:
        """Whether the flip's night is in the window `check` alarms on: among its scenario's newest
        NEWEST runs; and a FAIL stays in it until a newer night of its case has run. Runs that
        did not run the case (aborted early, a --case run, an A/A night of another case) never
        push its FAIL out: it leaves only once the case ran again (its scenario's hash may have
        changed since: the case is judged as it runs now)."""
        if flip.run.run_id in self.recent.get((flip.series.scenario, flip.series.quick), set()):
            return True
        return flip.fail and not self.ran_again(flip)

    def ran_again(self, flip: correctness.Flip) -> bool:
        """Whether the flip's case has a night newer than the flip's: in its series, or in the
        same case of its scenario under a newer hash (nights are ordered by start, then run id)."""
        s, then = flip.series, (flip.run.started_at, flip.run.run_id)
        same_case = (o for o in self.series if o.machine is None
                     and (o.scenario, o.quick, o.case) == (s.scenario, s.quick, s.case))
        return any((n.started_at, n.run_id) > then for o in same_case for n in o.nights)

    def alarmed(self, c: changes_mod.Change) -> bool:
        """A change `check` alarms on: for the worse, among the newest nights, settled, live."""
        return c.alarm and self.live(c.series)

    def pending(self, c: changes_mod.Change) -> bool:
        """A change for the worse among the newest nights, not settled yet."""
        return c.worse and c.newest and not c.settled and self.live(c.series)

    def noise_of(self, s: Series) -> dict[str, Noise]:
        return self.noise.get(id(s), {})

    @property
    def failures(self) -> list[correctness.Flip]:
        """Correctness findings among the newest nights that alarm: a FAIL, a flip."""
        return [f for f in self.flips if self.recent_night(f) and not f.unknown]

    @property
    def unknown(self) -> list[correctness.Flip]:
        """Nights among the newest whose verdict is UNKNOWN: they cannot be judged."""
        return [f for f in self.flips if self.recent_night(f) and f.unknown]

    @property
    def alarms(self) -> list:
        """What pages someone: FAILs and correctness flips among the newest nights (FAILs
        first), then speed changes for the worse among them, settled."""
        fails = sorted(self.failures, key=lambda f: not f.fail)
        return [*fails, *(c for c in self.speed if self.alarmed(c))]

    @property
    def unjudged(self) -> list[tuple[Series, str]]:
        """Series whose speed cannot be judged yet, and why."""
        out = []
        for s in filter(self.live, self.series):
            judged = [f for f in figures.compared() if s.judges(f) and any(s.values(f.name))]
            if not judged:
                continue
            nights = sum(1 for n in s.nights if any(n.value(f.name) is not None for f in judged))
            if nights < changes_mod.MIN_NIGHTS:
                out.append((s, f"{nights} night{'s' if nights != 1 else ''} (speed is judged from "
                               f"{changes_mod.MIN_NIGHTS})"))
            elif all((self.noise_of(s).get(f.name) or Noise(f.name, None)).sd is None for f in judged):
                out.append((s, "noise unknown: no A/A nights, no repeats, fewer than "
                               f"{noise.MIN_DIFFS + 1} nights"))
        return out

    @property
    def exit_code(self) -> int:
        return 1 if self.alarms else 4 if self.unknown else 0


def check(store: Store) -> Checked:
    return check_entries(store.entries())


def check_entries(entries: list[Entry]) -> Checked:
    """Speed per series (each machine's, and every machine's for the figures that travel),
    correctness per case on every machine."""
    series = group(entries)
    out = Checked(series)
    runs: dict[tuple, dict[str, str]] = defaultdict(dict)
    for e in entries:
        runs[(e.scenario, e.quick)][e.run_id] = e.started_at
    out.recent = {w: set(sorted(r, key=lambda k: (r[k], k))[-NEWEST:]) for w, r in runs.items()}
    pools: dict[tuple, list[Series]] = defaultdict(list)
    for s in series:
        pools[s.group].append(s)
    judged = figures.compared()
    pooled = {(g, f.name): noise.from_aa(members, f.name) for g, members in pools.items() for f in judged}
    for s in series:
        out.noise[id(s)] = {f.name: noise.calibrate(s, pooled[(s.group, f.name)], f.name)
                            for f in judged if s.judges(f)}
        out.speed += changes_mod.speed_changes(s, out.noise[id(s)])
        if s.machine is None:
            out.flips += correctness.flips(s)
    return out


def headline(checked: Checked) -> str:
    """The first line: the answer, and what could not be judged."""
    fails = [f for f in checked.failures if f.fail]
    if checked.alarms:
        parts = [f"{len(fails)} FAIL(s)"] if fails else []
        flips = len(checked.failures) - len(fails)
        parts += [f"{flips} correctness flip(s)"] if flips else []
        worse = sum(1 for c in checked.speed if checked.alarmed(c))
        parts += [f"{worse} change(s) for the worse in speed"] if worse else []
        line = f"ALARM: {', '.join(parts)} in the newest {NEWEST} nights"
    elif checked.unknown:
        line = (f"CANNOT JUDGE: {len(checked.unknown)} night(s) with an UNKNOWN verdict in the newest "
                f"{NEWEST} nights; no FAIL, no change for the worse")
    else:
        line = f"OK: no FAIL and no change for the worse in the newest {NEWEST} nights"
    unjudged = checked.unjudged
    if unjudged:
        where: dict[str, int] = {}
        for s, why in unjudged:
            key = f"{s.where}: {why}"
            where[key] = where.get(key, 0) + 1
        line += (f"; speed not judged yet in {len(unjudged)} series: "
                 + "; ".join(f"{key}, {n} case(s)" for key, n in where.items()))
    return line


def render(checked: Checked) -> str:
    lines = [headline(checked)]
    lines += [_alarm_text(a) for a in checked.alarms]
    lines += [f"cannot judge: {f.text()} on {f.run.text()}" for f in checked.unknown]
    lines += _noise_lines(checked)
    pending = [c for c in checked.speed if checked.pending(c)]
    lines += [f"pending ({c.after.nights} of {changes_mod.MIN_AFTER} nights at the new level): "
              + _change_text(c) for c in pending]
    listed = {id(c) for c in pending} | {id(a) for a in checked.alarms}
    for c in sorted(checked.speed, key=lambda c: c.run.started_at, reverse=True):
        if id(c) not in listed:
            lines.append(f"{'worse' if c.worse else 'better'}: {_change_text(c)}")
    for flip in sorted(checked.flips, key=lambda x: x.run.started_at, reverse=True):
        if id(flip) not in listed and not checked.recent_night(flip):
            lines.append(f"correctness (an older night): {flip.text()} on {flip.run.text()}")
    if not checked.speed and not checked.flips:
        lines.append("no change found")
    return "\n".join(lines)


def _alarm_text(a) -> str:
    if isinstance(a, correctness.Flip):
        kind = "FAIL" if a.fail else "correctness"
        return f"ALARM {kind}: {a.text()} on {a.run.text()}"
    return f"ALARM worse: {_change_text(a)}"


def _change_text(c: changes_mod.Change) -> str:
    f = figures.figure(c.figure)
    told = f"; noise {c.noise.sd:.1%} from {c.noise.source}" if c.noise and c.noise.sd is not None else ""
    return (f"{c.series.label}: {f.label} {c.size:+.1%} since night {c.night + 1} ({c.run.text()}): "
            f"{_side(f, c.before)} -> {_side(f, c.after)}; {c.between()}{told}")


def _noise_lines(checked: Checked) -> list[str]:
    """Per workload and machine: each figure's noise, which estimate, and what it can tell."""
    lines = []
    pools: dict[tuple, list[Series]] = defaultdict(list)
    for s in checked.series:
        pools[s.group].append(s)
    for (scenario, h, quick, machine), members in pools.items():
        where = f"on {machine.text()}" if machine else "on every machine (figures that travel)"
        nights = max(len(s.nights) for s in members)
        quick_text = " (quick)" if quick else ""
        lines.append(f"series: {scenario}{quick_text}, hash {h}, {where}: {nights} night(s), "
                     f"{len(members)} case(s)")
        for f in figures.compared():
            told: dict[str, tuple[Noise, list[str]]] = {}
            for s in members:
                n = checked.noise_of(s).get(f.name)
                if n is not None and any(v is not None for v in s.values(f.name)):
                    told.setdefault(n.text(), (n, []))[1].append(s.case)
            for text, (n, cases) in told.items():
                who = "" if len(told) == 1 else f" [{', '.join(cases)}]"
                least = changes_mod.detectable(n.sd)
                within = (f"; smallest change told from it within {NEWEST} nights: {least:.1%}"
                          if least is not None else "; speed not judged")
                lines.append(f"  noise {text}{who}{within}")
    return lines


def _side(f, side: changes_mod.Side) -> str:
    return f"{f.text(side.median)} [{f.text(side.low)}-{f.text(side.high)}] over {side.nights} night(s)"


def to_json(checked: Checked) -> dict:
    alarms = {id(a) for a in checked.alarms}
    return {
        "alarms": len(checked.alarms),
        "exit": checked.exit_code,
        "headline": headline(checked),
        "speed": [{"scenario": c.series.scenario, "case": c.series.case, "figure": c.figure,
                   "machine": c.series.machine.text() if c.series.machine else None,
                   "night": c.night + 1, "run_id": c.run.run_id, "before_run_id": c.previous.run_id,
                   "before_commit": c.previous.commit, "after_commit": c.run.commit, "worse": c.worse,
                   "size": c.size, "before": vars(c.before), "after": vars(c.after), "between": c.between(),
                   "settled": c.settled, "alarm": id(c) in alarms,
                   "noise": None if c.noise is None else {"sd": c.noise.sd, "source": c.noise.source}}
                  for c in checked.speed],
        "correctness": [{"scenario": f.series.scenario, "case": f.series.case, "what": f.what,
                         "before": f.before, "after": f.after, "night": f.night + 1, "run_id": f.run.run_id,
                         "before_commit": f.series.nights[f.night - 1].commit if f.night else None,
                         "after_commit": f.run.commit, "fail": f.fail, "unknown": f.unknown,
                         "alarm": id(f) in alarms} for f in checked.flips],
        "unjudged": [{"series": s.label, "why": why} for s, why in checked.unjudged],
        "noise": {s.label: {name: {"sd": n.sd, "samples": n.samples, "source": n.source,
                                   "detectable": changes_mod.detectable(n.sd)}
                            for name, n in checked.noise_of(s).items()} for s in checked.series},
    }


def write_json(checked: Checked, path: Path) -> None:
    path.write_text(json.dumps(to_json(checked), indent=2, default=str) + "\n")


def noise_for(store_path: Path, new, across: bool = False) -> dict[tuple[str, str], float]:
    """The noise of ONE run per (case, figure) that the history at `store_path` measured for run
    `new`'s workload on its machine (on every machine, `across`): what `compare --history` judges
    single runs by. The history measures the noise of one night's value, the median of its
    --repeat runs; it is taken back to one run by the nights' own run count (noise.one_run says
    why), and compare scales it to each side's count."""
    from harness.results.machine import Machine

    checked = check(Store(store_path).require())
    wanted = (new.scenario.get("hash"), bool(new.scenario.get("quick")),
              None if across else Machine.of(new.environment))
    out: dict[tuple[str, str], float] = {}
    for s in checked.series:
        if (s.scenario_hash, s.quick, s.machine) != wanted:
            continue
        for name, n in checked.noise_of(s).items():
            sd = noise.one_run(n, noise.repeats(s, name) or 1.0)
            if sd:
                out[(s.case, name)] = sd
    return out
