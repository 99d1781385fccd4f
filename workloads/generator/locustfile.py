"""The workload generator as a Locust load test, for load that outgrows one process or machine.

Each Locust process that runs users (the single process of a local run, or every
`--worker`) sends one share of one deterministic plan with `workloads.generator.generate`:
worker j of N sends the events with event_id mod N == j and writes
`<truth-dir>/part-000j.parquet` and `<truth-dir>/report-000j.json`. The rate comes from
the plan's open-loop schedule, not from the user count: `WorkloadShape` keeps one user per
generator process while the workload's rate shape runs and ends the Locust run when it ends.
A user stands for its process's generator in Locust's stats: request type "kafka", name
"produce", one request per progress report, its size the events acknowledged since the
last (so events/s = requests/s x average size) and its response time the sending time
they took (a stalled sender shows as long response times). The generator reports progress
about every 100 ms while it sends. A process runs the workload once: to run it
again, start Locust again with a new --truth-dir.

Options (given to the master, or to the single process; workers take them from the master,
with the paths made absolute, so a worker on another machine needs the same paths):
    --scenario FILE.toml      the [workload] table to send (validated by workloads.generator.spec)
    --bootstrap-servers H:P   Kafka
    --truth-dir DIR           where parts and reports land
    --create-topic            create the workload's topic first (LogAppendTime)
    --start-ms EPOCH_MS       the schedule's origin (default: when the test starts + 3 s)
    --generator-processes N   the share count (default: --expect-workers, or 1 when local)

Headless, one process (from the repository root):

    python -m locust -f workloads/generator/locustfile.py --headless --create-topic \\
        --scenario harness/scenario/scenarios/smoke.toml --bootstrap-servers 127.0.0.1:9092 \\
        --truth-dir results/locust-1

Distributed, one master and two workers on one machine (start them in any order; the
master waits for both, and every process exits when the workload has been sent):

    python -m locust -f workloads/generator/locustfile.py --headless --master --expect-workers 2 \\
        --create-topic --scenario harness/scenario/scenarios/smoke.toml \\
        --bootstrap-servers 127.0.0.1:9092 --truth-dir results/locust-2 &
    python -m locust -f workloads/generator/locustfile.py --worker &
    python -m locust -f workloads/generator/locustfile.py --worker &
    wait

(`--processes 2` instead of `--master --expect-workers 2` forks the two workers itself.)
Workers on other machines add `--master-host HOST`; their clocks must agree (NTP), since
every share follows the same epoch-millisecond schedule. Then one run's truth and report:

    python -c "from workloads.generator.locustfile import merge; truth, report = merge('results/locust-2')"
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import time
import tomllib
from pathlib import Path

import gevent
from gevent.event import Event
from locust import LoadTestShape, User, constant, events, task
from locust.runners import MasterRunner, WorkerRunner

logger = logging.getLogger(__name__)
logging.getLogger("kafka").setLevel(logging.WARNING)   # kafka-python (topic creation) chats at INFO

START_LEAD_MS = 3000   # from the test start to the schedule's origin: workers get it and connect
REPORT_EVERY_S = 1.0   # how often a user forwards its generator's progress to Locust's stats
DONE_TIMEOUT_S = 60.0  # how long to wait for the last acknowledgements after the schedule ends
DONE_MESSAGE = "generator_done"


@events.init_command_line_parser.add_listener
def _add_options(parser, **_) -> None:
    parser.add_argument("--scenario", metavar="FILE.toml", help="scenario whose [workload] table is sent")
    parser.add_argument("--bootstrap-servers", metavar="HOST:PORT", help="Kafka to send to")
    parser.add_argument("--truth-dir", metavar="DIR", help="where part-*.parquet and report-*.json go")
    parser.add_argument("--create-topic", action="store_true", default=False,
                        help="create the workload's topic (LogAppendTime) if it does not exist")
    parser.add_argument("--start-ms", metavar="EPOCH_MS", type=int, default=None,
                        help="the schedule's origin in epoch ms (default: test start + 3 s)")
    parser.add_argument("--generator-processes", metavar="N", type=int, default=None,
                        help="processes sharing the plan (default: --expect-workers, or 1 when local)")


def load_spec(path: str | Path):
    """The validated [workload] table of the scenario at `path`; raises SpecError."""
    from workloads.errors import SpecError
    from workloads.generator import spec as spec_mod

    try:
        raw = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SpecError(f"--scenario {path}: {exc}", "pass a readable scenario TOML file") from None
    if "workload" not in raw:
        raise SpecError(f"--scenario {path} has no [workload] table",
                        "add one (see workloads/generator/spec.py)")
    return spec_mod.parse(raw["workload"])


def share_of(environment) -> tuple[int, int]:
    """(j, n): this process sends share j of n; a local run is share 0 of 1."""
    options = environment.parsed_options
    distributed = isinstance(environment.runner, MasterRunner | WorkerRunner)
    count = options.generator_processes or (options.expect_workers if distributed else 1)
    return getattr(environment.runner, "worker_index", 0), count


def _check_options(environment) -> None:
    """Refuse to start without what every process needs (raises SpecError)."""
    from workloads.errors import SpecError

    options = environment.parsed_options
    for name in ("scenario", "bootstrap_servers", "truth_dir"):
        if not getattr(options, name):
            flag = "--" + name.replace("_", "-")
            raise SpecError(f"{flag} is missing", f"give {flag} to the master (or the single process)")
    load_spec(options.scenario)
    count = share_of(environment)[1]
    local = not isinstance(environment.runner, MasterRunner)
    if count < 1 or (local and count != 1):
        raise SpecError(f"--generator-processes {count}: a local run is one process",
                            "drop it, or run --master with --expect-workers N and N --worker processes")


class WorkloadShape(LoadTestShape):
    """A workload's rate shape as a Locust load shape: `users` users while the shape runs, then None.

    Time is the wall clock from the schedule's origin `start_ms` (every process of a
    distributed run shares it), not Locust's own run time; before the origin is known
    the run is starting and the shape holds the users. Locust creates it without
    arguments; it then reads the workload, share count and origin from the options.
    """

    def __init__(self, shape=None, users: int | None = None, start_ms: int | None = None):
        super().__init__()
        self.shape, self.users, self.start_ms = shape, users, start_ms

    def tick(self) -> tuple[int, float] | None:
        if self.shape is None:
            options = self._options()
            self.shape, self.users = load_spec(options.scenario).shape, share_of(self._environment())[1]
        start_ms = self.start_ms or getattr(self._options(), "start_ms", None)
        if start_ms is not None and self.shape.tick(max(time.time() - start_ms / 1000, 0.0)) is None:
            return None
        assert self.users is not None
        return self.users, self.users

    def _environment(self):
        assert self.runner is not None, "Locust gives a shape its runner before the first tick()"
        return self.runner.environment

    def _options(self):
        """The parsed command line of the Locust run this shape belongs to."""
        options = self._environment().parsed_options
        assert options is not None, "a Locust run parses its options before the first tick()"
        return options


class _Cancelled(Exception):
    """Raised in the generator's progress callback to stop it early."""


