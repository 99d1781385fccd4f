"""`python -m harness`: run scenarios, check runs again, report and compare them, fetch JVM artifacts.

Exit codes: 0 every case's verdict is PASS (compare: no regression; hunt: no violation found
in the budget); 1 a verdict is FAIL (compare: a regression; hunt: a violation, minimal.toml
written); 2 bad input or a broken environment (the message names the problem and the fix);
3 a bug in the harness; 4 no verdict failed, but one is UNKNOWN: a case that could not be
decided (a noop sink, a sink whose read() raised, an oracle that raised, a fault that never
came while the workload ran: status schedule-missed), never a pass; 128+N interrupted by
signal N (130 for Ctrl-C, 143 for SIGTERM).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import shutil
import signal
import sys
import traceback
from pathlib import Path

from harness.errors import HarnessError, RunAborted
from harness.results import figures
from harness.results.verdict import FAIL, PASS, UNKNOWN
from workloads.errors import Problem


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a scenario and check its output against ground truth")
    run.add_argument("scenario", type=Path,
                     help="scenario TOML file, e.g. harness/scenario/scenarios/smoke.toml")
    run.add_argument("--case", action="append", metavar="NAME",
                     help="run only this case (may be given again; default: every case)")
    run.add_argument("--out", type=Path, help="run directory (default: results/<run-id>/)")
    run.add_argument("--quick", action="store_true", help="apply the scenario's [quick] overrides")
    run.add_argument("--repeat", type=int, default=1, metavar="N",
                     help="run each case N times (as <case>-r1..rN, round by round), for compare's noise")
    run.add_argument("-v", "--verbose", action="store_true", help="log the harness's steps to stderr")
    sustain = sub.add_parser("sustain", help="find the highest constant rate a case keeps up with")
    sustain.add_argument("scenario", type=Path, help="scenario TOML file; each trial runs its workload's "
                         "duration at one constant rate, without faults")
    sustain.add_argument("--case", help="the case to run (default: the first)")
    sustain.add_argument("--p99", help="event-time p99 bound of a sustained rate (default: the pipeline's "
                         "watermark delay + 5s, since no output can come sooner than the watermark, + the "
                         "workload's late_by when late_share >= 1%%)")
    sustain.add_argument("--min-eps", type=float, default=250.0, help="the first rate tried (default 250)")
    sustain.add_argument("--max-eps", type=float, default=32_000.0,
                         help="the highest rate tried (default 32000)")
    sustain.add_argument("--steps", type=int, default=None,
                         help="at most this many bisections after doubling (default: until the first rate "
                              "that failed is within 10%% of the last that held)")
    sustain.add_argument("--executors", type=_sizes, metavar="N,N,...",
                         help="run the search once per number of executors (e.g. 1,2,4): a scaling curve")
    sustain.add_argument("--out", type=Path, help="run directory (default: results/<run-id>/)")
    sustain.add_argument("--quick", action="store_true", help="apply the scenario's [quick] overrides")
    sustain.add_argument("-v", "--verbose", action="store_true", help="log the harness's steps to stderr")
    hunt = sub.add_parser("hunt", help="search fault plans drawn from a seed for one that breaks a "
                          "case's guarantee, and shrink it to the smallest; exit 1 when found")
    hunt.add_argument("scenario", type=Path,
                      help="scenario TOML file; its own faults are replaced by the plans")
    hunt.add_argument("--case", help="the case to hunt in (default: the first)")
    hunt.add_argument("--runs", type=int, default=10, help="plans to try (default 10)")
    hunt.add_argument("--seed", type=int, default=1,
                      help="the seed of the plans (default 1): the same seed, the same plans")
    hunt.add_argument("--kinds", help="comma-separated fault kinds to draw from (default: every kind the "
                      "case can run)")
    hunt.add_argument("--budget", default="30m", help="stop after this long, saying so (default 30m)")
    hunt.add_argument("--all", action="store_true", help="go on to --runs after the first violation")
    hunt.add_argument("--out", type=Path, help="run directory (default: results/<run-id>/)")
    hunt.add_argument("--quick", action="store_true", help="apply the scenario's [quick] overrides")
    hunt.add_argument("--plan-only", action="store_true",
                      help="print the plans and the ordered pairs they cover, start nothing; with --out DIR, "
                           "write DIR/plans.json")
    hunt.add_argument("-v", "--verbose", action="store_true", help="log the harness's steps to stderr")
    report = sub.add_parser("report", help="rebuild a run's report.html from its run directory alone")
    report.add_argument("run_dir", type=Path, help="the run directory (holding summary.json)")
    again = sub.add_parser("check", help="run every oracle of a run again from its run directory alone "
                           "(no Kafka, PostgreSQL or cluster); exit code by the verdicts, as run's")
    again.add_argument("run_dir", type=Path, help="the run directory (holding summary.json), wherever it "
                       "lies now; the re-check writes RUN_DIR/check/<stamp>/, never summary.json")
    again.add_argument("--imports", action="append", default=[], metavar="DIR",
                       help="where the scenario's own modules (a job, an oracle) are, when no longer where "
                            "the run had them (may be given again)")
    compare = sub.add_parser("compare", help="compare two runs, metric by metric, against the noise; "
                             "exit 1 on a regression, 4 when NEW did not run every case of BASE to "
                             "its end (aborted, an error, a case missing) or a verdict is UNKNOWN")
    compare.add_argument("base", type=Path, help="the baseline: a run directory, a summary.json, or a "
                         "directory of baselines (results/baseline/: the one of NEW's scenario is picked)")
    compare.add_argument("new", type=Path, help="the run to judge: a run directory or a summary.json")
    compare.add_argument("--fail-on", default=None, metavar="RULES",
                         help='comma-separated rules, e.g. "p99:+10%%,throughput:-5%%,lost:>0" '
                              "(the default); "
                              f"metrics: {', '.join(f.name for f in figures.compared())}")
    compare.add_argument("--base-also", type=Path, action="append", default=[], metavar="RUN",
                         help="another run of the baseline, its cases taken as repeats (may be given again)")
    compare.add_argument("--new-also", type=Path, action="append", default=[], metavar="RUN",
                         help="another run of the new side, its cases taken as repeats (may be given again)")
    compare.add_argument("--history", type=Path, default=None, metavar="STORE",
                         help="judge single runs by the noise this history store measured on NEW's machine")
    compare.add_argument("--across-machines", action="store_true",
                         help="compare runs of two machines: verdicts and the figures that travel only")
    history = sub.add_parser("history", help="the nightly history: add runs, find changes, draw the trend")
    hsub = history.add_subparsers(dest="history_command", required=True)
    hadd = hsub.add_parser("add", help="append runs to a history store (a directory; created if missing)")
    hadd.add_argument("store", type=Path)
    hadd.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR")
    hadd.add_argument("--report-url", default=None,
                      help="where the run's report.html will be read (a CI artifact's URL); "
                           "default: its path")
    hcheck = hsub.add_parser("check", help="change points in speed and correctness; exit 1 on one for the "
                             "worse in the newest nights")
    hcheck.add_argument("store", type=Path)
    hcheck.add_argument("--json", type=Path, default=None, metavar="FILE",
                        help="also write the changes as JSON")
    hreport = hsub.add_parser("report", help="write the trend page")
    hreport.add_argument("store", type=Path)
    hreport.add_argument("--out", type=Path, default=Path("trend.html"),
                         help="the page (default: trend.html)")
    sub.add_parser("fetch-jvm", help="fetch the pinned Kafka and Spark-connector jars with mvn (once)")
    sub.add_parser("fetch", help="fetch-jvm, then build the pinned Toxiproxy with go install (once)")
    preview = sub.add_parser("replay-preview", help="what a replay of your records would send: their schema, "
                             "event-time span and order (docs/your-job.md)")
    preview.add_argument("file", type=Path, help="JSON lines, CSV or Parquet, or a directory of them")
    preview.add_argument("--event-time", help="the event-time column (default: the one that looks like it)")
    preview.add_argument("--key", help="the key column, if any")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _command(args)
    finally:
        _join_threads()


THREADS_JOIN_S = 10.0


def _join_threads(timeout_s: float = THREADS_JOIN_S) -> list[str]:
    """Wait for every thread but this one to end, so that none is still inside native code
    (pyarrow, librdkafka) while the interpreter tears down: a run ends with its verdict's exit
    code, never with SIGABRT. Returns (and logs) the names of any still running."""
    import threading
    import time

    deadline = time.monotonic() + timeout_s
    for thread in threading.enumerate():
        if thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
    left = [t.name for t in threading.enumerate() if t is not threading.current_thread() and t.is_alive()]
    if left:
        logging.getLogger(__name__).warning("threads still running at exit: %s", ", ".join(left))
    return left


def _command(args) -> int:
    try:
        if args.command == "fetch-jvm":
            return _fetch_jvm()
        if args.command == "fetch":
            return _fetch_all()
        if args.command == "sustain":
            return _sustain(args)
        if args.command == "hunt":
            return _hunt(args)
        if args.command == "report":
            return _report(args)
        if args.command == "check":
            return _recheck(args)
        if args.command == "compare":
            return _compare(args)
        if args.command == "replay-preview":
            from workloads.replay.preview import preview

            if not args.file.exists():
                raise Problem(f"{args.file}: no such file or directory (looked from {Path.cwd()})",
                              "give the path of your records, relative to this directory or absolute")
            print(preview(args.file, args.event_time, args.key))
            return 0
        if args.command == "history":
            return _history(args)
        return _run(args)
    except Problem as exc:   # the harness's errors and the generator's
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except RunAborted as exc:
        print(f"aborted: {exc}; every service was stopped", file=sys.stderr)
        return 128 + exc.signum
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            traceback.print_exc()
            return _internal_error()
        print(f"error: {no_space(exc, getattr(args, 'out', None))}", file=sys.stderr)
        return 2
    except Exception:  # noqa: BLE001 - a bug: say so, distinctly from a failed verdict
        traceback.print_exc()
        return _internal_error()


def _internal_error() -> int:
    print("error: internal error in the harness (a bug: please report it with the traceback); "
          "every service was stopped", file=sys.stderr)
    return 3


def no_space(exc: OSError, out) -> HarnessError:
    """A disk or quota that filled mid-run: not a bug, a machine to free (exit 2, as any
    broken environment). Names the file, the free space left where the run writes, and the
    fix."""
    where = Path(out) if out else Path.cwd()
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        free = f"; {shutil.disk_usage(where).free / 2**30:.1f} GiB free under {where} now"
    except OSError:
        free = ""
    return HarnessError(f"no space left on the device writing {exc.filename or 'a file'}{free}; "
                        "every service was stopped",
                        "free space (old run directories are the usual bulk: each trial of a sustain search "
                        "keeps its truth and sink) or give --out a bigger file system, then run again")


def _report(args) -> int:
    from harness.report import html

    if not (args.run_dir / "summary.json").is_file():
        raise HarnessError(f"{args.run_dir}: no summary.json there",
                           "give the run directory a `python -m harness run` wrote")
    try:
        print(html.write(args.run_dir))
    except ValueError as exc:   # a schema version this harness does not know
        raise HarnessError(str(exc), "rebuild it with a harness that knows that schema version") from None
    return 0


def _recheck(args) -> int:
    """`check`: every oracle of the run again (harness/run/recheck.py); the run's table with the
    re-checked verdicts, each case whose verdict differs from the run's said so, and the exit code
    of those verdicts (0 PASS, 1 FAIL, 4 UNKNOWN)."""
    from harness.report import table
    from harness.run import recheck

    missing = [d for d in args.imports if not Path(d).is_dir()]
    if missing:
        raise HarnessError(f"--imports {missing[0]}: no such directory", "give the directory of the "
                           "scenario's own modules (the job's, the oracle's)")
    result, cases, out = recheck.recheck(args.run_dir, tuple(str(Path(d).resolve()) for d in args.imports))
    _out(table.render(result))
    for case in cases:
        if case.why_not:
            _out(f"{case.case.name}: not checked again ({case.why_not}): the run's {case.before} stands")
        elif case.before != case.case.verdict.status:
            _out(f"{case.case.name}: the run said {case.before}, the re-check {case.case.verdict.status}")
    _out(f"re-check: {out}")
    return exit_code(result)


def _compare(args) -> int:
    """`compare` (harness/report/compare.py; `--history` reads harness/history/check.py)."""
    from harness.history.check import noise_for
    from harness.report import compare

    return compare.main(args, noise_for)


def _history(args) -> int:
    """`history add|check|report` (harness/history/command.py)."""
    from harness.history import command

    return command.main(args)


def _fetch_jvm() -> int:
    from harness import jvm

    with _cache_lock():
        for name, path in jvm.fetch_all(log=lambda m: print(m, file=sys.stderr)).items():
            print(f"{name}: {path}")
    return 0


def _fetch_all() -> int:
    from harness import toxiproxy_build

    _fetch_jvm()
    with _cache_lock():
        print(f"toxiproxy: {toxiproxy_build.fetch_toxiproxy(log=lambda m: print(m, file=sys.stderr))}")
    return 0


@contextlib.contextmanager
def _cache_lock():
    """One fetch into the cache at a time: two tox environments set up at once (say tox -e test
    and tox -e e2e in two terminals) would each find an artifact missing and fetch it into the
    same directory, one deleting what the other wrote. The second waits, then finds it."""
    import fcntl

    from harness.paths import cache_dir

    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / ".fetch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(args, search=None) -> int:
    from harness import scenario as scenario_mod

    scenario = scenario_mod.load(args.scenario, quick=args.quick)  # validate before anything starts
    if search is None and args.case:
        from harness.api import only_cases

        scenario = only_cases(scenario, args.case, "--case")
    repeat = getattr(args, "repeat", 1)
    if repeat < 1:
        from harness.errors import ScenarioError

        raise ScenarioError(f"--repeat {repeat}: a case runs at least once", "give --repeat 1 or more")
    scenario = scenario.repeated(repeat)
    if search is not None:
        scenario = search.narrow(scenario)
    from harness.paths import results_dir
    from harness.report import table
    from harness.results import rundir
    from harness.run import runner
    from harness.services.base import Registry, describe_reaped
    from workloads.progress import Progress

    if args.out is not None:
        rundir.check_out(args.out)
    _raise_on_signals()   # a Ctrl-C in the check before start (a Spark process of its own) ends as any
    runner.preflight(scenario)
    run_id = rundir.new_run_id(scenario.name)  # unique even when --out names the directory
    run_dir = rundir.RunDir(args.out or results_dir() / run_id).create(scenario.path, scenario.to_dict())
    os.environ["HARNESS_RUN_ID"] = run_id  # inherited by every process the run starts
    _log_to(run_dir.log, args.verbose)
    progress = Progress()
    quick = " (quick)" if args.quick else ""
    progress.step(f"run {run_id}: scenario {scenario.name}{quick} -> {run_dir.path}")
    registry = Registry(pids_path=run_dir.pids)
    cases = None if search is None else search.cases(run_dir, run_id, progress, registry)
    try:
        with registry:
            for line in describe_reaped(registry.reaped):
                progress.step(line)
            result = runner.run(scenario, run_dir, run_id, progress, registry, cases)
        runner.no_leftovers(result, run_dir, run_id, progress)
    finally:
        _write_report(run_dir, progress)
        progress.step(f"results: {run_dir.path}")
    _out(table.render(result))
    if search is not None:
        _out(search.render(result))
        return search.exit_code(result)
    return exit_code(result)


EXIT_CODES = {PASS: 0, FAIL: 1, UNKNOWN: 4}


def exit_code(result) -> int:
    """`run`'s exit code from its cases' verdicts: 1 on any FAIL, else 4 on any UNKNOWN, else 0."""
    return EXIT_CODES[result.verdict_status]


def _out(text: str) -> None:
    """The run's table on stdout; a reader that went away (a killed test runner, `| head`) does
    not turn a finished run's exit code into a crash: its results are in the run directory."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        # Python's advice: point stdout at devnull, so that the flush at exit does not raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _write_report(run_dir, progress) -> None:
    """report.html at the end of every run that wrote a summary, aborted ones too. A report
    that cannot be built is said, never allowed to hide how the run itself ended."""
    if not run_dir.summary.exists():
        return
    from harness.report import html

    try:
        progress.step(f"report: {html.write(run_dir.path)}")
    except Exception as exc:  # noqa: BLE001 - the run's results are in place; the report is extra
        logging.getLogger(__name__).exception("report.html")
        progress.step(f"report.html was not written ({type(exc).__name__}: {exc}); "
                      f"python -m harness report {run_dir.path} retries it")


