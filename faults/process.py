"""Faults on processes: kill an executor, pause (SIGSTOP) a process for a while."""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass

import psutil

from faults import fs
from faults.base import Details, Fault, Missed, Observation
from faults.kinds import DURATION, TARGET, FaultKind, Key, Preparation, by_target
from faults.targets import RefusedTarget
from workloads.errors import SpecError
from workloads.pipelines import executors as executor_log
from workloads.pipelines import state_files
from workloads.pipelines.control import KILL_EXECUTOR, KILLED, request
from workloads.wait import WaitTimeout

# phase -> what the case's FUSE file system holds for the kill: the operations, the paths, and
# the thread of the executor's JVM that makes them (Linux keeps 15 characters of its name)
STATE_COMMIT, MAINTENANCE = "state-commit", "maintenance"
_PHASES = {
    # a task's state store commit publishing its version: the rename that makes
    # state/<op>/<partition>/<version>.changelog (.zip, .delta) appear
    STATE_COMMIT: (("rename",), r"^/state/\d+/\d+/\d+(_[^/.]+)?\.(zip|changelog|delta)$", r"^Executor task"),
    # the maintenance thread's work: a snapshot's upload published, or an old version deleted
    MAINTENANCE: (("rename", "unlink"), r"^/state/(.*/)?[^./][^/]*$", r"^state-store-mai"),
}
MAINTENANCE_INTERVAL = "2s"   # spark.sql.streaming.stateStore.maintenanceInterval, for phase maintenance


@dataclass
class ExecutorKill(Details):
    """Where a kill at a phase landed: the executor's operation the file system held when the
    signal came, and the state store version it was part of."""

    phase: str = ""
    op: str = ""
    path: str = ""
    thread: str = ""
    operator: int | None = None
    partition: int | None = None
    state_version: int | None = None


