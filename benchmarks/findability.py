"""How soon the hunt's plans reach a known bug, computed from the plans alone (no services).

Each target is a scenario's case and what is known to break it: the choices (a kind, with the
value of its covered key) that reach the bug, alone or in order. For each of three strategies
(harness/hunt/feedback.py: the covering plans alone, feedback alone, both) and for sampling
alone (`plan.draw` for every run, as the hunt drew before the covering set): the run of the
first plan that holds the trigger, for seeds 1-5, and the curve "found within N runs" over
seeds 1-SEEDS. Feedback needs what each run showed: the behaviours of benchmarks/
behaviour_model.py (a model, built from the targets' known mechanisms; the feedback curves are
as good as it is). Real hunts check these on a few seeds (docs/hunt.md, "Findability").

    python -m benchmarks.findability [--seeds 200] [--runs 40] [--only TEXT]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

from benchmarks.behaviour_model import Mechanism, behaviours, lands
from harness import scenario as scenario_mod
from harness.hunt import plan as hunt_plan
from harness.hunt.feedback import BOTH, COVERING, FEEDBACK, Planner
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


def _task_retried(choices: list[hunt_plan.Choice]) -> bool:
    """A task run again: fail-task (its worker keeps what the failed attempt counted) or an
    executor lost (its workers, and what they kept, gone)."""
    return any(c.kind in ("fail-task", "kill-executor") for c in choices)


@dataclass(frozen=True)
class Target:
    name: str
    scenario: str
    case: str
    trigger: Callable[[list[hunt_plan.Choice]], bool]
    needs: str
    kinds: str | None = None   # the hunt's --kinds (None: every kind the case can run)
    mechanism: Mechanism = field(default_factory=Mechanism)   # what its runs show (behaviour_model)


GALLERY = "examples/known-bugs"
LONG = 40   # the goal's runs (issue 27: every seed among 1-5 within 40)
WITHIN = (1, 3, 5, 8, 12, 20, 30, 40)   # the curve's points: found within N runs
SINKS = Mechanism(appends=True, stateful=True)   # the gallery's sink entries: tumbling_count, appended
TARGETS = (
    Target("two faults in order", "tests/scenarios/two_faults.toml", "guards-first-partitions",
           _partitions_then_replay, "kafka-partitions, then a batch run again after its write",
           mechanism=Mechanism(appends_after_partitions=True)),
    *(Target(entry, f"{GALLERY}/{entry}/scenario.toml", "buggy", _one_replay,
             "a batch run again after its write", mechanism=SINKS)
      for entry in ("paimon-9666", "iceberg-8809", "hudi-6098", "delta-1421")),
    Target("spark-38033", f"{GALLERY}/spark-38033/scenario.toml", "buggy", _holds("lose-unsynced"),
           "a crash that loses unsynced writes", "lose-unsynced,kill-executor,pause",
           Mechanism(stateful=True)),
    Target("spark-38033, with kill-driver", f"{GALLERY}/spark-38033/scenario.toml", "buggy",
           _holds("lose-unsynced"), "a crash that loses unsynced writes",
           "lose-unsynced,kill-driver,kill-executor,pause", Mechanism(stateful=True)),
    Target("delta-6314", f"{GALLERY}/delta-6314/scenario.toml", "buggy", _holds("hide-commit"),
           "a commit missing from the listings", "hide-commit,kill-driver,kill-executor,pause"),
    Target("spark-25214", f"{GALLERY}/spark-25214/scenario.toml", "buggy", _holds("kafka-retention"),
           "offsets deleted before the batch reads them", mechanism=Mechanism(fail_on_data_loss=False)),
    Target("spark-56720", f"{GALLERY}/spark-56720/scenario.toml", "buggy", _offsets_io_error,
           "io-error on the offsets log's writes", "io-error,kill-driver,kill-executor,pause"),
    # the docs' third shape: a job that keeps state in its Python worker's memory across task
    # retries, modelled on the fixture's case (a foreachBatch sink, the default kinds)
    Target("state in the Python worker's memory", "tests/scenarios/two_faults.toml",
           "guards-first-partitions", _task_retried, "a task run again (fail-task, or an executor lost)"),
)


def first_hit(plans: list[list[dict]], trigger, mechanism: Mechanism) -> int | None:
    return next((i + 1 for i, p in enumerate(plans) if trigger(_landed(_choices(p), mechanism))), None)


def _choices(plan: list[dict]) -> list[hunt_plan.Choice]:
    """The plan's choices in the order its faults come (their `at`)."""
    return [hunt_plan.choice_of(t) for t in sorted(plan, key=lambda t: hunt_plan.seconds(t["at"]))]


