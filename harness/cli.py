"""`python -m harness`: run scenarios, fetch JVM artifacts.

Exit codes: 0 every verdict holds; 1 a verdict failed; 2 bad input or a broken
environment (the message names the problem and the fix); 3 a bug in the harness;
128+N interrupted by signal N (130 for Ctrl-C, 143 for SIGTERM).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import traceback
from pathlib import Path

from harness.errors import RunAborted
from workloads.errors import Problem


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a scenario and check its output against ground truth")
    run.add_argument("scenario", type=Path,
                     help="scenario TOML file, e.g. harness/scenario/scenarios/smoke.toml")
    run.add_argument("--out", type=Path, help="run directory (default: results/<run-id>/)")
    run.add_argument("--quick", action="store_true", help="apply the scenario's [quick] overrides")
    run.add_argument("-v", "--verbose", action="store_true", help="log the harness's steps to stderr")
    sub.add_parser("fetch-jvm", help="fetch the pinned Kafka and Spark-connector jars with mvn (once)")
    sub.add_parser("fetch", help="fetch-jvm, then build the pinned Toxiproxy with go install (once)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "fetch-jvm":
            return _fetch_jvm()
        if args.command == "fetch":
            return _fetch_all()
        return _run(args)
    except Problem as exc:   # the harness's errors and the generator's
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


def _fetch_all() -> int:
    from harness import tools

    _fetch_jvm()
    print(f"toxiproxy: {tools.fetch_toxiproxy(log=lambda m: print(m, file=sys.stderr))}")
    return 0


def _run(args) -> int:
    from harness import scenario as scenario_mod

    scenario = scenario_mod.load(args.scenario, quick=args.quick)  # validate before anything starts
    from harness.paths import results_dir
    from harness.report import table
    from harness.run import rundir, runner
    from harness.services.base import Registry, describe_reaped
    from workloads.progress import Progress

    if args.out is not None:
        rundir.check_out(args.out)
    runner.preflight(scenario)
    run_id = rundir.new_run_id(scenario.name)  # unique even when --out names the directory
    run_dir = rundir.create(args.out or results_dir() / run_id, scenario.path)
    os.environ["HARNESS_RUN_ID"] = run_id  # inherited by every process the run starts
    _log_to(run_dir / "harness.log", args.verbose)
    progress = Progress()
    progress.step(f"run {run_id}: scenario {scenario.name}{' (quick)' if args.quick else ''} -> {run_dir}")
    registry = Registry(pids_path=run_dir / "pids.json")
    _raise_on_signals()
    try:
        with registry:
            for line in describe_reaped(registry.reaped):
                progress.step(line)
            summary = runner.run(scenario, run_dir, run_id, progress, registry)
    finally:
        progress.step(f"results: {run_dir}")
    print(table.render(summary))
    return 0 if all(c["verdict"]["holds"] for c in summary["cases"]) else 1


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
