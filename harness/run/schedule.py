"""Run a case's fault schedule: each fault in a thread of its own, due at its `at` (seconds from
the first event sent) or at its progress anchor (the warm-up's end, the Nth batch after it),
recorded for summary.json with what was observed.

A fault is injected when it is due, takes effect (`land`: a delay-commit waits for its batch),
is healed `duration` (or `downtime`) after that, then observed. Faults overlap freely: a
kill-driver inside a delay-commit finds the held batch. Faults due at the same anchor are
injected in the order the scenario lists them, so that one may count on the one before it
(the delay-commit's request is placed before the kill that waits for its batch).

The workload waits for the schedule (Jepsen's phases: the generator runs while the nemesis
schedule is pending, then a quiet end). After its `duration` it goes on while `pending()` names
a fault that has not come, landed, healed and been observed, or whose heal the query has not
read past: `read_past_batches` committed batches (with input) whose end offsets reach what had
been sent to the topic when the fault was observed (`mark`, from the broker). It goes on up
to its cap, `max_duration`; `ended(at)` tells the schedule it stopped.

A fault is injected only while the workload is being sent, and a fault that kills the driver
only with events left for its successor to read: those sent while it is down, and for a fresh
restart (at-most-once, which reads only what is sent after it starts) those sent after the
driver's measured start-up. Since the workload waits for it, only the cap can leave too little
of it: a fault whose moment does not come before the cap (or before a workload that ended
early: its case failed, its custom shape ended) is `missed`, with why, "cut at max_duration"
among it: the schedule did not fit the run, which says nothing about the pipeline (the case's
verdict is UNKNOWN, the run's status schedule-missed).

On an interrupted run `stop(aborted=True)` undoes what can be undone at once (SIGCONT, the
lock, the commit hold) and starts nothing new (no driver restart).
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from faults import registry
from faults.base import Fault, Missed, Observation
from faults.spec import START, FaultSpec
from faults.targets import RunStopping, Targets
from harness.results.model import FaultRecord

log = logging.getLogger(__name__)

POLL_S = 0.2          # how often a fault due at a progress anchor looks at the query's progress


class FaultRun:
    """One fault of the schedule, from its injection to its observation."""

    def __init__(self, spec: FaultSpec, targets: Targets, t0: float, say: Callable[[str], None],
                 clock: Any = None, send_end: float | None = None, fresh_restarts: bool = False,
                 cap: float | None = None, mark: Callable[[], dict[int, int] | None] | None = None,
                 index: int = 0, snapshot: Callable[[FaultRun], None] | None = None):
        """`send_end`: when the workload's duration ends (epoch s); `cap`: the latest it may go
        on to (max_duration; default `send_end`); `mark()`: the topic's end offsets now;
        `index`: its place in the schedule; `snapshot(run)`: called as it comes due, before it
        acts (the state check's copy of the checkpoint: the state the fault found)."""
        self.spec, self.targets, self.t0, self.say = spec, targets, t0, say
        self.index, self.snapshot = index, snapshot
        self.clock, self.send_end, self.fresh_restarts = clock, send_end, fresh_restarts
        self.cap = cap if cap is not None else send_end
        self.mark_now = mark
        self.ended_at: float | None = None    # the workload stopped (FaultRunner.ended)
        self.fault: Fault | None = None
        self.observation: Observation | None = None
        self.error: str | None = None
        self.missed: str | None = None
        self.due_at: float | None = None      # epoch seconds its time or anchor came
        self.seen_at: float | None = None     # ... and it was observed, having sent `mark` by then
        self.mark: dict[int, int] | None = None
        # injected, missed or given up: the next fault at the same anchor may go
        self.settled = threading.Event()
        self.finished = threading.Event()     # its thread is done: nothing more will happen to it

    # -- how long the workload lasts --------------------------------------------------------------
    def _end(self) -> float | None:
        """When the workload ends at the latest (epoch s): when it stopped, else its cap."""
        return self.ended_at if self.ended_at is not None else self.cap

    def _cut(self) -> str:
        """What ended the workload, for a missed fault's sentence."""
        if self.ended_at is not None and (self.cap is None or self.ended_at < self.cap - 0.5):
            return f"the workload ended at {self.ended_at - self.t0:.1f} s"
        if self.cap is not None and self.send_end is not None and self.cap > self.send_end:
            return f"the workload was cut at max_duration ({self.cap - self.t0:g} s)"
        return "the workload ended"

    def _coming_end(self) -> str:
        """The workload's end still to come, for a sentence."""
        if self.cap is not None and self.send_end is not None and self.cap > self.send_end:
            return f"max_duration ({self.cap - self.t0:g} s) cuts the workload"
        return "the workload ends"

    def pending(self, batches: int) -> str | None:
        """Why the workload must go on for this fault (None: nothing more is to come of it): it
        has not come, landed, healed and been observed, or the query has not committed
        `batches` batches past what was sent when it was observed."""
        what = f"fault {self.spec.kind} ({self.spec.at})"
        if self.missed is not None or self.error is not None:
            return None
        if self.observation is None:
            if self.finished.is_set():
                return None   # stopped before it was observed: nothing more will come of it
            if self.due_at is None:
                return f"{what} has not come"
            return f"{what} has not " + ("landed" if self.fault is None or self.fault.landed_at is None
                                         else "healed and been observed")
        if not self.observation.observed or self.observation.outcome == "refused" or self.seen_at is None:
            return None   # not seen, or Spark refused to go on: no query will read past it
        read = self.clock.read_past(self.seen_at, self.mark) if self.clock is not None else batches
        if read >= batches:
            return None
        return f"the query has read past {what} in {read} of {batches} batches"

    # -- when -----------------------------------------------------------------------------------
    def _due(self, stopping: threading.Event) -> float | None:
        """Wait until the fault is due; its epoch seconds, or None (stopped, or missed: said)."""
        anchor = self.spec.when
        if anchor.after == START:
            due = self.t0 + anchor.plus_s
            if stopping.wait(max(0.0, due - time.time())):
                return None
            return due
        while not stopping.is_set():
            reached = self.clock.reached(anchor)
            if reached is not None:
                # "warmup + 5s": the warm-up ended, then 5 s more
                if stopping.wait(max(0.0, reached - time.time())):
                    return None
                return reached
            end = self._end()
            if end is not None and time.time() >= end:
                self.missed = (f"{anchor.text()} never came while the workload was sent ({self._cut()}): "
                               f"{self.clock.not_reached(anchor)}")
                return None
            stopping.wait(POLL_S)
        return None

    def _need_s(self) -> float:
        """Sending the fault needs after it. Any fault must come while the workload is sent.
        A killed driver must find events its successor has not read: on the same checkpoint,
        those sent while it is down (its downtime); on a fresh one (at-most-once), which reads
        only what is sent after it starts, its downtime and the driver's measured start-up."""
        kind = registry.kind(self.spec.kind)
        if not kind.kills_driver:
            return 0.0
        return self.spec.lasts_s + (self.clock.start_s if self.fresh_restarts else 0.0)

    def _too_late(self, now: float) -> str | None:
        """Why the fault cannot land now (None: it can): too little of the workload left before
        its end at the latest (the cap; the workload waits for the fault until then)."""
        end = self._end()
        if end is None or self.clock is None:
            return None
        left, need = end - now, self._need_s()
        if left > need:
            return None
        at = f"at {now - self.t0:.1f} s" + (f" ({self.spec.at})" if self.spec.by_progress else "")
        if left <= 0:
            return f"{at} the workload had ended ({self._cut()})"
        start = (f" and the driver's measured start-up of {self.clock.start_s:.1f} s" if self.fresh_restarts
                 else "")
        return (f"{at} it needed {need:.1f} s of the workload after it (its {self.spec.lasts_s:g} s down"
                f"{start}: a new driver must find events it has not read), and {left:.1f} s were left "
                f"before {self._coming_end()}")

    # -- the fault ------------------------------------------------------------------------------
    def run(self, stopping: threading.Event, before: FaultRun | None = None) -> None:
        try:
            self.due_at = self._due(stopping)
            if self.due_at is None:
                return
            if before is not None:   # the same anchor: after the fault listed before it
                while not before.settled.wait(POLL_S) and not stopping.is_set():
                    pass
                if stopping.is_set():
                    return
            late = self._too_late(time.time())
            if late is not None:
                self.missed = late
                self.say(f"fault {self.spec.kind} ({self.spec.at}): MISSED: {late}")
                return
            self._carry_out(stopping)
        finally:
            self.settled.set()
            self.finished.set()

    def _carry_out(self, stopping: threading.Event) -> None:
        if self.snapshot is not None:
            try:
                self.snapshot(self)
            except Exception as exc:  # noqa: BLE001 - evidence for the state check; the fault goes on
                log.warning("the state's copy before %s: %s", self.spec.kind, exc)
        try:
            self.fault = registry.make(self.spec, self.targets)
            self.fault.inject()
            self.settled.set()
            self.say(f"fault {self.spec.kind}: injected into {self.fault.target}")
            self.fault.land()
            # a duration or downtime counts from when the fault took effect (a killed driver's
            # process tree takes a moment to be reaped, and that moment is downtime; a
            # delay-commit's from the hold of its batch)
            since = self.fault.landed_at or time.time()
            stopping.wait(max(0.0, since + self.spec.lasts_s - time.time()))
            if not stopping.is_set():
                self.fault.heal()
                observation = self.fault.observe()
                # what the query must read past before the workload may end (its batches after now)
                self.seen_at, self.mark = time.time(), self._mark()
                self.observation = observation
                seen = "seen" if self.observation.observed else "NOT SEEN"
                self.say(f"fault {self.spec.kind}: {seen}: {self.observation.detail}")
        except Missed as exc:   # the run offered it nothing to act on: the schedule did not fit
            self.missed = str(exc)
            self.say(f"fault {self.spec.kind} ({self.spec.at}): MISSED: {exc}")
            self.release()
        except RunStopping as exc:   # Ctrl-C during its injection: it went no further, quietly
            self.error = f"{type(exc).__name__}: {exc}"   # stop(aborted=True) undoes what lasts
        except Exception as exc:  # noqa: BLE001 - recorded, and the case fails its run check
            self.error = f"{type(exc).__name__}: {exc}"
            log.error("fault %s failed: %s\n%s", self.spec.kind, exc, traceback.format_exc())
            self.say(f"fault {self.spec.kind}: FAILED: {self.error}")
            self.release()

    def _mark(self) -> dict[int, int] | None:
        """The topic's end offsets now; None when there is no way to ask, or the broker did not
        answer (then any batch planned after now counts as read past it)."""
        if self.mark_now is None:
            return None
        try:
            return self.mark_now()
        except Exception as exc:  # noqa: BLE001 - the mark only decides how long to go on
            log.warning("the topic's end offsets after %s: %s", self.spec.kind, exc)
            return None

    def release(self) -> None:
        """Undo what lasts (SIGCONT, the lock, the commit hold), whatever happened."""
        if self.fault is not None and self.fault.injected_at is not None:
            try:
                self.fault.heal()
            except Exception as exc:  # noqa: BLE001 - one failing heal must not stop the others
                log.error("healing %s failed: %s", self.spec.kind, exc)

    def restore(self) -> None:
        """Put back a node the fault left down for the rest of the case (Fault.restore)."""
        if self.fault is not None and self.fault.injected_at is not None:
            try:
                if self.fault.restore():
                    self.say(f"fault {self.spec.kind}: {self.fault.target} started again for the next case")
            except Exception as exc:  # noqa: BLE001 - the next case says what is missing
                log.error("restoring after %s failed: %s", self.spec.kind, exc)

    def record(self) -> FaultRecord:
        """The fault as summary.json's cases[].faults[] holds it."""
        f, seen = self.fault, self.observation

        def rel(at: float | None) -> float | None:
            return None if at is None else round(at - self.t0, 3)

        if self.error is not None:
            observed, detail = False, f"the fault could not be carried out: {self.error}"
        elif self.missed is not None:
            observed, detail = False, self.missed
        elif seen is None:
            observed, detail = False, "not injected: the case ended first"
        else:
            observed, detail = seen.observed, seen.detail
        facts = seen.facts if seen else {}
        landed = observed if seen is None or seen.landed is None else (observed and seen.landed)
        at_s = self.spec.at_s if not self.spec.by_progress else rel(self.due_at)
        return FaultRecord(
            kind=self.spec.kind, at_s=at_s, at=self.spec.at,
            started_s=rel(f.injected_at) if f is not None else None,
            landed_s=rel(f.landed_at) if f is not None else None,
            ended_s=rel(f.healed_at) if f is not None else None,
            target=f.target if f is not None else self.spec.target, observed=observed, detail=detail,
            spec=self.spec.describe(), landed=landed, missed=self.missed,
            recovery={key: facts.get(key) for key in registry.recovery_keys(self.spec.kind)},
            landed_detail=seen.proof if seen is not None and seen.proof else None,
            outcome=seen.outcome if seen is not None and seen.outcome else None,
            outcome_detail=seen.outcome_detail if seen is not None and seen.outcome else None,
            details=seen.details if seen is not None and seen.details is not None else None,
            changes=[c.to_json() for c in f.what_changed] if f is not None else [],
            traits=registry.kind(self.spec.kind).traits())


_LIVE: weakref.WeakSet[FaultRunner] = weakref.WeakSet()


def stop_every_schedule() -> None:
    """On Ctrl-C or SIGTERM, before the stack unwinds: no fault is injected from now on. (The
    unwinding can take a while, a producer flushing for one; a broker killed meanwhile was a
    fault injected after the user asked the run to stop.)"""
    for runner in list(_LIVE):
        runner.aborting.set()
        runner.stopping.set()


class FaultRunner:
    """The schedule of one case: `start(t0, send_end, cap)` when sending begins, `pending()` while
    the workload asks whether to go on, `ended(at)` when it stopped, `join()` after it.
    `clock`: the case's pace (progress anchors, batch times, start-ups, batches read past a
    mark); `fresh_restarts`: a new driver starts on a fresh checkpoint at the latest offsets
    (at-most-once); `mark()`: the topic's end offsets now (what has been sent)."""

    def __init__(self, specs: tuple[FaultSpec, ...], targets: Targets,
                 say: Callable[[str], None] = log.info, clock: Any = None, fresh_restarts: bool = False,
                 mark: Callable[[], dict[int, int] | None] | None = None,
                 snapshot: Callable[[FaultRun], None] | None = None):
        _LIVE.add(self)
        self.snapshot = snapshot   # FaultRun's: a copy of the checkpoint as each fault comes due
        self.runs: list[FaultRun] = []
        self.specs, self.targets, self.say = specs, targets, say
        self.clock, self.fresh_restarts, self.mark = clock, fresh_restarts, mark
        self.stopping = threading.Event()
        # the run is being interrupted (Ctrl-C, SIGTERM, an aborted stop): a fault in the middle
        # of its injection goes no further (its targets refuse signals and waits, RunStopping);
        # a case's normal end lets it finish as before
        self.aborting = threading.Event()
        self.threads: list[threading.Thread] = []
        self.t0: float | None = None   # wall-clock seconds of the first event sent

    def start(self, t0: float, send_end: float | None = None, cap: float | None = None) -> None:
        """`send_end`: the workload's duration ends (epoch s); `cap`: the latest it may go on to
        while a fault is pending (default: `send_end`, a workload that does not wait)."""
        self.t0 = t0
        targets = replace(self.targets, stopping=self.aborting.is_set)
        self.runs = [FaultRun(spec, targets, t0, self.say, self.clock, send_end, self.fresh_restarts,
                              cap, self.mark, i, self.snapshot) for i, spec in enumerate(self.specs)]
        previous: dict[tuple, FaultRun] = {}
        for run in self.runs:
            key = (run.spec.when.after, run.spec.when.plus_s, run.spec.when.batches)
            before = previous.get(key) if run.spec.by_progress else None
            previous[key] = run
            thread = threading.Thread(target=run.run, args=(self.stopping, before),
                                      name=f"fault-{run.spec.kind}", daemon=True)
            thread.start()
            self.threads.append(thread)

    def pending(self, batches: int) -> str | None:
        """Why the workload must go on (the first fault listed that is not done with, in a
        sentence); None when every fault has landed and the query has read `batches` batches
        past each, or will never."""
        return next((why for run in self.runs if (why := run.pending(batches)) is not None), None)

    def ended(self, at: float) -> None:
        """The workload stopped at `at` (epoch s): a fault whose moment has not come is missed."""
        for run in self.runs:
            run.ended_at = at

    def join(self, timeout_s: float = 600.0) -> None:
        """Wait for every fault to be injected, healed and observed (or missed)."""
        deadline = time.monotonic() + timeout_s
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def stop(self, aborted: bool = False, restore: bool = True) -> None:
        """End the schedule now. Everything that lasts is undone; on an aborted run a fault
        whose heal would start a process (a driver, the broker) is left as it is. `restore`:
        put back the nodes the faults left changed, for a next case (Fault.restore)."""
        if aborted:
            self.aborting.set()
        self.stopping.set()
        for thread in self.threads:
            thread.join(30)
        for run in self.runs:
            # a kind whose heal starts a process (a driver, the broker) is left as it is
            if not (aborted and registry.kind(run.spec.kind).restarts):
                run.release()
        if not aborted and restore:   # an aborted run's registry stops every node anyway
            for run in self.runs:
                run.restore()

    def records(self) -> list[FaultRecord]:
        return [run.record() for run in self.runs]

    def missed(self) -> list[str]:
        """A sentence for every fault whose moment did not come while the workload was sent."""
        return [f"fault {r.kind} ({r.asked}) missed: {r.missed}" for r in self.records() if r.missed]

    def problems(self) -> list[str]:
        """A sentence for every fault whose effect was not observed, or that did not land in
        the window it aims at, and for every restart Spark refused: the case fails on each.
        A missed fault is not one: the schedule did not fit the run (missed())."""
        out = []
        for r in self.records():
            if r.missed:
                continue
            if not r.observed:
                out.append(f"fault {r.kind} at {r.asked} not observed: {r.detail}")
            elif not r.landed:
                out.append(f"fault {r.kind} at {r.asked} did not land where it aims: "
                           f"{r.landed_detail or r.detail}")
            if r.outcome == "refused":
                out.append(f"Spark refused to restart after {r.kind} at {r.asked}: {r.outcome_detail}")
        return out
