"""Levels in a figure's nights: where a new level starts.

PELT (Killick, Fearnhead and Eckley, 2012) with an l2 cost, through `ruptures` (its KernelCPD
with a linear kernel: the same search in C), on the values relative to their median, with a
penalty of PENALTY x sd^2 x ln(n), sd the figure's relative noise (harness/history/noise.py),
and levels of at least MIN_SIZE nights; then each change point placed at the first night at
its new level (`place`). The change points of the history (changes.py) and the steps the
noise estimate leaves out (noise.py) are both found here.
"""

from __future__ import annotations

import math
import statistics

# calibrated on planted histories (benchmarks/changepoints.py `across`: 200 histories of 30
# nights on two machines, one 1.6x slower, the runner switching every 3-8 nights, noise from
# real repeats): every speed alarm of every series counted, a night's check judging four figures
# (throughput and p99 on its machine, the two ratios on every machine). With --repeat 3 and an
# A/A night in seven (the nightly), 0.62 false alarms in 30 nights and a 5% step in the ratio
# throughput caught within 3 nights in 98%; a penalty of 2 made 1.4 false alarms
PENALTY = 3.0
# PELT's levels last at least this many nights: one night off alone is never a level of its own
# (the real history of ten A/A quick benches, results/history, had a night 4 sd off in four
# figures at once, which a level of one night made four false alarms)
MIN_SIZE = 2


def detect(values: list[float], sd: float) -> list[int]:
    """Indices where a new level starts (PELT, l2 cost, on the values relative to their median),
    each placed at the first night at its new level."""
    import numpy as np
    import ruptures as rpt

    y = np.asarray(values, dtype=float)
    y = y / np.median(y) - 1
    pen = PENALTY * max(sd, 1e-4) ** 2 * math.log(len(y))
    # KernelCPD with a linear kernel is PELT with the l2 cost, in C: the same change points as
    # Pelt(model="l2"), 0.4 ms for 365 nights where Pelt's Python cost takes 110-260 ms
    search = rpt.KernelCPD(kernel="linear", min_size=MIN_SIZE, jump=1).fit(y)
    points = [int(b) for b in search.predict(pen=pen) if b < len(y)]
    return place(y.tolist(), points)


def place(y: list[float], points: list[int]) -> list[int]:
    """Each change point moved by at most a night to where the two levels beside it fit best
    (least squares), the new level allowed a single night: PELT's levels of MIN_SIZE nights put
    a step in the newest night on the night before it."""
    out = list(points)
    for k, p in enumerate(out):
        start = out[k - 1] if k else 0
        end = out[k + 1] if k + 1 < len(out) else len(y)
        candidates = [q for q in (p - 1, p, p + 1) if start + MIN_SIZE <= q < end]
        out[k] = min(candidates, key=lambda q: (_sse(y[start:q]) + _sse(y[q:end]), q != p))
    return out


def _sse(values: list[float]) -> float:
    if not values:
        return 0.0
    mean = statistics.fmean(values)
    return sum((v - mean) ** 2 for v in values)
