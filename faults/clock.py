"""Clock faults: one process's wall clock skewed for a span, or jumped, with libfaketime
(workloads/clock.py), as Jepsen's clock nemesis and libfaketime attack clocks.

`clock-skew` sets the target's clock `offset` from the real one (e.g. "-30s") for `duration`
(or for the rest of the case), then puts it back; `clock-jump` moves it `by` (e.g. "+90s")
once, and it stays moved. Targets: `driver` (Spark's driver JVM: its processing-time
trigger, its heartbeat receiver, its batch timestamps), `executor:N` (one executor JVM and
its Python workers: transformWithState's processing-time timers, task timeouts) and
`broker` (Kafka's log-append times, its session and transaction timeouts).

What stays on the real clock, and why the verdict cannot be fooled: event time comes from
the generator, ground truth from the harness, the sink's commit times from PostgreSQL's own
clock (clock_timestamp()), and the driver's batch times are put back on the real clock with
the offset each progress record carries (workloads/pipelines/progress_log.end_ms). A skewed
broker's log-append times are skewed: processing-time latency, measured from them, carries
the broker's skew while it lasts, and the fault's record says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import psutil

from faults.base import Details, Fault, Observation
from faults.kinds import TARGET, FaultKind, Key, Preparation, by_target
from faults.process import choose_executor
from faults.spec import FaultSpec
from faults.targets import RefusedTarget
from workloads import clock
from workloads.wait import WaitTimeout

# a nemesis draws 30 s either way, or 150 s ahead: past Spark's executor heartbeat timeout (120 s)
MOVES = ("-30s", "+30s", "+150s")
OFFSET = Key("offset", "signed-duration", "how far the target's clock is from the real one while the skew "
             "lasts: \"-30s\" behind, \"+2m\" ahead", store="offset_ms", draw="choice", choices=MOVES)
BY = Key("by", "signed-duration",
         "how far the target's clock jumps, and stays: \"+90s\" ahead, \"-30s\" back",
         store="by_ms", draw="choice", choices=MOVES)
SPAN = Key("duration", "duration", "how long the skew lasts (absent: the rest of the case)", default=None,
           gt=0, draw="span")


@dataclass
class ClockDetails(Details):
    """The clock file the target reads, and its offset before and after (milliseconds)."""

    clock_file: str = ""
    before_ms: int = 0
    after_ms: int = 0


def _clocks(spec: FaultSpec) -> Preparation:
    return Preparation(clocks=frozenset({spec.target_kind}))


class ClockFault(Fault):
    """Rewrite the target's clock file; the process reads it within a second."""

    file: Path | None = None
    before_ms = after_ms = 0
    pids: list[int] = []

    def _new_offset(self, before_ms: int) -> int:
        raise NotImplementedError

    def _inject(self) -> None:
        self.file, self.pids, self.target = self._aim()
        self.before_ms = clock.read_ms(self.file)
        self.after_ms = self._new_offset(self.before_ms)
        clock.write(self.file, self.after_ms)

    def _aim(self) -> tuple[Path, list[int], str]:
        """The clock file of the target, the pids that read it, and what to call it."""
        kind = self.spec.target_kind
        if kind == "executor":
            executors, chosen = choose_executor(self)
            proc = executors[chosen]
            return Path(proc.cwd()) / clock.EXECUTOR_FILE, [proc.pid], f"executor:{chosen} (pid {proc.pid})"
        if kind == "broker":
            broker = self.targets.service("broker")
            file = getattr(broker, "clock_file", None)
            if file is None:
                raise RefusedTarget("the broker did not start on a clock file (a Kafka shared by a pytest "
                                    "session, or not the harness's own)")
            return Path(file), list(broker.pids()), "broker"
        if self.targets.driver_clock is None:
            raise RefusedTarget("the driver did not start on a clock file")
        driver = self.targets.driver()
        return self.targets.driver_clock, list(driver.pids()), "driver"

    def _reading(self) -> list[int]:
        """The target's pids that run with libfaketime on this clock file."""
        out: list[int] = []
        if self.file is None:
            return out
        for pid in self.pids:
            try:
                env = psutil.Process(pid).environ()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            named = env.get("FAKETIME_TIMESTAMP_FILE", "")
            if "faketime" in env.get("LD_PRELOAD", "") and named and (
                    Path(named) == self.file or (not Path(named).is_absolute() and named == self.file.name)):
                out.append(pid)
        return out

    def _driver_evidence(self) -> str | None:
        """For the driver: a batch that ran on the new clock (its record's clock_offset_ms),
        and how far its timestamp was from the harness's clock."""
        if self.spec.target_kind != "driver" or self.landed_at is None:
            return None
        after = self.landed_at + 1.0   # libfaketime reads the file at most once a second

        def batch():
            from workloads.pipelines.progress_log import end_ms

            for p in self.targets.progress():
                if p.get("clock_offset_ms") == self.after_ms and end_ms(p) / 1000 >= after:
                    return p
            return None

        try:
            p = self.targets.wait(batch, "batch", "no batch ran on the driver's new clock")
        except WaitTimeout:
            return None
        return (f"batch {p['batchId']} ran on it, its timestamp {self.after_ms / 1000:+g} s from the "
                "harness's clock")

    def observe(self) -> Observation:
        details = ClockDetails(clock_file=str(self.file), before_ms=self.before_ms, after_ms=self.after_ms)
        reading = self._reading()
        if not reading:
            return Observation(False, f"{self.target}: no process of it runs with libfaketime on {self.file}",
                               details=details)
        evidence = self._driver_evidence()
        said = f"; {evidence}" if evidence else ""
        broker = ("; processing-time latency, from the broker's append times, carries the skew while it "
                  "lasts" if self.spec.target_kind == "broker" else "")
        return Observation(True, f"{self.target}: clock {self._what()} ({len(reading)} process(es) read "
                                 f"{details.clock_file}){said}{broker}", details=details)

    def _what(self) -> str:
        raise NotImplementedError

    def restore(self) -> bool:
        """The broker outlives the case: its clock goes back to the real one for the next."""
        if self.spec.target_kind == "broker" and self.file is not None and clock.read_ms(self.file):
            clock.write(self.file, 0)
            return True
        return False