class _Share:
    """One process's share of the plan: `generate()` in a native thread of gevent's threadpool
    (librdkafka and the encoder must not wait for greenlets), its progress read by greenlets."""

    def __init__(self, environment, spec, share: tuple[int, int]):
        from workloads import generator

        options = environment.parsed_options
        self.environment, self.share = environment, share
        self.truth_dir = Path(options.truth_dir)
        self.end_ms = options.start_ms + spec.duration_s * 1000
        origin = time.monotonic() + (options.start_ms - time.time_ns() // 1_000_000) / 1000
        self.acked, self.acked_at = 0, origin       # written by the generator thread
        self.reported, self.reported_at = 0, origin
        self.cancelled = False
        self.done = Event()
        self.result = gevent.get_hub().threadpool.spawn(
            _returning_errors, generator.generate, spec, options.bootstrap_servers, self.truth_dir,
            start_ms=options.start_ms, share=share, progress=self._progress)
        gevent.spawn(self._finish)

    def _progress(self, sent: int, planned: int) -> None:
        if self.cancelled:
            raise _Cancelled("stopped before the schedule ended")
        if sent > self.acked:
            self.acked, self.acked_at = sent, time.monotonic()

    def report(self) -> None:
        """Forward the events acknowledged since the last report to Locust's stats."""
        acked, at = self.acked, self.acked_at
        if acked > self.reported:
            self.environment.events.request.fire(
                request_type="kafka", name="produce", response_time=(at - self.reported_at) * 1000,
                response_length=acked - self.reported, exception=None)
            self.reported, self.reported_at = acked, at

    def _finish(self) -> None:
        """When generate() returns: the last stats, the report next to the truth part, and word to
        the master."""
        error = None
        try:
            report = self.result.get()
            if isinstance(report, BaseException):
                raise report
            self.acked, self.acked_at = report["events"], time.monotonic()
            self.report()
            path = self.truth_dir / f"report-{self.share[0]:04d}.json"
            path.write_text(json.dumps(report, indent=2) + "\n")
            logger.info("share %d of %d: %s events, %.0f events/s; report %s", *self.share,
                        f"{report['events']:,}", report["achieved_eps"], path)
        except Exception as exc:
            error = f"share {self.share[0]} of {self.share[1]}: {exc}"
            _fail(self.environment, error)
        runner = self.environment.runner
        if isinstance(runner, WorkerRunner):
            _flush_stats(runner)
            runner.send_message(DONE_MESSAGE, {"index": self.share[0], "events": self.acked, "error": error})
        else:
            _let_the_csv_catch_up(self.environment)
        self.done.set()

    def stop(self) -> None:
        """At test stop: cancel if stopped before the schedule ended, then wait for the end."""
        if time.time() * 1000 < self.end_ms - 1000:
            self.cancelled = True   # takes effect at the generator's next progress call
        if not self.done.wait(DONE_TIMEOUT_S):
            _fail(self.environment, f"share {self.share[0]}: the generator did not finish within "
                                    f"{DONE_TIMEOUT_S:.0f} s of the stop; its truth part is incomplete")


def _flush_stats(runner: WorkerRunner) -> None:
    """Send the worker's last counts to the master now, before it quits, rather than at the
    next periodic report: the public event that gathers them, then the public send."""
    data: dict = {}
    runner.environment.events.report_to_master.fire(client_id=runner.client_id, data=data)
    runner.send_message("stats", data)


def _returning_errors(fn, *args, **kwargs):
    """fn's result or the exception it raised (which gevent's threadpool would print as a crash)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        return exc


def _fail(environment, message: str) -> None:
    logger.error(message)
    environment.process_exit_code = 1
    environment.events.request.fire(request_type="kafka", name="produce", response_time=0,
                                    response_length=0, exception=RuntimeError(message))


class GeneratorUser(User):
    """Its process's generator as seen by Locust: forwards progress to the stats."""

    wait_time = constant(REPORT_EVERY_S)

    @task
    def report(self) -> None:
        if _state.share is not None:
            _state.share.report()


class _State:
    share: _Share | None = None                 # on a process that sends
    done: dict[int, dict] = {}                  # on the master: DONE_MESSAGE by worker index


_state = _State()


@events.init.add_listener
def _on_init(environment, **_) -> None:
    if isinstance(environment.runner, WorkerRunner):
        return   # its options arrive from the master with the first spawn message
    try:
        _check_options(environment)
    except Exception as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    options = environment.parsed_options   # absolute, for workers started in another directory
    options.scenario = str(Path(options.scenario).resolve())
    options.truth_dir = str(Path(options.truth_dir).resolve())
    if options.headless:
        _stop_on_sigterm(environment)
    if isinstance(environment.runner, MasterRunner):
        environment.runner.register_message(
            DONE_MESSAGE, lambda msg, **_: _state.done.__setitem__(msg.data["index"], msg.data))


def _stop_on_sigterm(environment) -> None:
    """Locust installs its own SIGTERM handler only after a headless shape run has ended; until
    then a TERM would kill the process mid-run and leave the truth part without its footer."""
    def stop() -> None:
        logger.info("got SIGTERM: stopping the run")
        environment.runner.quit()

    gevent.signal_handler(signal.SIGTERM, stop)


@events.test_start.add_listener
def _on_test_start(environment, **_) -> None:
    options = environment.parsed_options
    if isinstance(environment.runner, WorkerRunner):
        return _start_share(environment)
    if isinstance(environment.runner, MasterRunner):
        _state.done = {}
        workers, count = environment.runner.worker_count, share_of(environment)[1]
        if workers != count:
            _fail(environment, f"{workers} workers are connected for {count} shares: "
                               "set --expect-workers (or --generator-processes) to the number of workers")
            gevent.spawn(environment.runner.quit)
            return
    if options.create_topic:
        from workloads import generator

        spec = load_spec(options.scenario)
        generator.create_topic(options.bootstrap_servers, spec.topic, spec.partitions, exist_ok=True)
    if options.start_ms is None:   # a worker receives it with the spawn message that follows
        options.start_ms = time.time_ns() // 1_000_000 + START_LEAD_MS
    if not isinstance(environment.runner, MasterRunner):
        _start_share(environment)


def _start_share(environment) -> None:
    from workloads.generator import truth

    options = environment.parsed_options
    try:
        j, n = share_of(environment)
        if not 0 <= j < n:
            raise ValueError(f"worker index {j} is not below the share count {n}: was a worker restarted?")
        if options.start_ms is None:
            raise ValueError("no --start-ms came from the master")
        if truth.part_path(Path(options.truth_dir), j).exists():
            raise ValueError(f"{truth.part_path(Path(options.truth_dir), j)} exists: pass a new --truth-dir")
        _state.share = _Share(environment, load_spec(options.scenario), (j, n))
    except Exception as exc:
        _fail(environment, f"cannot start this process's share: {exc}")
        if isinstance(environment.runner, WorkerRunner):
            environment.runner.send_message(DONE_MESSAGE, {"index": environment.runner.worker_index,
                                                           "events": 0, "error": str(exc)})


@events.test_stop.add_listener
def _on_test_stop(environment, **_) -> None:
    if not isinstance(environment.runner, MasterRunner):
        if _state.share is not None:
            _state.share.stop()
        return
    options = environment.parsed_options
    count = share_of(environment)[1]
    if options.start_ms is None:
        return
    end_ms = options.start_ms + load_spec(options.scenario).duration_s * 1000
    if time.time() * 1000 < end_ms - 1000:   # the workers cancel their shares as they stop
        logger.error("stopped before the schedule ended: the truth in %s is partial", options.truth_dir)
        environment.process_exit_code = 1
        return
    deadline = time.monotonic() + DONE_TIMEOUT_S
    while len(_state.done) < count and time.monotonic() < deadline:
        gevent.sleep(0.2)
    problems = [d["error"] for d in _state.done.values() if d["error"]]
    if missing := sorted(set(range(count)) - set(_state.done)):
        problems.append(f"no word from workers {missing} within {DONE_TIMEOUT_S:.0f} s")
    if problems:
        environment.process_exit_code = 1
        logger.error("the workload was not sent whole: %s", "; ".join(problems))
    else:
        sent = sum(d["events"] for d in _state.done.values())
        logger.info("all %d shares sent: %s events", count, f"{sent:,}")
    _let_the_csv_catch_up(environment)


def _let_the_csv_catch_up(environment) -> None:
    """Wait one interval of Locust's --csv writer: it rewrites the stats file every
    CSV_STATS_INTERVAL_SEC and not at exit, so the events of the last report before the stop
    were missing from it when the stop came sooner (5,921 of 6,000 on a loaded machine)."""
    from locust.stats import CSV_STATS_INTERVAL_SEC

    if getattr(environment.parsed_options, "csv_prefix", None):
        gevent.sleep(CSV_STATS_INTERVAL_SEC + 0.25)


def merge(truth_dir: str | Path):
    """One Locust run's ground truth (a DataFrame ordered by event_id) and merged report.

    Raises FileNotFoundError when no process wrote a report, Problem when a share's
    report is missing."""
    from workloads import generator
    from workloads.errors import Problem
    from workloads.generator import truth

    truth_dir = Path(truth_dir)
    reports = {}
    for path in sorted(truth_dir.glob("report-*.json")):
        report = json.loads(path.read_text())
        reports[report["share"][0]] = report
    if not reports:
        raise FileNotFoundError(f"no report-*.json in {truth_dir}: did the Locust run finish?")
    count = next(iter(reports.values()))["share"][1]
    missing = sorted(set(range(count)) - set(reports))
    if missing:
        raise Problem(f"{truth_dir}: shares {missing} of {count} wrote no report",
                           "read those workers' logs; rerun into a new --truth-dir")
    return truth.read(truth_dir), generator.merge_reports([reports[j] for j in range(count)])
