"""`python -m harness`: run scenarios, fetch JVM artifacts.

Exit codes: 0 every verdict holds; 1 a verdict failed; 2 bad input or a broken
environment (the message names the problem and the fix); 3 a bug in the harness;
128+N interrupted by signal N (130 for Ctrl-C, 143 for SIGTERM).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import traceback
from pathlib import Path

from harness.errors import HarnessError, RunAborted


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a scenario and check its output against ground truth")
    run.add_argument("scenario", type=Path, help="scenario TOML file, e.g. workloads/scenarios/smoke.toml")
    run.add_argument("--out", type=Path, help="run directory (default: results/<run-id>/)")
    run.add_argument("--quick", action="store_true", help="apply the scenario's [quick] overrides")
    run.add_argument("-v", "--verbose", action="store_true", help="log the harness's steps to stderr")
    sub.add_parser("fetch-jvm", help="fetch the pinned Kafka and Spark-connector jars with mvn (once)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "fetch-jvm":
            return _fetch_jvm()
        return _run(args)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except RunAborted as exc:
        print(f"aborted: {exc}; every service was stopped", file=sys.stderr)
        return 128 + exc.signum
    except Exception:  # noqa: BLE001 - a bug: say so, distinctly from a failed verdict
        traceback.print_exc()
        print("error: internal error in the harness (a bug: please report it with the traceback); "
              "every service was stopped", file=sys.stderr)
        return 3


def _fetch_jvm() -> int:
    from harness import jvm

    for name, path in jvm.fetch_all(log=lambda m: print(m, file=sys.stderr)).items():
        print(f"{name}: {path}")
    return 0


def _run(args) -> int:
    from workloads import scenario as scenario_mod

    scenario = scenario_mod.load(args.scenario, quick=args.quick)  # validate before anything starts
    from harness import report, rundir, runner
    from harness.paths import results_dir
    from harness.progress import Progress
    from harness.services.base import Registry

    runner.preflight(scenario)
    run_id = rundir.new_run_id(scenario.name)  # unique even when --out names the directory
    run_dir = rundir.create(args.out or results_dir() / run_id, scenario.path)
    os.environ["HARNESS_RUN_ID"] = run_id  # inherited by every process the run starts
    _log_to(run_dir / "harness.log", args.verbose)
    progress = Progress()
    progress.step(f"run {run_id}: scenario {scenario.name}{' (quick)' if args.quick else ''} -> {run_dir}")
    registry = Registry()
    _raise_on_signals()
    try:
        with registry:
            summary = runner.run(scenario, run_dir, run_id, progress, registry)
    finally:
        _write_pids(run_dir / "pids.json", registry)
        progress.step(f"results: {run_dir}")
    print(report.render(summary))
    return 0 if all(c["verdict"]["holds"] for c in summary["cases"]) else 1


def _write_pids(path: Path, registry) -> None:
    """Every pid each service had, so anyone can check that none is left running."""
    pids = {s.name + f"#{i}": sorted(s.seen_pids) for i, s in enumerate(registry.services)}
    path.write_text(json.dumps(pids, indent=1))


def _raise_on_signals() -> None:
    """SIGINT and SIGTERM unwind the stack (so every service is stopped) instead of dying."""
    def handler(signum, frame):
        # a second Ctrl-C or SIGTERM must not cut the cleanup short
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise RunAborted(signum)

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def _log_to(path: Path, verbose: bool) -> None:
    handlers: list[logging.Handler] = [logging.FileHandler(path)]
    if verbose:
        handlers.append(logging.StreamHandler(sys.stderr))
    logging.basicConfig(level=logging.INFO, handlers=handlers,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.WARNING)