class ClockSkew(ClockFault):
    def _new_offset(self, before_ms: int) -> int:
        return int(self.spec.get("offset_ms"))

    def _heal(self) -> None:
        if self.file is not None and self.spec.duration_s:
            clock.write(self.file, self.before_ms)

    def _what(self) -> str:
        span = f" for {self.spec.duration_s:g} s" if self.spec.duration_s else " for the rest of the case"
        return f"{self.after_ms / 1000:+g} s from the real one{span}"


class ClockJump(ClockFault):
    def _new_offset(self, before_ms: int) -> int:
        return before_ms + int(self.spec.get("by_ms"))

    def _what(self) -> str:
        by = int(self.spec.get("by_ms")) / 1000
        return f"jumped {by:+g} s (now {self.after_ms / 1000:+g} s from the real one)"


_TARGETS = ("driver", "executor", "broker")
_REQUIRES = by_target({"driver": ("faketime",), "executor": ("faketime", "own-executors"),
                       "broker": ("faketime", "own-kafka", "one-own-broker")})

CLOCK_SKEW_FAULT = FaultKind(
    "clock-skew", ClockSkew,
    about="the target's wall clock runs `offset` from the real one for `duration` (or the rest of the case), "
          "then goes back; a process of the target must run on the moved clock (libfaketime), and for the "
          "driver a batch must run on it",
    models="a machine whose clock drifted or was set wrong (NTP unreachable, a VM resumed from a snapshot)",
    keys=(TARGET, OFFSET, SPAN), targets=_TARGETS, default_target="driver",
    nemesis_targets=("driver", "executor:random"), requires=_REQUIRES, details=ClockDetails, prepare=_clocks,
    by_progress=True)

CLOCK_JUMP_FAULT = FaultKind(
    "clock-jump", ClockJump,
    about="the target's wall clock jumps `by` and stays there; a process of the target must run on the moved "
          "clock (libfaketime), and for the driver a batch must run on it",
    models="NTP stepping a clock, a leap second applied as a step, an operator setting the date",
    keys=(TARGET, BY), targets=_TARGETS, default_target="driver",
    nemesis_targets=("driver", "executor:random"), requires=_REQUIRES, details=ClockDetails, prepare=_clocks,
    by_progress=True)
