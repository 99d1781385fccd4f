"""How soon the hunt's plans reach a known bug, computed from the plans alone (no services).

Each target is a scenario's case and what is known to break it: the choices (a kind, with the
value of its covered key) that reach the bug, alone or in order. For seeds 1-5 the run of the
first plan that holds the trigger; over seeds 1-SEEDS, the share whose first RUNS plans hold
it, with the covering plans (today's hunt) and with sampling alone (`plan.draw` for every run,
as the hunt drew before the covering set). Real hunts check these on a few seeds
(docs/hunt.md, "Findability").

    python -m benchmarks.findability [--seeds 200] [--runs 12]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from harness import scenario as scenario_mod
from harness.hunt import plan as hunt_plan
from harness.hunt.search import HuntSearch
from harness.paths import REPO_ROOT

# the driver killed after the sink's write and before commits/N: the batch runs again
REPLAY_AFTER_WRITE = {("replay-batch", None), ("kill-driver", "after-write"), ("fail-batch", "after-write")}


def _replays(c: hunt_plan.Choice) -> bool:
    return (c.kind, c.value) in REPLAY_AFTER_WRITE


def _one_replay(choices: list[hunt_plan.Choice]) -> bool:
    return any(_replays(c) for c in choices)


def _holds(kind: str) -> Callable[[list[hunt_plan.Choice]], bool]:
    """A plan that holds a fault of `kind` (the source and storage entries' bugs need no more;
    whether it lands where it reaches the bug is the real hunt's to say)."""
    return lambda choices: any(c.kind == kind for c in choices)


def _offsets_io_error(choices: list[hunt_plan.Choice]) -> bool:
    """io-error on the offsets log alone (its covered value); its ops drawn (reads alone miss)."""
    return any(c.kind == "io-error" and c.value == "^/offsets/" for c in choices)


def _partitions_then_replay(choices: list[hunt_plan.Choice]) -> bool:
    return any(a.kind == "kafka-partitions" and _replays(b) for i, a in enumerate(choices)
               for b in choices[i + 1:])


@dataclass(frozen=True)
class Target:
    name: str
    scenario: str
    case: str
    trigger: Callable[[list[hunt_plan.Choice]], bool]
    needs: str
    kinds: str | None = None   # the hunt's --kinds (None: every kind the case can run)


GALLERY = "examples/known-bugs"
LONG = 40   # the goal's runs (issue 27: every seed among 1-5 within 40)
TARGETS = (
    Target("two faults in order", "tests/scenarios/two_faults.toml", "guards-first-partitions",
           _partitions_then_replay, "kafka-partitions, then a batch run again after its write"),
    *(Target(entry, f"{GALLERY}/{entry}/scenario.toml", "buggy", _one_replay,
             "a batch run again after its write")
      for entry in ("paimon-9666", "iceberg-8809", "hudi-6098", "delta-1421")),
    Target("spark-38033", f"{GALLERY}/spark-38033/scenario.toml", "buggy", _holds("lose-unsynced"),
           "a crash that loses unsynced writes", "lose-unsynced,kill-executor,pause"),
    Target("spark-38033, with kill-driver", f"{GALLERY}/spark-38033/scenario.toml", "buggy",
           _holds("lose-unsynced"), "a crash that loses unsynced writes",
           "lose-unsynced,kill-driver,kill-executor,pause"),
    Target("delta-6314", f"{GALLERY}/delta-6314/scenario.toml", "buggy", _holds("hide-commit"),
           "a commit missing from the listings", "hide-commit,kill-driver,kill-executor,pause"),
    Target("spark-25214", f"{GALLERY}/spark-25214/scenario.toml", "buggy", _holds("kafka-retention"),
           "offsets deleted before the batch reads them"),
    Target("spark-56720", f"{GALLERY}/spark-56720/scenario.toml", "buggy", _offsets_io_error,
           "io-error on the offsets log's writes", "io-error,kill-driver,kill-executor,pause"),
)


def first_hit(plans: list[list[dict]], trigger) -> int | None:
    return next((i + 1 for i, p in enumerate(plans) if trigger([hunt_plan.choice_of(t) for t in p])), None)


def measure(target: Target, seeds: int, runs: int) -> dict:
    search = HuntSearch.of(target.case, runs, 1, target.kinds, "30m", False)
    space = search.space(search.narrow(scenario_mod.load(REPO_ROOT / target.scenario)))
    # plans(space, seed, n) are a prefix of plans(space, seed, n + k): one list a seed
    firsts = [first_hit(hunt_plan.plans(space, s, LONG), target.trigger) for s in range(1, seeds + 1)]
    found = [r for r in firsts if r is not None]
    sampled = sum(first_hit([hunt_plan.draw(space, s, i) for i in range(runs)], target.trigger) is not None
                  for s in range(1, seeds + 1))
    return {"target": target.name, "kinds": len(space.kinds), "choices": len(space.choices),
            "pairs": len(space.possible), "covering_plans": len(hunt_plan.covering(space, 1)),
            "first_run_seeds_1_5": firsts[:5], "share_within": sum(r <= runs for r in found) / seeds,
            f"share_within_{LONG}": len(found) / seeds, "latest": max(found, default=None),
            "median_first": statistics.median(found) if found else None,
            "sampled_share_within": sampled / seeds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--only", default="", help="the targets whose name holds this text")
    args = parser.parse_args()
    print(f"| bug | kinds / choices / ordered pairs | first run, seeds 1-5 | of {args.seeds} seeds: within "
          f"{args.runs} runs, covering | within {args.runs}, sampling alone | within {LONG}, covering "
          f"(latest run) | median first run |")
    print("|---|---|---|---|---|---|---|")
    for target in (t for t in TARGETS if args.only in t.name):
        m = measure(target, args.seeds, args.runs)
        first = ", ".join(str(r) if r else "-" for r in m["first_run_seeds_1_5"])
        print(f"| {m['target']} ({target.needs}) | {m['kinds']} / {m['choices']} / {m['pairs']} | {first} | "
              f"{m['share_within']:.0%} | {m['sampled_share_within']:.0%} | "
              f"{m[f'share_within_{LONG}']:.0%} ({m['latest']}) | {m['median_first']} |", flush=True)


if __name__ == "__main__":
    main()