class KillExecutor(Fault):
    """Kill one executor: SIGKILL (via = signal), after which local-cluster launches a
    replacement; or through Spark's own API (via = spark-api): the driver calls
    SparkContext.killExecutor, then requestExecutors(1), which works on a remote cluster
    too. Either way a new executor must appear.

    With `phase`, the kill lands inside the executor's state store work: the case's FUSE file
    system holds the executor's next operation of that phase (a task's commit publishing its
    state version, or the maintenance thread's snapshot upload or cleanup), the signal comes
    while it is held, and the held operation then fails: it never happened."""

    before: set[int] = set()
    victim: psutil.Process | None = None
    spark_id: str | None = None
    seen = 0
    held: dict | None = None

    def _inject(self) -> None:
        if self.spec.via == "spark-api":
            self._through_spark()
            return
        executors, chosen = choose_executor(self)
        self.before = {p.pid for p in executors}
        self.victim = executors[chosen]
        self.target = f"executor:{chosen} (pid {self.victim.pid})"
        phase = self.spec.get("phase")
        if not phase:
            self.victim.send_signal(signal.SIGKILL)
            return
        # executor:random at a phase: whichever executor comes to it first (maintenance runs
        # where a store is loaded, and one executor may hold them all)
        anyone = self.spec.target_index == "random"
        self.held = self._hold(phase, [p.pid for p in executors] if anyone else [self.victim.pid])
        signalled = False
        try:
            if anyone:
                chosen = next(i for i, p in enumerate(executors) if p.pid == self.held["pid"])
                self.victim = executors[chosen]
                self.target = f"executor:{chosen} (pid {self.victim.pid})"
            self.victim.send_signal(signal.SIGKILL)
            signalled = True
        finally:   # the held call fails (the process can die), or goes on when no signal went
            fs.release(self.targets, abort=signalled)

    def _hold(self, phase: str, pids: list[int]) -> dict:
        """Wait until the next operation of `phase` of one of `pids` is held, and say what it is."""
        from workloads.wait import WaitTimeout

        ops, match, thread = _PHASES[phase]
        what = ("a task's state store commit" if phase == STATE_COMMIT
                else "the state store's maintenance (a snapshot upload or a cleanup)")
        try:
            return fs.hold(self.targets, ops=ops, match=match, thread=thread, pids=pids,
                           wait="batch" if phase == STATE_COMMIT else "restart",
                           message=f"{self.target} did not come to {what}")
        except WaitTimeout as exc:
            why = ("" if phase == STATE_COMMIT else
                   "; maintenance runs on the executor that holds a store: with changelog checkpointing "
                   "it uploads a snapshot every spark.sql.streaming.stateStore.minDeltasForSnapshot "
                   "(10) versions, and without it only deletes versions beyond "
                   "spark.sql.streaming.minBatchesToRetain (100 batches); target = \"executor:random\" "
                   "takes whichever executor comes to it first")
            raise Missed(f"{exc}{why}") from None

    def _through_spark(self) -> None:
        """Ask the driver to kill the executor at the index (in Spark's id order); on a cluster
        whose processes the harness cannot see, this is all it takes: the driver's own list of
        executors (executors.jsonl) shows the loss and the replacement."""
        control = self.targets.control_dir
        index = self.spec.target_index
        chosen = (self.targets.rng(self.spec.salt()).randrange(2)
                  if index == "random" else int(index or 0))
        (control / KILLED).unlink(missing_ok=True)
        self.seen = len(executor_log.read(self.targets.executors_log))
        request(control, KILL_EXECUTOR, str(chosen))
        answer = self.targets.wait(lambda: _read_json(control / KILLED), "batch",
                                   f"the driver did not answer the request to kill executor {chosen}")
        if not answer.get("killed"):
            raise RefusedTarget(f"Spark did not kill executor {chosen}: {answer}")
        self.spark_id = answer["id"]
        self.target = f"executor:{chosen} (Spark id {self.spark_id}, via spark-api)"

    def _observed_by_spark(self) -> Observation:
        def changes():
            log = executor_log.read(self.targets.executors_log)[self.seen:]
            gone = any(e["event"] == "removed" and e["id"] == self.spark_id for e in log)
            new = [e["id"] for e in log if e["event"] == "added" and not e.get("startup")]
            return new if gone and new else None

        try:
            new = self.targets.wait(changes, "executor",
                                    f"{self.target}: the driver did not list its loss and a new "
                                    "executor", 0.5)
        except WaitTimeout as exc:
            return Observation(False, str(exc))
        assert self.injected_at is not None
        back = time.time() - self.injected_at
        return Observation(True, f"{self.target} was removed; Spark's executor {new[0]} replaced it after "
                                 f"{back:.1f}s", {"executor_back_s": round(back, 3)})

    def _landed(self) -> tuple[bool, str, ExecutorKill]:
        held = self.held or {}
        state = state_files.parse(held.get("path", "")) or {}
        details = ExecutorKill(phase=self.spec.get("phase"), op=held.get("op", ""),
                               path=held.get("path", "").lstrip("/"), thread=held.get("thread", ""),
                               operator=state.get("operator"), partition=state.get("partition"),
                               state_version=state.get("version"))
        published = bool(held.get("op") == "rename" and held.get("path")
                         and (self.targets.checkpoint() / held["path"].lstrip("/")).exists())
        version = (f" (state version {state['version']} of partition {state['partition']}, operator "
                   f"{state['operator']})" if state else "")
        landed = bool(held) and held.get("pid") == getattr(self.victim, "pid", None) and not published
        proof = (f"the executor's thread {held.get('thread')!r} was held in {held.get('op')} "
                 f"{details.path}{version} when SIGKILL came; "
                 + ("the file appeared all the same" if published else "the operation never happened"))
        return landed, proof, details

    def observe(self) -> Observation:
        if self.spec.via == "spark-api":
            return self._observed_by_spark()
        seen = self._observe_signal()
        if self.held is None or not seen.observed:
            return seen
        seen.landed, seen.proof, seen.details = self._landed()
        seen.detail += f", killed in {self.spec.get('phase')}: {seen.proof}"
        return seen

    def _observe_signal(self) -> Observation:
        victim = self.victim

        def replaced():
            try:
                return set(self.targets.driver().executor_pids()) - self.before
            except RefusedTarget:
                return set()

        try:
            self.targets.wait(lambda: _status(victim) in (psutil.STATUS_ZOMBIE, None), "signal",
                              f"{self.target} was still running after SIGKILL")
            new = self.targets.wait(replaced, "executor", f"{self.target} died, but no executor replaced it",
                                    0.5)
        except WaitTimeout as exc:
            return Observation(False, str(exc))
        assert self.injected_at is not None
        back = time.time() - self.injected_at
        return Observation(True, f"{self.target} died; executor pid {min(new)} replaced it after {back:.1f}s",
                           {"executor_back_s": round(back, 3)})


class Pause(Fault):
    """SIGSTOP every process of the target, SIGCONT at heal (a long GC pause, a frozen VM)."""

    procs: list[psutil.Process] = []
    stopped = False

    def _inject(self) -> None:
        kind = self.spec.target_kind
        if kind == "executor":
            executors, chosen = choose_executor(self)
            self.procs = [executors[chosen]]
            self.target = f"executor:{chosen} (pid {self.procs[0].pid})"
        else:
            if kind in ("broker", "leader", "controller"):
                service, kind = self.targets.broker(self.spec.target, self.spec.salt())
            else:
                service = self.targets.service(self.spec.target if kind == "worker" else kind)
            self.procs = self.targets.processes(service.pids())
            if not self.procs:
                raise RefusedTarget(f"{kind} has no process running to pause (is it restarting?)")
            self.target = f"{kind} ({len(self.procs)} processes)"
        for proc in self.procs:
            try:
                proc.send_signal(signal.SIGSTOP)
            except psutil.NoSuchProcess:
                pass   # a short-lived backend that ended meanwhile
        stopped = (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE, None)   # ended meanwhile: not running
        self.stopped = _within(self, lambda: all(_status(p) in stopped for p in self.procs))

    def _heal(self) -> None:
        for proc in self.procs:
            try:
                proc.send_signal(signal.SIGCONT)
            except psutil.NoSuchProcess:
                pass

    def observe(self) -> Observation:
        resumed = _within(self, lambda: all(_status(p) != psutil.STATUS_STOPPED for p in self.procs))
        if not self.stopped:
            return Observation(False, f"{self.target}: not every process was 'stopped' after SIGSTOP")
        if not resumed:
            return Observation(False, f"{self.target}: a process was still stopped after SIGCONT")
        return Observation(True, f"{self.target} stopped for {self.spec.duration_s:g}s, then resumed")


