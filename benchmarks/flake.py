"""The flake lane (issue 48): the end-to-end lane, the planted bugs and their twins among it, run
N times on one core beside a CPU-bound neighbour, and each test's passes out of N.

    python -m benchmarks.flake [--rounds N] [--core C] [--out DIR] [PYTEST ARGS ...]
    tox -e flake [-- --rounds 2 tests/test_faults_docs.py -k docs_example]

A gate that passes on a quiet 2-core machine can fail on a loaded one: a fault that waits for a
state it never sees in time, a drain that runs out. Here every round runs pytest pinned to core
C (as `taskset -c C` pins it: sched_setaffinity, which Spark, Kafka and PostgreSQL inherit)
while a busy loop pinned to the same core takes its share of it. The lane starts that neighbour
and stops it, whatever happens: at the lane's end, on an exception, on Ctrl-C or SIGTERM (and,
the lane killed outright, the kernel kills it: PR_SET_PDEATHSIG). Without PYTEST ARGS it runs
`-m long_e2e tests` (tox -e e2e's selection, the planted bugs' tests/test_job_plants_e2e.py
among it). Each round's junit XML is kept in DIR (default: a new directory under .cache/flake/).
Exit 0 when every test passed in every round, 1 when one failed in any, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SELECTION = ("-m", "long_e2e", "tests")
_PR_SET_PDEATHSIG = 1
# the neighbour: a Python busy loop, a core's worth of CPU while it runs
_BUSY = "while True:\n    pass\n"


def _pinned(core: int):
    """A child's set-up before it runs: on `core` alone (what `taskset -c core` does, with no
    program to install)."""
    return lambda: os.sched_setaffinity(0, {core})


def _pinned_and_dying_with_the_lane(core: int):
    """The neighbour's set-up: pinned, and SIGKILLed by the kernel when the lane dies, even by
    SIGKILL (PR_SET_PDEATHSIG)."""
    def setup() -> None:
        os.sched_setaffinity(0, {core})
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    return setup


@contextmanager
def neighbour(core: int) -> Iterator[subprocess.Popen]:
    """A CPU-bound process pinned to `core` for the block's duration; killed and reaped when the
    block ends, however it ends."""
    proc = subprocess.Popen([sys.executable, "-c", _BUSY], start_new_session=True,
                            preexec_fn=_pinned_and_dying_with_the_lane(core))
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@dataclass
class Tally:
    """Each test's outcomes over the rounds, by its junit id (classname::name)."""

    rounds: int = 0
    passed: dict[str, int] = field(default_factory=dict)
    failed: dict[str, list[str]] = field(default_factory=dict)   # per test: "round 2: <first line>"
    skipped: dict[str, int] = field(default_factory=dict)

    def add(self, junit: Path, round_no: int) -> None:
        """Count one round's junit XML."""
        self.rounds += 1
        for case in ET.parse(junit).getroot().iter("testcase"):
            test = f"{case.get('classname')}::{case.get('name')}"
            self.passed.setdefault(test, 0)
            bad = case.find("failure") if case.find("failure") is not None else case.find("error")
            if bad is not None:
                first = ((bad.get("message") or bad.text or "").strip().splitlines() or ["?"])[0]
                self.failed.setdefault(test, []).append(f"round {round_no}: {first[:160]}")
            elif case.find("skipped") is not None:
                self.skipped[test] = self.skipped.get(test, 0) + 1
            else:
                self.passed[test] += 1

    def failures(self) -> int:
        return sum(len(v) for v in self.failed.values())

    def table(self) -> list[str]:
        """A line per test, the least passed first: `passes/N  test`, then each failure."""
        lines = []
        for test in sorted(self.passed, key=lambda t: (self.passed[t], t)):
            skips = f"  ({self.skipped[test]} skipped)" if test in self.skipped else ""
            lines.append(f"{self.passed[test]:>3}/{self.rounds:<3} {test}{skips}")
            lines += [f"          {why}" for why in self.failed.get(test, [])]
        return lines


