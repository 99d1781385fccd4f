"""Findability from real runs: for each target, strategy and seed, a hunt that stops at the first
violation (unshrunk), with the run it was found at and the wall time it took. What
benchmarks/findability.py computes from the plans alone, checked against Spark, Kafka and the
sink (docs/hunt.md, "Findability"). Heavy: every hunt starts its own services; run it under the
shared lock, alone on the machine.

    python -m benchmarks.hunt_real OUT_DIR [--targets two,paimon-9666,iceberg-8809]
        [--strategies covering,both] [--seeds 1-5] [--runs 20] [--budget 30m] [--shrink]

Each hunt's run directory is OUT_DIR/<target>-<strategy>-s<seed>; one JSON line per hunt goes to
OUT_DIR/hunts.jsonl as it ends, and the table at the end gives, per target and strategy, the run
each seed found it at, the wall time to it, and the median run's time and what it went to.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path

from benchmarks.findability import TARGETS, Target
from harness.paths import REPO_ROOT


def hunt(target: Target, strategy: str, seed: int, runs: int, budget: str, shrink: bool,
         out: Path) -> dict:
    """One hunt of the target; what it found and what it cost."""
    from harness import api
    from harness.hunt.search import HuntSearch

    search = HuntSearch.of(target.case, runs, seed, target.kinds, budget, False, strategy)
    search.options = replace(search.options, shrink=shrink)
    started = time.monotonic()
    result = api.run(REPO_ROOT / target.scenario, out, search=search)
    wall_s = time.monotonic() - started
    h = result.sections["hunt"]
    found = (h.get("found") or {}).get("run")
    tried = h.get("tried", [])
    to_find = sum((t.get("times_s") or {}).get("total") or 0 for t in tried[:found]) if found else None
    return {"target": target.name, "strategy": strategy, "seed": seed, "found_at_run": found,
            "runs": len(tried), "s_to_find": round(to_find, 1) if to_find is not None else None,
            "wall_s": round(wall_s, 1), "tested_nothing": h.get("tested_nothing"),
            "behaviours_seen": h.get("behaviours_seen"), "run_time_median_s": h.get("run_time_median_s"),
            "shrink_runs": (h.get("shrink") or {}).get("runs"), "run_dir": str(out)}


def table(rows: list[dict]) -> str:
    lines = ["| bug | strategy | found at run, by seed | minutes to find, by seed | median run (s): total "
             "(start-up / workload / drain / check) | runs that tested nothing |",
             "|---|---|---|---|---|---|"]
    for key in dict.fromkeys((r["target"], r["strategy"]) for r in rows):
        mine = [r for r in rows if (r["target"], r["strategy"]) == key]
        found = ", ".join(str(r["found_at_run"] or "-") for r in mine)
        minutes = ", ".join(f"{r['s_to_find'] / 60:.1f}" if r["s_to_find"] is not None else "-" for r in mine)
        medians = [r["run_time_median_s"] for r in mine if r.get("run_time_median_s")]
        parts = {k: statistics.median(m[k] for m in medians if k in m)
                 for k in ("total", "startup", "workload", "drain", "check") if any(k in m for m in medians)}
        split = " / ".join(f"{parts[k]:g}" for k in ("startup", "workload", "drain", "check") if k in parts)
        spent = f"{parts['total']:g} ({split})" if "total" in parts else "-"
        nothing = sum(r["tested_nothing"] or 0 for r in mine)
        lines.append(f"| {key[0]} | {key[1]} | {found} | {minutes} | {spent} | {nothing} of "
                     f"{sum(r['runs'] for r in mine)} |")
    return "\n".join(lines)


def _seeds(text: str) -> list[int]:
    a, _, b = text.partition("-")
    return list(range(int(a), int(b or a) + 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--targets", default="two faults,paimon-9666,iceberg-8809",
                        help="comma-separated: the targets whose name starts with each")
    parser.add_argument("--strategies", default="covering,both")
    parser.add_argument("--seeds", default="1-5")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--budget", default="30m", help="each hunt's")
    parser.add_argument("--shrink", action="store_true", help="shrink what is found (the shrink's runs)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for prefix in args.targets.split(","):
        target = next(t for t in TARGETS if t.name.startswith(prefix))
        for strategy in args.strategies.split(","):
            for seed in _seeds(args.seeds):
                name = f"{target.name.split(',')[0].replace(' ', '-')}-{strategy}-s{seed}"
                row = hunt(target, strategy, seed, args.runs, args.budget, args.shrink, args.out / name)
                rows.append(row)
                with (args.out / "hunts.jsonl").open("a") as f:
                    f.write(json.dumps(row) + "\n")
                print(json.dumps(row), flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