def choose_executor(fault: Fault) -> tuple[list[psutil.Process], int]:
    """The running executors and the index the fault aims at: `executor:N`, or one drawn
    from the seed for `executor:random`."""
    executors = fault.targets.executors()
    if not executors:
        raise RefusedTarget("the driver has no executor process (a local[*] master?)")
    index = fault.spec.target_index
    chosen = (fault.targets.rng(fault.spec.salt()).randrange(len(executors))
              if index == "random" else int(index or 0))
    if chosen >= len(executors):
        raise RefusedTarget(f"executor {chosen} does not exist ({len(executors)} are running)")
    return executors, chosen


def _within(fault: Fault, condition) -> bool:
    """Whether `condition` came true within the time the case's pace gives a signal."""
    try:
        return bool(fault.targets.wait(condition, "signal", "no change of state"))
    except WaitTimeout:
        return False


def _read_json(path):
    import json

    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _status(proc: psutil.Process) -> str | None:
    try:
        return proc.status()
    except psutil.NoSuchProcess:
        return None


VIAS = ("signal", "spark-api")


def _phase_prepared(spec) -> Preparation:
    """A kill at a phase needs the case's checkpoint on the FUSE file system (which holds the
    phase's operation), and for maintenance, maintenance often enough to come within a case."""
    phase = spec.get("phase")
    if not phase:
        return Preparation()
    conf = ((("spark.sql.streaming.stateStore.maintenanceInterval", MAINTENANCE_INTERVAL),)
            if phase == MAINTENANCE else ())
    return Preparation(storage=True, spark_conf=conf)


def _phase_checked(values: dict, s) -> None:
    if values["extra"].get("phase") and values.get("via") == "spark-api":
        raise SpecError(f"{s.path}: phase needs the kill to come from the harness, at the moment the file "
                        "system holds the phase's operation; Spark's API kills later",
                        'write via = "signal" (the default), or leave phase out')

KILL_EXECUTOR_FAULT = FaultKind(
    "kill-executor", KillExecutor,
    about="SIGKILL one executor (`via = \"signal\"`), and `local-cluster` must launch a replacement; or "
          "through Spark's own API (`via = \"spark-api\"`): the driver calls "
          "`SparkContext.killAndReplaceExecutor` (where it is missing, `killExecutor` then "
          "`requestExecutors(1)`), which works on a remote cluster too. Either way the process must die "
          "and a new executor must appear",
    models="a lost node, or an executor the kernel's OOM killer ended",
    keys=(TARGET, Key("via", "choice", "how: a signal to the process, or Spark's own API",
                      default="signal", choices=VIAS, sample="signal"),
          Key("phase", "choice", "kill it inside its state store's work: `state-commit` (a task's commit "
              "publishing its state version) or `maintenance` (a snapshot upload or a cleanup, every "
              f"{MAINTENANCE_INTERVAL} for the case); absent, wherever it is. With `executor:random`, "
              "whichever executor comes to the phase first", default=None,
              choices=tuple(_PHASES))),
    targets=("executor",), default_target="executor:0", nemesis_targets=("executor:random",),
    recovery_keys=("executor_back_s",), details=ExecutorKill, prepare=_phase_prepared, check=_phase_checked,
    requires=lambda spec: ((("own-executors",) if spec.via == "signal" else ())
                           + (("fuse", "state-store") if spec.get("phase") else ())))

PAUSE_FAULT = FaultKind(
    "pause", Pause,
    about="SIGSTOP every process of the target, then SIGCONT after `duration`; every process must show "
          "`stopped`, then run again",
    models="a long garbage-collection pause, or a frozen virtual machine",
    keys=(TARGET, DURATION),
    targets=("executor", "driver", "broker", "leader", "controller", "postgres", "worker"),
    default_target="driver",
    # a nemesis aims pauses at Spark's processes: the broker and Postgres have faults of their own
    nemesis_targets=("executor:random", "driver"),
    requires=by_target({"executor": ("own-executors",), "broker": ("own-kafka",),
                        "leader": ("own-kafka", "kafka-cluster"),
                        "controller": ("own-kafka", "kafka-cluster"),
                        "postgres": ("own-postgres",), "worker": ("own-standalone",)}))
