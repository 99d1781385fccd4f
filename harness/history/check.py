"""`python -m harness history check STORE`: the changes of every series, speed and correctness.

It prints, per machine and scenario, the noise of each figure (from A/A nights) and the
smallest change it can tell from that noise within NEWEST nights; then every change found, the
newest first: figure, night, before and after (median and range), size, and the commits and
versions between. Exit 1 when the newest nights hold a change for the worse (speed) or a
correctness flip; 0 when none; 2 on bad input. `--json FILE` writes the same as data, for the
nightly's confirmation job.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from harness.history import changes as changes_mod
from harness.history import correctness, noise
from harness.history.store import Series, Store
from harness.results import figures


@dataclass
class Checked:
    series: list[Series]
    noise: dict[tuple, dict[str, noise.Noise]] = field(default_factory=dict)
    speed: list[changes_mod.Change] = field(default_factory=list)
    flips: list[correctness.Flip] = field(default_factory=list)

    @property
    def alarms(self) -> list:
        """What pages someone: speed changes for the worse among the newest nights, and
        correctness flips among them."""
        newest = [c for c in self.speed if c.worse and changes_mod.newest(c)]
        flipped = [f for f in self.flips if f.night >= len(f.series.nights) - changes_mod.NEWEST]
        return newest + flipped


def check(store: Store) -> Checked:
    series = store.series()
    out = Checked(series)
    by_machine: dict[tuple, list[Series]] = defaultdict(list)
    for s in series:
        by_machine[(s.scenario, s.scenario_hash, s.quick, s.cpus)].append(s)
    for key, group in by_machine.items():
        out.noise[key] = noise.calibrate(group)
        for s in group:
            own = noise.wider(out.noise[key], noise.calibrate([s]))
            out.speed += changes_mod.speed_changes(s, own)
            out.flips += correctness.flips(s)
    return out


def render(checked: Checked) -> str:
    lines: list[str] = []
    for (scenario, h, quick, cpus), table in checked.noise.items():
        key = (scenario, h, quick, cpus)
        nights = max((len(s.nights) for s in checked.series
                      if (s.scenario, s.scenario_hash, s.quick, s.cpus) == key), default=0)
        quick_text = " (quick)" if quick else ""
        lines.append(f"series: {scenario}{quick_text}, hash {h}, {cpus} CPU(s): {nights} nights")
        for f in figures.shown_in(figures.COMPARE):
            told = table.get(f.name)
            if f.better is None or told is None:
                continue
            least = changes_mod.detectable(told.sd)
            within = (f"; smallest change told from it within {changes_mod.NEWEST} nights: {least:.1%}"
                      if least is not None else "")
            lines.append(f"  noise {told.text()}{within}")
    alarms = set(map(id, checked.alarms))
    for c in sorted(checked.speed, key=lambda c: c.run.started_at, reverse=True):
        f = figures.figure(c.figure)
        tag = "ALARM " if id(c) in alarms else ""
        lines.append(f"{tag}{'worse' if c.worse else 'better'}: {c.series.label} {c.figure} from night "
                     f"{c.night + 1} (run {c.run.run_id}, {c.run.started_at}): "
                     f"{_side(f, c.before)} -> {_side(f, c.after)} ({c.size:+.1%}); {c.between()}")
    for flip in sorted(checked.flips, key=lambda x: x.run.started_at, reverse=True):
        tag = "ALARM " if id(flip) in alarms else ""
        lines.append(f"{tag}correctness: {flip.text()} on night {flip.night + 1} (run {flip.run.run_id}, "
                     f"{flip.run.started_at})")
    if not checked.speed and not checked.flips:
        lines.append("no change found")
    n = len(checked.alarms)
    lines.append(f"history: {n} change(s) for the worse in the newest {changes_mod.NEWEST} nights" if n
                 else f"history: no change for the worse in the newest {changes_mod.NEWEST} nights")
    return "\n".join(lines)


def _side(f, side: changes_mod.Side) -> str:
    return f"{f.text(side.median)} [{f.text(side.low)}-{f.text(side.high)}] over {side.nights} night(s)"


def to_json(checked: Checked) -> dict:
    alarms = set(map(id, checked.alarms))
    return {
        "alarms": len(checked.alarms),
        "speed": [{"scenario": c.series.scenario, "case": c.series.case, "figure": c.figure,
                   "night": c.night + 1, "run_id": c.run.run_id, "before_run_id": c.previous.run_id,
                   "before_commit": c.previous.commit, "after_commit": c.run.commit, "worse": c.worse,
                   "size": c.size, "before": vars(c.before), "after": vars(c.after), "between": c.between(),
                   "alarm": id(c) in alarms} for c in checked.speed],
        "correctness": [{"scenario": f.series.scenario, "case": f.series.case, "what": f.what,
                         "before": f.before, "after": f.after, "night": f.night + 1, "run_id": f.run.run_id,
                         "before_commit": f.series.nights[f.night - 1].commit, "after_commit": f.run.commit,
                         "alarm": id(f) in alarms} for f in checked.flips],
        "noise": {f"{k[0]}/{k[1]}/{'quick' if k[2] else 'full'}/{k[3]}cpu": {
            name: {"sd": n.sd, "samples": n.samples, "source": n.source,
                   "detectable": changes_mod.detectable(n.sd)} for name, n in table.items()}
            for k, table in checked.noise.items()},
    }


def write_json(checked: Checked, path: Path) -> None:
    path.write_text(json.dumps(to_json(checked), indent=2, default=str) + "\n")
