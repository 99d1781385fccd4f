"""CPU a hunt spent, run by run, from its run directory: each trial case's resources.parquet
(the harness samples every process of the case, its own, Spark's, Kafka's, PostgreSQL's and
the FUSE file system's, about once a second) integrated over time. What `/usr/bin/time` cannot
give: Spark's and Kafka's processes are not the hunt's waited-for children.

    python -m benchmarks.hunt_cpu RUN_DIR [RUN_DIR ...]

For each run directory: the CPU-minutes of each search run (h1, h2, ...) and of each shrinking
run (s1, s2, ...), and the CPU-minutes until the run that found the violation ended.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pandas as pd


def cpu_s(resources: Path) -> float:
    """CPU-seconds of every component of one case: cpu_percent integrated over its samples."""
    frame = pd.read_parquet(resources, columns=["at_ms", "component", "cpu_percent"])
    total = 0.0
    for _, one in frame.sort_values("at_ms").groupby("component"):
        at_s = one["at_ms"].to_numpy() / 1000.0
        pct = one["cpu_percent"].to_numpy()
        if len(at_s) > 1:
            total += float(((at_s[1:] - at_s[:-1]) * pct[1:]).sum()) / 100.0
    return total


def trials(run_dir: Path) -> list[tuple[str, float]]:
    """(label, CPU-seconds) of each trial case, in the order run: h1, h2, ..., then s1, s2, ..."""
    out = []
    for case in (run_dir / "cases").iterdir():
        m = re.search(r"-([hs])(\d+)$", case.name)
        if m and (case / "resources.parquet").exists():
            out.append((m.group(1), int(m.group(2)), case.name, cpu_s(case / "resources.parquet")))
    out.sort(key=lambda t: (t[0] != "h", t[1]))
    return [(f"{kind}{n}", s) for kind, n, _, s in out]


def report(run_dir: Path) -> dict:
    hunt = json.loads((run_dir / "hunt.json").read_text())
    spent = trials(run_dir)
    found = (hunt.get("found") or {}).get("run")
    search = [s for label, s in spent if label.startswith("h")]
    return {"run_dir": str(run_dir), "found_at_run": found, "search_runs": len(search),
            "shrink_runs": len(spent) - len(search),
            "cpu_min_per_search_run": [round(s / 60, 2) for s in search],
            "cpu_min_to_find": round(sum(search[:found]) / 60, 2) if found else None,
            "cpu_min_total": round(sum(s for _, s in spent) / 60, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="+", type=Path)
    for run_dir in parser.parse_args().run_dirs:
        print(json.dumps(report(run_dir)))


if __name__ == "__main__":
    main()
