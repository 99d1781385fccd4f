"""How long `history check` takes over a year of nights (issue 28's goal: 365 nights x 10 cases
x 12 figures in at most 5 s, read from the recorded `seconds`, never asserted).

No services: a store of 365 synthetic runs, each of 10 cases with every figure of the registry
(12 with a direction, plus counts), a new commit a night and an A/A night in seven, written up
front; then `check` reads the store, calibrates the noise and looks for changes in every series.
"""

from __future__ import annotations

import json
import random
import time

import pytest

from harness.history import check
from harness.history.store import Store
from harness.results import figures

NIGHTS, CASES = 365, 10


def _store(root) -> Store:
    rng = random.Random(7)
    runs = root / "store" / "runs"
    runs.mkdir(parents=True)
    (root / "store" / "history.json").write_text(json.dumps({"format": 1}))
    commit = "c0"
    for k in range(NIGHTS):
        commit = commit if k % 7 == 1 else f"c{k}"
        day, hour = divmod(k, 24)
        entries = []
        for c in range(CASES):
            level = 1000.0 * (0.93 if k >= 300 and c == 3 else 1.0)
            values = {f.name: level * (1 + rng.gauss(0, 0.02)) for f in figures.FIGURES}
            entries.append({
                "run_id": f"r{k:04d}",
                "started_at": f"2026-{1 + day // 28:02d}-{1 + day % 28:02d}T{hour:02d}:00:00",
                "scenario": "bench", "scenario_hash": "h", "quick": True, "case": f"case-{c}", "repeat": 1,
                "commit": commit, "dirty": False, "versions": {"spark": "4.2.0"},
                "machine": {"cpus_usable": 2}, "figures": values,
                "verdict": {"expected": "exactly-once", "observed": "exactly-once", "holds": True},
                "events": {"expected": 22000, "lost": 0, "duplicated": 0, "unexpected": 0},
                "faults": {"asked": 4, "seen": 4, "not_seen": []}, "status": "completed"})
        (runs / f"r{k:04d}.json").write_text(json.dumps({"run_id": f"r{k:04d}", "entries": entries}))
    return Store(root / "store")


@pytest.mark.benchmark(group="history")
def test_history_check_over_a_year_of_nights(benchmark, tmp_path):
    store = _store(tmp_path)
    compared = sum(1 for f in figures.shown_in(figures.COMPARE) if f.better is not None)
    start = time.perf_counter()
    checked = benchmark.pedantic(check.check, args=(store,), rounds=1, iterations=1)
    seconds = time.perf_counter() - start
    benchmark.extra_info.update({"seconds": round(seconds, 3), "nights": NIGHTS, "cases": CASES,
                                 "figures_compared": compared, "series": len(checked.series)})
    # the planted step (case 3, every figure 7% down from night 300) is found
    assert any(c.series.case == "case-3" and abs(c.night - 300) <= 1 for c in checked.speed)