# how long pytest, its runs and their services get to wind down after the lane is interrupted
WIND_DOWN_S = 120.0


def run_round(round_no: int, core: int, selection: list[str], out: Path) -> tuple[int, float, Path]:
    """One pytest run pinned to `core`: its exit code, its seconds and its junit XML. Pytest
    runs in a process group of its own; when the lane is interrupted, the whole group gets
    SIGINT, as a terminal's Ctrl-C gives it, so each `harness run` a test started stops its
    services itself, and pytest writes its junit XML; SIGKILL only after WIND_DOWN_S. (Killing
    pytest alone left a test's `harness run` going on, with its Kafka, PostgreSQL and Spark.)"""
    junit = out / f"round-{round_no}.xml"
    began = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE",
                             f"--junitxml={junit}", *selection], cwd=REPO, preexec_fn=_pinned(core),
                            start_new_session=True)
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        _wind_down(proc)
        raise
    return code, time.monotonic() - began, junit


def _wind_down(proc: subprocess.Popen) -> None:
    """SIGINT to pytest's whole group, then SIGKILL to what is left after WIND_DOWN_S."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(WIND_DOWN_S)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.flake", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="how many times to run the selection (default 3)")
    p.add_argument("--core", type=int, default=0, help="the core pytest and the neighbour share (default 0)")
    p.add_argument("--out", type=Path, default=None, help="where each round's junit XML goes")
    args, selection = p.parse_known_args(argv)
    if args.rounds < 1:
        p.error(f"--rounds {args.rounds}: at least 1 round; write e.g. --rounds 3")
    cores = os.cpu_count() or 1
    if args.core < 0 or args.core >= cores:
        p.error(f"--core {args.core}: this machine has cores 0 to {cores - 1}; write e.g. --core 0")
    return args, selection or list(DEFAULT_SELECTION)


def _stop_on_sigterm(*_) -> None:
    raise KeyboardInterrupt   # the neighbour's `finally` runs as on Ctrl-C


def main(argv: list[str] | None = None) -> int:
    args, selection = _parse(sys.argv[1:] if argv is None else argv)
    out = args.out or REPO / ".cache" / "flake" / time.strftime("%Y%m%dT%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    # Ctrl-C stops the lane even when it was started with SIGINT ignored (from a script's
    # background job, `nohup`): Python then installs no KeyboardInterrupt of its own, and a
    # fresh clone's CI run started so left the lane running on after the SIGINT
    signal.signal(signal.SIGINT, signal.default_int_handler)
    tally = Tally()
    print(f"flake lane: {args.rounds} round(s) of `pytest {' '.join(selection)}` pinned to core {args.core} "
          f"beside a busy loop on it; junit XML in {out}", flush=True)
    try:
        with neighbour(args.core) as busy:
            print(f"neighbour: pid {busy.pid} (a Python busy loop on core {args.core})", flush=True)
            for n in range(1, args.rounds + 1):
                code, seconds, junit = run_round(n, args.core, selection, out)
                print(f"round {n}/{args.rounds}: pytest exit {code} in {seconds:.0f} s", flush=True)
                if not junit.exists():
                    print(f"round {n} wrote no {junit}: pytest did not run the selection", file=sys.stderr)
                    return 2 if code in (4, 5) else 1
                tally.add(junit, n)
    except KeyboardInterrupt:
        print("flake lane interrupted: the neighbour is stopped", file=sys.stderr)
        if tally.rounds:
            print("\n".join(tally.table()))
        return 130
    print(f"\npasses out of {tally.rounds}, on core {args.core} beside a busy neighbour:")
    print("\n".join(tally.table()))
    failures = tally.failures()
    print(f"{failures} failure(s) in {tally.rounds} round(s) of {len(tally.passed)} test(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
