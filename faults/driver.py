"""Faults on the driver: kill it and start another (at a point of a batch, or with changed
settings), or make Spark replay one batch.

A new driver starts on the same checkpoint (at-least-once, exactly-once), so Spark
re-executes a batch that is in the offset log but not in the commit log; or on a fresh
checkpoint at the latest offsets (at-most-once), so whatever was in flight is skipped.
Which one is the harness's business (Targets.restart_driver). What Spark does with the
restart is recorded as the fault's outcome: it ran (accepted), or it failed to start
the query (refused, with its own sentence).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from faults.base import Fault, Observation, held_text
from faults.kinds import DOWNTIME, FaultKind, Key
from faults.targets import Targets
from faults.targets import end_s as _end_s
from workloads import plugins
from workloads.errors import SpecError
from workloads.pipelines.control import (
    AFTER_COMMIT,
    AFTER_WRITE,
    BEFORE_WRITE,
    DELAY_COMMIT,
    HOLD_COMMIT,
    armed_batches,
    held_files,
    held_since,
    request,
    withdraw,
)
from workloads.pipelines.params import HDFS_PROVIDER, PROVIDER_KEY, STATE_STORES
from workloads.validate import bad
from workloads.wait import WaitTimeout

COMMIT_POLL_S = 0.005


class DriverRestart(Fault):
    """What every fault that kills the driver and starts another shares: the kill (recording
    what the checkpoint holds at that moment), the restart after `downtime` (with the
    fault's `changes`), and the observation of the new driver: its first batch, the batches
    it ran again, or Spark's refusal."""

    changes: dict | None = None
    held: dict | None = None
    armed: dict | None = None
    inflight: set[int] = set()   # batches in the offset log, not in the commit log, at the kill
    query_id: str | None = None
    run_id: str | None = None
    new_query: bool = False      # the new driver ran under another query id
    landed: tuple[bool, str] | None = None   # (whether the kill hit its point, the proof)

    def _kill(self) -> None:
        driver = self.driver = self.targets.driver()
        self.targets.process(driver.pid)           # refuses a pid this run did not start
        # what a restart on this checkpoint runs again: batches in the offset log but not yet
        # in the commit log when the driver dies (the one in flight), and a held one
        self.checkpoint = self.targets.checkpoint()
        self.inflight = uncommitted(self.checkpoint)
        self.query_id, self.run_id = query_and_run_ids(self.targets.progress())
        self.target = f"driver (pid {driver.pid})"
        self.targets.expect_down(True)
        self.killed_at = time.time()
        driver.kill()

    def kill_driver(self) -> None:
        """Kill the case's driver as a crash would (SIGKILL to its process tree), having recorded
        what its checkpoint held (`self.checkpoint`, the batches in flight), and return once it is
        dead: nothing writes the checkpoint any more. Its exit is recorded as the kill (an
        incident the fault explains); heal() starts a new driver after `downtime`, and observe()
        waits for its first batch, or for Spark's refusal."""
        self._kill()
        driver = self.driver
        self.targets.wait(lambda: not driver.running, "signal",
                          f"driver (pid {driver.pid}) was still running")

    def _heal(self) -> None:
        if self.killed_at is None:
            # the kill never happened: a restart would start a second driver. Nor is the driver's
            # down state this fault's to clear: another fault may be restarting it now
            return
        try:
            self.targets.restart_driver(self.changes)
            self.restarted_at = time.time()
        except Exception as exc:  # noqa: BLE001 - Spark refusing the checkpoint is a finding
            self.refused = sentence(str(exc))
            self.targets.expect_down(False)

    def _first_batch_or_failure(self) -> tuple[list[dict], str | None]:
        return first_batch_or_failure(self.targets, self.run_id, self.killed_at or 0.0,
                                      f"{self.target} was killed and restarted, but no batch completed")

    def observe(self) -> Observation:
        if self.refused is not None:
            return self._refused(self.refused)
        if self.restarted_at is None or self.killed_at is None:
            return Observation(False, f"{self.target} was killed but no new driver started")
        try:
            after, failure = self._first_batch_or_failure()
        except WaitTimeout as exc:
            return Observation(False, str(exc))
        if failure is not None:
            return self._refused(failure)
        first = after[0]
        again = self.inflight | ({self.held["batch_id"]} if self.held else set())
        rerun = [p for p in after if p.get("id") == self.query_id and p["batchId"] in again]
        facts = {"downtime_s": round(self.restarted_at - self.killed_at, 3), "startup_s": self.startup_s(),
                 "first_batch_after_s": round(_end_s(first) - self.killed_at, 3),
                 "batches_reexecuted": len({p["batchId"] for p in rerun}),
                 "events_reread": sum(p.get("numInputRows", 0) for p in rerun)}
        self.new_query = first.get("id") != self.query_id
        how = ("on a fresh checkpoint at the latest offsets" if self.new_query and self._fresh()
               else f"under a new query id {first.get('id')}" if self.new_query
               else f"on the same checkpoint, first batch {first['batchId']}")
        held = f" while batch {self.held['batch_id']} was held in the commit window" if self.held else ""
        return Observation(True, f"{self.target} killed{held}; a new driver ran {how} after "
                                 f"{facts['downtime_s']:.1f}s down ({self.spec.downtime_s:g}s asked, then "
                                 f"{facts['startup_s'] or 0:.1f}s to start)", facts, outcome="accepted",
                           outcome_detail=f"Spark ran the query again {how}")

    def _fresh(self) -> bool:
        return self.targets.checkpoint() != self.checkpoint

    def _refused(self, why: str) -> Observation:
        return Observation(True, f"{self.target} was killed and a new driver started, but Spark refused to "
                                 f"run the query again: {why}", outcome="refused", outcome_detail=why)


def first_batch_or_failure(targets: Targets, run_id: str | None, since: float,
                           message: str) -> tuple[list[dict], str | None]:
    """Wait for a new driver's first batch (another run id than `run_id`, ended after `since`),
    or for it to fail: Spark may accept the restart and refuse the checkpoint a moment later, in
    the query's own thread. (batches, None) or ([], Spark's sentence); WaitTimeout after the
    case's measured start-up allows. The driver's death is no longer expected afterwards."""
    def settled():
        after = [p for p in targets.progress() if p.get("runId") != run_id and _end_s(p) > since]
        if after:
            return after, None
        driver = targets.driver_now()
        if driver is not None and not driver.running:
            return [], with_task_failure(sentence(driver.status().get("error") or driver.how_it_ended()),
                                         driver)
        return None

    try:
        return targets.wait(settled, "restart", message, 0.5)
    finally:
        targets.expect_down(False)


class KillDriver(DriverRestart):
    """SIGKILL the driver's process tree; heal starts a new driver after `downtime`.

    Without `point`, the kill falls wherever the driver is; inside a delay-commit it waits
    until a batch is held in the commit window, so that it lands there. With `point`, the
    commit gate stops the next batch with rows there and the kill lands in that window:
    before-write (offsets/N logged, the sink not called), after-write (the sink's write
    returned, commits/N not written), after-commit (just after commits/N appears)."""

    def _inject(self) -> None:
        control, point = self.targets.control_dir, self.spec.get("point")
        if point is None:
            self.held = self.targets.live_hold()   # not a killed driver's hold (issue 43)
            if self.held is None and (control / DELAY_COMMIT).exists():
                # a delay-commit waits for its batch: the kill lands in that batch's hold
                self.held = self.targets.wait(self.targets.live_hold, "batch",
                                              "no batch was held in the commit window")
        elif point in (BEFORE_WRITE, AFTER_WRITE):
            self.held = hold_at(self.targets, point)
        else:
            self.armed = _wait_armed(self.targets)
            committed = Path(self.targets.checkpoint()) / "commits" / str(self.armed["batch_id"])
            self.targets.wait(committed.exists, "batch", f"commits/{self.armed['batch_id']} was not written",
                              COMMIT_POLL_S)
        self._kill()
        if point is not None:   # read now: the new driver will run the batch again and commit it
            batch = self.held or self.armed or {}
            self.landed = landed_at(point, self.checkpoint, batch, self.killed_at or 0)

    def _heal(self) -> None:
        if self.spec.get("point") is not None and self.held is None and self.armed is None:
            # its own request, unused when no batch was ever held; never another fault's pending
            # one (a kill without a point withdrew a replay-batch's, which then held nothing)
            withdraw(self.targets.control_dir, HOLD_COMMIT)
        super()._heal()

    def observe(self) -> Observation:
        seen = super().observe()
        if self.spec.get("point") is None or not seen.observed or self.landed is None:
            return seen
        seen.landed, seen.proof = self.landed
        return seen


class ReplayBatch(KillDriver):
    """Hold the next batch that wrote rows after the sink's write, kill the driver there,
    and start again: the offset log holds the batch and the commit log does not, so Spark
    re-executes it with its original id. No timing is involved."""

    def _inject(self) -> None:
        self.held = hold_at(self.targets, AFTER_WRITE)
        self._kill()
        self.landed = landed_at(AFTER_WRITE, self.checkpoint, self.held, self.killed_at or 0)

    def observe(self) -> Observation:
        seen = DriverRestart.observe(self)
        if not seen.observed or self.held is None or seen.outcome == "refused" or self.landed is None:
            return seen
        again = seen.facts.get("batches_reexecuted", 0) > 0
        fresh = self.new_query
        if not again and not fresh:
            return Observation(False, f"batch {self.held['batch_id']} was held and the driver restarted, "
                                      f"but the batch did not run again", seen.facts)
        what = "skipped (at-most-once restarts fresh)" if fresh else "ran again"
        landed, proof = self.landed
        return Observation(True, f"{held_text(self.held)} was written, "
                                 f"the driver killed before its commit, and the batch {what}", seen.facts,
                           landed=landed, proof=proof, outcome=seen.outcome,
                           outcome_detail=seen.outcome_detail)


class RestartWith(DriverRestart):
    """Kill the driver and start it again on the same checkpoint with changed settings, as a
    deploy of a new job version does. Spark accepts a change, ignores it (it keeps a
    checkpoint's shuffle partitions and state store), or refuses the checkpoint."""

    def _inject(self) -> None:
        self.changes = {k: dict(v) for k, v in (("conf", self.spec.get("conf", {})),
                                                 ("pipeline", self.spec.get("pipeline", {}))) if v}
        if self.spec.get("trigger"):   # a job run on another trigger: an AvailableNow job, say
            self.changes.setdefault("pipeline", {})["trigger"] = self.spec.get("trigger")
        self._kill()

    def observe(self) -> Observation:
        seen = super().observe()
        if seen.outcome != "accepted":
            return seen
        kept = ignored_changes(self.targets.checkpoint(), self.changes or {})
        if kept:
            seen.outcome = "ignored"
            seen.outcome_detail = "Spark kept the checkpoint's " + "; ".join(kept)
        else:
            seen.outcome_detail = f"Spark ran the query with {describe_changes(self.changes or {})}"
        seen.detail += f"; {seen.outcome_detail}"
        return seen


# the pipeline keys a restart may change: the Spark settings a deploy changes, and the build
_CHANGEABLE = ("shuffle_partitions", "state_store", "max_offsets_per_trigger", "build")


TRIGGERS = ("available-now", "real-time")


def _changes(values: dict, s) -> None:
    """restart-with changes something, and each change is one the harness can apply."""
    extra = values["extra"]
    conf, keys, trigger = extra.get("conf", {}), extra.get("pipeline", {}), extra.get("trigger")
    if not conf and not keys and not trigger:
        raise SpecError(f"{s.path} changes nothing: restart-with needs conf, pipeline or trigger",
                        'add e.g. conf = { "spark.sql.shuffle.partitions" = "4" }, '
                        'pipeline = { state_store = "rocksdb" } or trigger = "available-now"')
    if trigger is not None and trigger not in TRIGGERS:
        s.duration_ms("trigger", gt=0)   # a processing-time interval, or the error naming the key
    for key, value in conf.items():
        if not isinstance(value, str):
            raise bad(f'{s.field("conf")}."{key}"', value, "expected a string",
                      f'quote it: "{key}" = "{value}"')
    for key, value in keys.items():
        field = f"{s.field('pipeline')}.{key}"
        if key not in _CHANGEABLE:
            raise bad(field, value, "is not a pipeline key a restart can change",
                      f"change one of {', '.join(_CHANGEABLE)}")
        if key in ("shuffle_partitions", "max_offsets_per_trigger") and (
                not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise bad(field, value, "expected a whole number of 1 or more", f"write {key} = 4")
        if key == "state_store" and value not in STATE_STORES:
            raise bad(field, value, "is not a state store", f"write one of {', '.join(STATE_STORES)}")
        if key == "build":
            plugins.function(str(value), field, ("events_df", "params"))


def hold_at(targets: Targets, point: str) -> dict:
    """Ask the commit gate to hold the next batch with rows at `point`; the held batch's record
    (WaitTimeout after the case's pace allows a batch, the request withdrawn). A driver another
    fault is restarting is waited for first: its first batch is that fault's to see, and a hold
    placed meanwhile would hold it until that fault's wait ran out (issue 43)."""
    control = targets.control_dir
    targets.driver()
    mark = held_files(control)
    request(control, HOLD_COMMIT, point)
    try:
        targets.wait(lambda: held_since(control, HOLD_COMMIT, mark), "batch",
                     f"no batch that wrote rows reached the commit window ({point})")
    except WaitTimeout:
        withdraw(control, HOLD_COMMIT)
        raise
    return held_since(control, HOLD_COMMIT, mark)[0]


def _wait_armed(targets: Targets) -> dict:
    control = targets.control_dir
    targets.driver()   # as hold_at: after another fault's restart has shown its first batch
    seen = len(armed_batches(control))
    request(control, HOLD_COMMIT, AFTER_COMMIT)
    try:
        targets.wait(lambda: len(armed_batches(control)) > seen, "batch",
                     "no batch with rows reached its commit")
    except WaitTimeout:
        withdraw(control, HOLD_COMMIT)
        raise
    return armed_batches(control)[-1]


def landed_at(point: str, checkpoint: Path, batch: dict, killed_at: float) -> tuple[bool, str]:
    """Whether a kill (or a failure) at `point` of `batch` hit that window, read from the
    checkpoint after the driver died, with the sentence that proves it (or says why not)."""
    if not batch:
        return False, "no batch was stopped at the point"
    n = batch["batch_id"]
    offsets, commits = (Path(checkpoint) / d / str(n) for d in ("offsets", "commits"))
    logged, committed = offsets.exists(), commits.exists()
    rows = f" ({batch['rows']} rows)" if batch.get("rows") is not None else ""
    if point == BEFORE_WRITE:
        ok = logged and not committed
        return ok, (f"batch {n} stopped after offsets/{n} was logged and before the sink was called; "
                    f"commits/{n} {'was' if committed else 'was not'} written")
    if point == AFTER_WRITE:
        ok = logged and not committed
        return ok, (f"the sink's write of batch {n}{rows} returned, and then the batch stopped before "
                    f"commits/{n}: commits/{n} {'was written (missed)' if committed else 'was not written'}")
    after_ms = (killed_at - commits.stat().st_mtime) * 1000 if committed else None
    following = (Path(checkpoint) / "offsets" / str(n + 1)).exists()
    return committed, (f"the kill came {after_ms:,.0f} ms after commits/{n} was written"
                       f"{'; offsets/' + str(n + 1) + ' was already logged' if following else ''}"
                       if committed else f"commits/{n} was not written when the driver was killed")


def ignored_changes(checkpoint: Path, changes: dict) -> list[str]:
    """The changed settings Spark replaced with the checkpoint's own: the SQL settings a
    checkpoint pins (the offset log's conf) whose value after the restart is not the new one."""
    import json

    wanted = dict(changes.get("conf", {}))
    keys = changes.get("pipeline", {})
    if "shuffle_partitions" in keys:
        wanted["spark.sql.shuffle.partitions"] = str(keys["shuffle_partitions"])
    if "state_store" in keys:
        wanted[PROVIDER_KEY] = STATE_STORES[keys["state_store"]].get(PROVIDER_KEY, HDFS_PROVIDER)
    logs = sorted((int(p.name), p) for p in (Path(checkpoint) / "offsets").iterdir() if p.name.isdigit())
    if not logs:
        return []
    lines = logs[-1][1].read_text().splitlines()
    pinned = json.loads(lines[1]).get("conf", {}) if len(lines) > 1 else {}
    return [f"{key} = {pinned[key]} (asked {value})" for key, value in wanted.items()
            if key in pinned and str(pinned[key]) != str(value)]


def describe_changes(changes: dict) -> str:
    parts = [f"{k} = {v}" for part in ("conf", "pipeline") for k, v in changes.get(part, {}).items()]
    return ", ".join(parts) or "no change"


_LOST_TASK = re.compile(r"Lost task \S+ in stage \S+ \(TID \d+\) \([^)]*\): (.*)")
_CAUSED = re.compile(r"^Caused by: (.*)")


def with_task_failure(said: str, driver) -> str:
    """`said`, and what the newest failed task of the driver's log said with its first cause:
    a query's failure reaches the driver wrapped (a foreachBatch sink's Python function, py4j),
    and its reason is the task's (faults/storage.py and the refused restarts)."""
    try:
        lines = Path(driver.log_path).read_text(errors="replace").splitlines()
    except (OSError, AttributeError):
        return said
    failed = [(i, m.group(1)) for i, line in enumerate(lines)
              if (m := _LOST_TASK.search(line)) and not m.group(1).startswith("TaskKilled")]
    if not failed:
        return said
    last, task = failed[-1][0], failed[-1][1][:240]
    cause = next((m.group(1)[:160] for line in lines[last + 1:last + 80] if (m := _CAUSED.match(line))), "")
    return f"{said}; a task failed with {task}" + (f", caused by {cause}" if cause else "")


def sentence(text: str, limit: int = 400) -> str:
    """Spark's own account of a failure, in one line: its error class and message, without the
    Java stack and Python's wrapping."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    useful = [line for line in lines if not line.startswith(("at ", "File ", "Traceback", "JVM stacktrace"))]
    first = useful[0] if useful else (lines[0] if lines else "(no message)")
    for marker in ("the Spark driver failed: ", "RuntimeError: "):
        first = first.split(marker, 1)[-1]
    return first[:limit]


def uncommitted(checkpoint) -> set[int]:
    """Batch ids in the checkpoint's offset log and not in its commit log."""
    def ids(sub: str) -> set[int]:
        folder = checkpoint / sub
        return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.is_dir() else set()
    return ids("offsets") - ids("commits")


def query_and_run_ids(progress: list[dict]) -> tuple[str | None, str | None]:
    """The query id (kept across restarts on one checkpoint) and the run id (new each start)."""
    return (progress[-1].get("id"), progress[-1].get("runId")) if progress else (None, None)


_DRIVER_RECOVERY = ("downtime_s", "first_batch_after_s", "batches_reexecuted", "events_reread")

KILL_DRIVER_FAULT = FaultKind(
    "kill-driver", KillDriver,
    about="SIGKILL the driver's process tree and start a new driver after `downtime`; a batch must complete "
          "after it. Without `point` it falls where the driver is (inside a `delay-commit` it waits for the "
          "held batch); with `point` the commit gate stops the next batch with rows there first: "
          "`before-write` (offsets/N logged, the sink not called), `after-write` (the sink's write returned, "
          "before commits/N), `after-commit` (just after commits/N is written)",
    models="a driver crash: its node lost, its container killed, at any point of a micro-batch",
    keys=(DOWNTIME, Key("point", "choice", "where in the next batch with rows the kill lands", default=None,
                        choices=(BEFORE_WRITE, AFTER_WRITE, AFTER_COMMIT),
                        cover=(None, BEFORE_WRITE, AFTER_WRITE, AFTER_COMMIT))),
    targets=("driver",), default_target="driver", restarts=True, kills_driver=True,
    recovery_keys=_DRIVER_RECOVERY,
    # a point is the commit gate's: a foreachBatch sink
    requires=lambda spec: ("commit-gate",) if spec.get("point") else ())

REPLAY_BATCH_FAULT = FaultKind(
    "replay-batch", ReplayBatch,
    about="hold the next batch that wrote rows after the sink's write, kill the driver there and start "
          "again: the batch is in the offset log and not in the commit log, so Spark must run it again "
          "with its id",
    models="a crash between a sink's commit and Spark's commit log (the Paimon double commit, "
           "apache/paimon#9666)",
    keys=(DOWNTIME,), targets=("driver",), default_target="driver", restarts=True, kills_driver=True,
    needs_commit_gate=True, recovery_keys=_DRIVER_RECOVERY)

RESTART_WITH_FAULT = FaultKind(
    "restart-with", RestartWith,
    about="kill the driver and start it again on the same checkpoint after `downtime` with changed settings: "
          "`conf` (Spark settings), `pipeline` (`shuffle_partitions`, `state_store`, "
          "`max_offsets_per_trigger`, `build`) and `trigger`; records whether Spark accepted the change, "
          "ignored it (it keeps a checkpoint's shuffle partitions) or refused it",
    models="a deploy of a new version of the job on the old checkpoint",
    keys=(DOWNTIME, Key("conf", "table", "Spark settings for the new driver, as strings", default={},
                        sample={"spark.sql.shuffle.partitions": "4"}),
          Key("pipeline", "table", "pipeline keys for the new driver", default={},
              sample={"shuffle_partitions": 4}),
          Key("trigger", "text", "the new driver's trigger: `available-now` (a job that reads what is "
              "there, pauses `trigger_interval`, and runs again), `real-time`, or a processing-time "
              "interval (`\"2s\"`)", default=None, sample="available-now")),
    targets=("driver",), default_target="driver", restarts=True, kills_driver=True,
    recovery_keys=_DRIVER_RECOVERY, check=_changes, drawable=False,
    why_not_drawable="what a deploy changes is the scenario's choice; declare restart-with in [[faults]]")
