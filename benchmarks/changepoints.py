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

FAMILIES = {"throughput": ("throughput",), "p99": ("p99", "processing_p99")}
LOWER_IS_WORSE = {"throughput"}
BASE_NIGHTS, AA_NIGHTS, AFTER = 30, 30, 3
MIN_AFTER = int(__import__("os").environ.get("MIN_AFTER", "2"))   # nights after a change before it alarms
MIN_SIZE = int(__import__("os").environ.get("MIN_SIZE", "2"))     # nights a level lasts at least (PELT)
HISTORIES = 200


# -- the noise of real runs (needs the harness) -------------------------------------------------
def noise(run_dirs: list[str]) -> dict:
    """Each family's relative residuals: for every case series with k >= 2 runs, each run's
    value over the mean of its series, minus 1, times sqrt(k / (k - 1)) (so that their spread is
    that of a run about the true level, not about a mean that follows it)."""
    import statistics
    from collections import defaultdict

    from harness.results import figures, summary

    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    for run in run_dirs:
        result = summary.load(f"{run}/summary.json" if not run.endswith(".json") else run)
        for case in result.cases:
            for family, names in FAMILIES.items():
                for name in names:
                    v = figures.figure(name).value(case)
                    if v:
                        values[(family, f"{result.scenario.get('name')}/{result.scenario.get('hash')}/"
                                        f"{result.scenario.get('quick')}/{case.series}/{name}")].append(float(v))
    out: dict[str, list[float]] = defaultdict(list)
    for (family, _), vs in values.items():
        if len(vs) >= 2:
            mean, k = statistics.fmean(vs), len(vs)
            out[family] += [(v / mean - 1) * math.sqrt(k / (k - 1)) for v in vs]
    return {f: {"residuals": r, "sd": float(np.sqrt(np.mean(np.square(r)))), "values": len(r)}
            for f, r in out.items()}


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
    families = json.loads(open(noise_file).read())
    goals = {"throughput": 0.05, "p99": 0.10}
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
    families = json.loads(open(noise_file).read())
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
    families = json.loads(open(noise_file).read())
    goals = {"throughput": 0.05, "p99": 0.10}
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


if __name__ == "__main__":
    if sys.argv[1:2] == ["noise"]:
        print(json.dumps(noise(sys.argv[2:]), indent=1))
    elif sys.argv[1:2] == ["measure"]:
        measure(sys.argv[2])
    elif sys.argv[1:2] == ["sweep"]:
        sweep(sys.argv[2])
    elif sys.argv[1:2] == ["calibrate"]:
        calibrate(sys.argv[2], float(sys.argv[3]))
    else:
        raise SystemExit(__doc__)