def _landed(choices: list[hunt_plan.Choice], mechanism: Mechanism) -> list[hunt_plan.Choice]:
    """The choices whose faults land, in the model: none after one Spark stops the query for."""
    return [c for c, ok in zip(choices, lands(choices, mechanism), strict=True) if ok]


@cache
def space_of(target: Target) -> hunt_plan.Space:
    search = HuntSearch.of(target.case, LONG, 1, target.kinds, "30m", False)
    return search.space(search.narrow(scenario_mod.load(REPO_ROOT / target.scenario)))


def first_run(target: Target, seed: int, strategy: str, runs: int = LONG) -> int | None:
    """The run of `strategy`'s search from `seed` whose plan first holds the target's trigger
    (None: not within `runs`); each run's faults land as the model says (every one before a fault
    Spark stops the query for), and it shows the model's behaviours."""
    space = space_of(target)
    if strategy == "sampling":
        drawn = [hunt_plan.draw(space, seed, i) for i in range(runs)]
        return first_hit(drawn, target.trigger, target.mechanism)
    planner = Planner(space, seed, strategy)
    for run in range(1, runs + 1):
        proposal = planner.next()
        choices = _choices(proposal.plan)
        if target.trigger(_landed(choices, target.mechanism)):
            return run
        planner.tell(proposal, lands(choices, target.mechanism), behaviours(choices, target.mechanism))
    return None


STRATEGIES = (COVERING, FEEDBACK, BOTH, "sampling")


def measure(target: Target, seeds: int, runs: int = LONG) -> dict:
    """For each strategy: the first run of seeds 1-5, the curve (share of seeds found within N
    runs, N in WITHIN), and the median and mean first run of the seeds that found it."""
    space = space_of(target)
    out: dict = {"target": target.name, "kinds": len(space.kinds), "choices": len(space.choices),
                 "pairs": len(space.possible), "strategies": {}}
    for strategy in STRATEGIES:
        firsts = [first_run(target, s, strategy, runs) for s in range(1, seeds + 1)]
        found = [r for r in firsts if r is not None]
        out["strategies"][strategy] = {
            "first_run_seeds_1_5": firsts[:5],
            "within": {n: sum(r <= n for r in found) / seeds for n in WITHIN if n <= runs},
            "median": statistics.median(found) if found else None,
            "mean": round(statistics.fmean(r if r is not None else runs + 1 for r in firsts), 2),
            "latest": max(found, default=None), "missed": len(firsts) - len(found)}
    return out


def table(results: list[dict], seeds: int) -> str:
    """The curves as one Markdown table: a row per target and strategy."""
    points = [n for n in WITHIN if n in results[0]["strategies"][COVERING]["within"]]
    head = ("| bug | kinds / choices / pairs | strategy | first run, seeds 1-5 | "
            + " | ".join(f"within {n}" for n in points) + f" | median | mean (of {seeds}; a miss counts "
            f"{max(points) + 1}) |")
    lines = [head, "|" + "---|" * (6 + len(points))]
    for m in results:
        for strategy, r in m["strategies"].items():
            first = ", ".join(str(x) if x else "-" for x in r["first_run_seeds_1_5"])
            curve = " | ".join(f"{r['within'][n]:.0%}" for n in points)
            size = f"{m['kinds']} / {m['choices']} / {m['pairs']}"
            lines.append(f"| {m['target']} | {size} | {strategy} | {first} | {curve} | {r['median']} | "
                         f"{r['mean']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--runs", type=int, default=LONG, help="the longest search (the curve's end)")
    parser.add_argument("--only", default="", help="the targets whose name holds this text")
    args = parser.parse_args()
    results = []
    for target in (t for t in TARGETS if args.only in t.name):
        results.append(measure(target, args.seeds, args.runs))
        print(f"measured {target.name} ({target.needs})", flush=True)
    print(table(results, args.seeds))


if __name__ == "__main__":
    main()