def _sustain(args) -> int:
    """`sustain`: the run's cases are the trials of the search (harness/run/sustain.py)."""
    from harness.run.searches import SustainSearch
    from harness.scenario import parse_duration_ms

    p99_ms = None if args.p99 is None else parse_duration_ms(args.p99, "--p99")
    search = SustainSearch(args.case, p99_ms, args.min_eps, args.max_eps, args.steps, args.executors)
    return _run(args, search)


def _sizes(text: str) -> list[int]:
    """--executors 1,2,4"""
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of numbers of executors, "
                                         "e.g. 1,2,4") from None


def _hunt(args) -> int:
    """`hunt`: the run's cases are the search's runs and shrinking steps (harness/hunt/); with
    --plan-only, the plans alone, and nothing started."""
    from harness.hunt.search import HuntSearch

    search = HuntSearch.of(args.case, args.runs, args.seed, args.kinds, args.budget, args.all)
    if args.plan_only:
        return _plans_only(args, search)
    return _run(args, search)


def _plans_only(args, search) -> int:
    """The hunt's plans in the order they would run, with the ordered pairs each covers first."""
    import json

    from harness import scenario as scenario_mod
    from harness.hunt import plan as hunt_plan
    from harness.hunt.search import plan_table

    scenario = search.narrow(scenario_mod.load(args.scenario, quick=args.quick))
    space = search.space(scenario)
    plans = hunt_plan.plans(space, search.options.seed, search.options.runs)
    print(plan_table(space, plans))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / "plans.json"
        path.write_text(json.dumps({"case": search.spec.name, "seed": search.options.seed, "plans": plans,
                                    "coverage": hunt_plan.coverage(space, plans)}, indent=2) + "\n")
        print(f"plans: {path}")
    return 0


def _raise_on_signals() -> None:
    """SIGINT and SIGTERM unwind the stack (so every service is stopped) instead of dying."""
    from harness.run.schedule import stop_every_schedule  # imported now, not in the handler

    def handler(signum, frame):
        # a second Ctrl-C or SIGTERM must not cut the cleanup short
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop_every_schedule()
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
