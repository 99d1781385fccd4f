"""Which change-point method the nightly history uses, chosen by measurement (issue 28).

Planted histories: nights of one figure at a steady level, each perturbed with the noise
measured in real repeats of the bench (the relative residuals of each case's runs about their
median, pooled per figure family), then a step of a given size at a known night. Each method
looks at the history as `history check` would on each night, and alarms when it places a
change for the worse among the newest three nights.

- detection: a step is caught if an alarm comes on the night of the step or one of the two
  after (within 3 nights), placed within a night of it;
- false alarms: the same on histories without a step, nights 31-60 (30 A/A nights each).

Each method's threshold is set, from a grid, to the most sensitive one whose false alarms
stay at or below 1 in 30 nights; its detection is measured at that setting. Two steps:

    # the noise, from real runs (the harness's env: it reads summary.json through the model)
    .tox/bench/bin/python -m benchmarks.changepoints noise RUN_DIR... > noise.json
    # the methods (an env with ruptures, apache-otava and signal-processing-algorithms,
    # the last two installed with --no-deps: their pins would downgrade numpy)
    python benchmarks/changepoints.py measure noise.json
    # PELT's level length and penalty: false alarms and detection at each
    python benchmarks/changepoints.py sweep noise.json
    # the chosen method at one penalty: false alarms, and the smallest step caught 95%
    python benchmarks/changepoints.py calibrate noise.json 2
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable

import numpy as np

FAMILIES = {"throughput": ("throughput",), "p99": ("p99", "processing_p99"), "recovery": ("recovery",)}
LOWER_IS_WORSE = {"throughput"}
BASE_NIGHTS, AA_NIGHTS, AFTER = 30, 30, 3
MIN_AFTER = int(__import__("os").environ.get("MIN_AFTER", "2"))   # nights after a change before it alarms
MIN_SIZE = int(__import__("os").environ.get("MIN_SIZE", "2"))     # nights a level lasts at least (PELT)
HISTORIES = 200
GOALS = {"throughput": 0.05, "p99": 0.10}   # the step each family's detection is measured at


def _goal_families(noise_file: str) -> dict:
    """The families of a noise file that `measure`, `sweep` and `calibrate` plant steps in."""
    return {k: v for k, v in json.loads(open(noise_file).read()).items() if k in GOALS}


# -- the noise of real runs (needs the harness) -------------------------------------------------
def noise(sources: list[str]) -> dict:
    """Each family's relative residuals: for every case series with k >= 2 runs, each run's
    value over the mean of its series, minus 1, times sqrt(k / (k - 1)) (so that their spread is
    that of a run about the true level, not about a mean that follows it). A source is a run
    directory (its --repeat runs are a series), a summary.json, or a history store (its nights
    of one clean commit are a series: A/A nights). Values are the judged ones
    (harness/report/judge.py: at-most-once's throughput with what it lost counted back)."""
    import statistics
    from collections import defaultdict
    from pathlib import Path

    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    for source in sources:
        for key, name, v in _judged_values(Path(source)):
            for family, names in FAMILIES.items():
                if name in names and v:
                    values[(family, f"{key}/{name}")].append(float(v))
    out: dict[str, list[float]] = defaultdict(list)
    for (family, _), vs in values.items():
        if len(vs) >= 2:
            mean, k = statistics.fmean(vs), len(vs)
            out[family] += [(v / mean - 1) * math.sqrt(k / (k - 1)) for v in vs]
    return {f: {"residuals": r, "sd": float(np.sqrt(np.mean(np.square(r)))), "values": len(r)}
            for f, r in out.items()}


def _judged_values(source):
    """(series key, figure name, judged value) of every run of a run directory, a summary.json
    or a history store."""
    from harness.history.store import Store
    from harness.results import figures, summary

    names = {n for ns in FAMILIES.values() for n in ns}
    if (source / "history.json").is_file():
        for e in Store(source).entries():
            if e.commit and e.dirty is False:
                for name in names:
                    key = f"{e.scenario_hash}/{e.quick}/{e.case}/{e.commit}"
                    yield key, name, e.judged(figures.figure(name))
        return
    result = summary.load(source if source.suffix == ".json" else source / "summary.json")
    scenario = result.scenario
    for case in result.cases:
        for name in names:
            key = f"{scenario.get('name')}/{scenario.get('hash')}/{scenario.get('quick')}/{case.series}"
            yield key, name, figures.figure(name).judged(case)


# -- the methods --------------------------------------------------------------------------------
Method = Callable[[np.ndarray, float, float], list[int]]   # (history, noise sd, threshold) -> indices


def pelt(x: np.ndarray, sd: float, c: float) -> list[int]:
    """PELT with an l2 cost on the history relative to its median, penalty c·sd²·ln n, through
    ruptures' KernelCPD with a linear kernel: the same cost and search as `Pelt(model="l2")`, the
    same change points, in C (0.4 ms for 365 nights, against 110-260 ms for Pelt's Python cost)."""
    import ruptures as rpt

    y = x / np.median(x) - 1
    search = rpt.KernelCPD(kernel="linear", min_size=MIN_SIZE, jump=1).fit(y)
    found = search.predict(pen=c * sd * sd * math.log(len(y)))
    return [int(b) for b in found if b < len(y)]


def otava(x: np.ndarray, sd: float, p: float) -> list[int]:
    """Apache Otava's windowed E-divisive with its t-test merge (max p-value p)."""
    from otava.analysis import compute_change_points

    cps, _ = compute_change_points(x.tolist(), window_len=50, max_pvalue=p, min_magnitude=0.0)
    return [int(c.index) for c in cps]


def edivisive(x: np.ndarray, sd: float, p: float) -> list[int]:
    """MongoDB's signal-processing-algorithms E-divisive, permutation test at p (100 permutations)."""
    from signal_processing_algorithms.determinism import deterministic_numpy_random
    from signal_processing_algorithms.energy_statistics import energy_statistics as es

    with deterministic_numpy_random(1):
        return sorted(int(i) for i in es.e_divisive(x, pvalue=p, permutations=100))


METHODS: dict[str, tuple[Method, list[float], bool]] = {
    # name: (method, its thresholds from most to least sensitive, whether larger is more sensitive)
    "ruptures-pelt": (pelt, [0.5, 0.75, 1, 1.5, 2, 3, 4, 6, 8, 11, 15, 20, 27, 36, 48, 64], False),
    "otava": (otava, [0.3, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001, 0.0005, 0.0002, 0.0001], True),
    "edivisive": (edivisive, [0.5, 0.4, 0.3, 0.2, 0.1, 0.05, 0.02, 0.01], True),
}


def alarms(method: Method, x: np.ndarray, sd: float, t: float, worse_is_lower: bool) -> bool:
    """Whether the check on history `x` alarms: a change point among its newest AFTER nights,
    the nights after it worse than those before."""
    n = len(x)
    for i in method(x, sd, t):
        if n - AFTER <= i <= n - MIN_AFTER:
            before, after = np.median(x[max(0, i - 10):i]), np.mean(x[i:])
            if (after < before) if worse_is_lower else (after > before):
                return True
    return False


def planted(rng: np.random.Generator, residuals: np.ndarray, nights: int, step_at: int | None,
            step: float) -> np.ndarray:
    """A history of `nights` at level 1000, each night's noise drawn from the real residuals
    (resampled, with a random sign); from `step_at` on, the level moved by `step` (a share)."""
    e = rng.choice(residuals, nights) * rng.choice([-1, 1], nights)
    level = np.full(nights, 1000.0)
    if step_at is not None:
        level[step_at:] *= 1 + step
    return level * (1 + e)


def false_alarm_rate(method: Method, t: float, sd: float, residuals: np.ndarray, lower: bool,
                     seed: int) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(HISTORIES):
        x = planted(rng, residuals, BASE_NIGHTS + AA_NIGHTS, None, 0.0)
        nights = range(BASE_NIGHTS + 1, BASE_NIGHTS + AA_NIGHTS + 1)
        hits += sum(alarms(method, x[:n], sd, t, lower) for n in nights)
    return hits / (HISTORIES * AA_NIGHTS)


def detection_rate(method: Method, t: float, sd: float, residuals: np.ndarray, lower: bool, step: float,
                   seed: int) -> float:
    rng = np.random.default_rng(seed)
    caught = 0
    for _ in range(HISTORIES):
        x = planted(rng, residuals, BASE_NIGHTS + AFTER, BASE_NIGHTS, step)
        nights = range(BASE_NIGHTS + 1, BASE_NIGHTS + AFTER + 1)
        caught += any(_placed(method, x[:n], sd, t, lower) for n in nights)
    return caught / HISTORIES


def _placed(method: Method, x: np.ndarray, sd: float, t: float, lower: bool) -> bool:
    """An alarm whose change point is within a night of the step."""
    n = len(x)
    for i in method(x, sd, t):
        if abs(i - BASE_NIGHTS) <= 1 and n - AFTER <= i <= n - MIN_AFTER:
            before, after = np.median(x[max(0, i - 10):i]), np.mean(x[i:])
            if (after < before) if lower else (after > before):
                return True
    return False


def measure(noise_file: str) -> None:
    families = _goal_families(noise_file)
    goals = GOALS
    print("| family | noise sd | method | threshold | false alarms / 30 nights | detected within 3 nights: "
          "goal step | 20% | 30% | 50% | check of 365 nights x 120 series |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for family, info in families.items():
        residuals, sd = np.array(info["residuals"]), info["sd"]
        lower = family in LOWER_IS_WORSE
        sign = -1 if lower else 1
        for name, (method, grid, _) in METHODS.items():
            chosen = None
            for t in grid:   # most sensitive first: the first whose false alarms fit
                rate = false_alarm_rate(method, t, sd, residuals, lower, seed=1)
                if rate * AA_NIGHTS <= 1.0:
                    chosen = (t, rate)
                    break
            if chosen is None:
                print(f"| {family} | {sd:.1%} | {name} | none fits | - | - | - | - | - | - |", flush=True)
                continue
            t, rate = chosen
            steps = [goals[family], 0.2, 0.3, 0.5]
            det = [detection_rate(method, t, sd, residuals, lower, sign * s, seed=2) for s in steps]
            speed = _speed(method, t, sd, residuals)
            print(f"| {family} | {sd:.1%} | {name} | {t:g} | {rate * AA_NIGHTS:.2f} | "
                  + " | ".join(f"{d:.0%}" for d in det) + f" | {speed:.2f} s |", flush=True)


def calibrate(noise_file: str, penalty: float) -> None:
    """PELT at one penalty: its false alarms per family, and the smallest step it catches within
    3 nights in 95% of histories, as a multiple of the noise sd (what `history check` states)."""
    families = _goal_families(noise_file)
    print("| family | noise sd | penalty | false alarms / 30 nights | smallest step caught 95% | / sd |")
    print("|---|---|---|---|---|---|")
    for family, info in families.items():
        residuals, sd = np.array(info["residuals"]), info["sd"]
        lower = family in LOWER_IS_WORSE
        rate = false_alarm_rate(pelt, penalty, sd, residuals, lower, seed=1)
        step = next((k / 100 for k in range(1, 101)
                     if detection_rate(pelt, penalty, sd, residuals, lower, (-1 if lower else 1) * k / 100,
                                       seed=2) >= 0.95), None)
        print(f"| {family} | {sd:.1%} | {penalty:g} | {rate * AA_NIGHTS:.2f} | "
              f"{'-' if step is None else f'{step:.0%}'} | {'-' if step is None else f'{step / sd:.1f}'} |",
              flush=True)


def sweep(noise_file: str) -> None:
    """PELT with levels of at least 1 and 2 nights, at penalties 1.5, 2 and 3: false alarms and
    detection per family, to choose both (docs/results.md, "Which change-point method, measured")."""
    global MIN_SIZE
    families = _goal_families(noise_file)
    goals = GOALS
    for size in (1, 2):
        MIN_SIZE = size
        for penalty in (1.5, 2, 3):
            row = [f"| {size} night{'s' if size > 1 else ''} | {penalty:g}"]
            for family, info in families.items():
                residuals, sd = np.array(info["residuals"]), info["sd"]
                lower = family in LOWER_IS_WORSE
                rate = false_alarm_rate(pelt, penalty, sd, residuals, lower, seed=1)
                sign = -1 if lower else 1
                det = [detection_rate(pelt, penalty, sd, residuals, lower, sign * step, seed=2)
                       for step in (goals[family], 0.2, 0.3, 0.5)]
                row.append(f"{rate * AA_NIGHTS:.2f} | " + " / ".join(f"{d:.0%}" for d in det))
            print(" | ".join(row) + " |", flush=True)


def _speed(method: Method, t: float, sd: float, residuals: np.ndarray) -> float:
    """Seconds to check 120 series of 365 nights (10 cases x 12 figures), as `history check` would."""
    rng = np.random.default_rng(3)
    x = planted(rng, residuals, 365, 200, -0.1)
    start = time.perf_counter()
    for _ in range(5):
        method(x, sd, t)
    return (time.perf_counter() - start) / 5 * 120


# -- across machines: planted nightly histories through the history's own check ---------------
ACROSS_NIGHTS, STEP_AT, SLOWER = 30, 20, 1.6
ACROSS_FIGURES = {"throughput": "throughput", "p99": "p99", "throughput_of_ceiling": "throughput",
                  "recovery_of_floor": "recovery"}   # figure -> the family of its noise


def across(noise_file: str, repeat: int = 1, aa_every: int = 0, histories: int = HISTORIES,
           step: float = -0.05) -> dict:
    """Planted histories of ACROSS_NIGHTS nights on two machines, one SLOWER times slower, the
    runner switching at random every 3-8 nights, judged night by night by `history check`'s own
    code (harness/history/check.py). Each night's runs (`repeat` of them) draw their noise from
    the real residuals: the absolute figures from their family's; a ratio to a reference
    measured on the same machine as the figure's residual over a throughput residual (the
    reference's own noise). Every `aa_every`-th night (0: none) reruns the night before's commit
    on its machine: an A/A night.

    - false alarms: every speed alarm of any series on each night's check, over histories
      without a step;
    - detection: throughput and its ratio to the ceiling `step` lower from night STEP_AT on,
      caught when the ratio's series on every machine alarms within 3 nights, placed within a
      night of the step."""
    from harness.history import check

    families = json.loads(open(noise_file).read())
    pools = {f: np.array(families[fam]["residuals"]) for f, fam in ACROSS_FIGURES.items()}
    reference = np.array(families["throughput"]["residuals"])
    start = time.perf_counter()
    false_alarms, caught = 0, 0
    rng = np.random.default_rng(11)
    for _ in range(histories):
        entries = _planted_nights(rng, pools, reference, repeat, aa_every, None, 0.0)
        false_alarms += sum(bool(check.check_entries(_upto(entries, n)).alarms)
                            for n in range(1, ACROSS_NIGHTS + 1))
    rng = np.random.default_rng(12)
    for _ in range(histories):
        entries = _planted_nights(rng, pools, reference, repeat, aa_every, STEP_AT, step)
        caught += any(_caught(check.check_entries(_upto(entries, n)))
                      for n in range(STEP_AT + 1, STEP_AT + 4))
    return {"histories": histories, "repeat": repeat, "aa_every": aa_every,
            "false_alarms_per_30_nights": false_alarms / histories * 30 / ACROSS_NIGHTS,
            "caught_within_3_nights": caught / histories, "step": step,
            "seconds": round(time.perf_counter() - start, 1)}


def _upto(entries: list, nights: int) -> list:
    return [e for e in entries if int(e.run_id[1:4]) < nights]


def _caught(checked) -> bool:
    return any(getattr(a, "figure", None) == "throughput_of_ceiling" and a.series.machine is None
               and abs(a.night - STEP_AT) <= 1 for a in checked.alarms)


def _planted_nights(rng, pools: dict, reference, repeat: int, aa_every: int, step_at: int | None,
                    step: float) -> list:
    """One planted history's entries, night by night (run ids r000, r001...)."""
    from harness.history.store import Entry
    from harness.results import figures

    machines = [{"cpu_model": "Fast CPU", "cpus_usable": 2, "memory_bytes": 24 * 2 ** 30},
                {"cpu_model": "Slow CPU", "cpus_usable": 2, "memory_bytes": 24 * 2 ** 30}]
    on, left, commit = int(rng.integers(2)), int(rng.integers(3, 9)), "c0"
    levels = {"throughput": 3000.0, "p99": 9000.0, "throughput_of_ceiling": 0.6, "recovery_of_floor": 1.5}
    out = []
    for k in range(ACROSS_NIGHTS):
        aa = aa_every and k % aa_every == aa_every - 1
        if not aa:
            commit = f"c{k}"
            if left == 0:
                on, left = 1 - on, int(rng.integers(3, 9))
            left -= 1
        moved = 1 + step if step_at is not None and k >= step_at else 1.0
        for r in range(repeat):
            values = dict.fromkeys((f.name for f in figures.FIGURES), None)
            for name, level in levels.items():
                e = rng.choice(pools[name]) * rng.choice([-1, 1])
                slow = SLOWER if on == 1 and name in ("throughput", "p99") else 1.0
                v = level * (1 + e) * (slow if name == "p99" else 1 / slow)
                if name.endswith(("_of_ceiling", "_of_floor")):
                    v /= 1 + rng.choice(reference) * rng.choice([-1, 1])
                values[name] = v * (moved if name in ("throughput", "throughput_of_ceiling") else 1.0)
            out.append(Entry(
                run_id=f"r{k:03d}", started_at=f"2026-01-01T{k // 2:02d}:{30 * (k % 2):02d}:00",
                scenario="bench", scenario_hash="h", quick=True, case="eo", repeat=r + 1, commit=commit,
                dirty=False,
                versions={"spark": "4.2.0"}, machine=machines[on], figures=values,
                verdict={"expected": "exactly-once", "observed": "exactly-once", "holds": True,
                         "status": "PASS"},
                events={"expected": 1000, "lost": 0, "duplicated": 0, "unexpected": 0},
                faults={"asked": 4, "seen": 4, "not_seen": []}, status="completed"))
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["noise"]:
        print(json.dumps(noise(sys.argv[2:]), indent=1))
    elif sys.argv[1:2] == ["measure"]:
        measure(sys.argv[2])
    elif sys.argv[1:2] == ["sweep"]:
        sweep(sys.argv[2])
    elif sys.argv[1:2] == ["calibrate"]:
        calibrate(sys.argv[2], float(sys.argv[3]))
    elif sys.argv[1:2] == ["across"]:   # across NOISE_JSON [REPEAT [AA_EVERY [HISTORIES [STEP]]]]
        args = [int(a) for a in sys.argv[3:6]]
        step = [float(a) for a in sys.argv[6:7]]
        print(json.dumps(across(sys.argv[2], *args, *step), indent=1))
    else:
        raise SystemExit(__doc__)
