"""The stages of a case, in order: start the driver and warm it up, offer the load, drain.

Each stage takes the case (run/case.py) and leaves its output in the case's directory;
building the case's result from that output is run/collect.py's job.
"""

from __future__ import annotations

import time
from pathlib import Path

from harness import check as checker
from harness.check import checkpoint
from harness.errors import HarnessError
from harness.run.case import Case
from harness.run.live import LiveStatus
from harness.run.schedule import FaultRunner
from harness.scenario.fault_specs import partition_steps
from harness.services.recorder import Recorder
from harness.services.spark import DriverDied
from workloads import records
from workloads.replay import offer
from workloads.wait import WaitTimeout, wait_until

WARM_UP_TIMEOUT_S = 180.0


def driver_died(case: Case, exc: DriverDied) -> None:
    """Say at once how the driver died, how far the case had got, and its log's errors."""
    case.failure = f"driver of case {case.name} {exc.how} {case.whereabouts()}"
    lines = "\n".join(f"    {line}" for line in exc.error_lines) or "    (none)"
    more = "; the workload goes on to the end of its duration (open loop)" if case.phase == "sending" else ""
    case.progress.step(f"FAILED: {case.failure}{more}; its log's error lines:\n{lines}")


def start_driver(case: Case) -> None:
    """Create the topic, start the case's driver and wait until its first batch ran."""
    from workloads import generator

    generator.create_topic(case.stack.bootstrap_servers, case.topic, case.scenario.workload.partitions,
                           replication=case.stack.replication)
    start_recording(case)   # a job's batch oracle reads the records from the case's directory
    case.start_appender()   # a Delta source: the table the query reads, from its first version
    case.progress.step(f"case {case.name}: starting Spark driver ({case.scenario.services.spark.master})")
    case.phase = "starting the Spark driver"
    case.start_driver()
    case.phase = "warming up"
    warm_up(case)


_RECORDERS: dict[Path, Recorder] = {}   # case directory -> its recorder, while it records


def start_recording(case: Case) -> None:
    """For a job checked by the batch oracle: record the case's topic into `<case>/records/` from
    its first offset, before anything is sent (workloads/recorder.py). Other pipelines' oracles
    read ground truth, which the generator writes; a recording would cost them a second read of
    every record for nothing."""
    pl = case.pipeline
    if pl.kind != "job" or getattr(pl, "oracle", "batch") != "batch":
        return
    recorder = Recorder(case.dir / "recorder", case.stack.bootstrap_servers, case.topic,
                        records.records_dir(case.dir), case.registry)
    _RECORDERS[case.dir] = recorder.start().wait_ready()


def stop_recording(case: Case) -> None:
    """Once the case has drained (or failed): the recorder reads on to the topic's end, writes
    its last chunk and exits (its recorder.json says whether it caught up)."""
    recorder = _RECORDERS.pop(case.dir, None)
    if recorder is not None:
        recorder.stop()


def warm_up(case: Case, timeout_s: float = WARM_UP_TIMEOUT_S) -> None:
    """Send control events at event time 0 and wait for the batch that reads them, so
    that JVM warm-up is paid before measurement starts."""
    case.progress.step("warming up: waiting for the first micro-batch")
    wl = case.scenario.workload
    case.warmup = offer.send_control(wl, case.stack.bootstrap_servers, case.topic, wl.partitions,
                                     -wl.partitions, 0)

    def first_batch_done() -> bool:   # from the checkpoint: progress reports may be off
        case.spark.check_alive()
        return any(b.committed and b.rows for b in checkpoint.read_batches(case.checkpoint, case.topic))

    wait_until(first_batch_done, timeout_s, 0.5, f"no micro-batch completed within {timeout_s:.0f}s")
    case.running_from_ms = time.time() * 1000
    case.pace.started(time.monotonic() - case.started_at)   # the driver's start to its first batch
    case.registry.changed()   # the executors registered after the driver was ready: record them


class GoingOn:
    """Whether the workload goes on past its duration (the generator's `keep_going`): while a
    fault of the schedule is pending (FaultRunner.pending: not landed, or not read past in
    `batches` committed batches), and the case has not failed; and, once it stopped, why it
    lasted as long as it did (summary.json's cases[].workload)."""

    def __init__(self, case: Case, schedule: FaultRunner, batches: int):
        self.case, self.schedule, self.batches = case, schedule, batches
        self.asked = False          # the duration is over: the generator has asked
        self.first: str | None = None   # what the workload first went on for, at its duration's end
        self.why: str | None = None     # ... and last
        self.failed = False         # it stopped because the case had failed

    def __call__(self) -> bool:
        self.asked = True
        if self.case.failure is not None:   # a dead driver: its case failed; nothing will land
            self.failed = True
            return False
        why = self.schedule.pending(self.batches)
        if why is None:
            return False
        self.first, self.why = self.first or why, why
        return True

    def line(self, duration_s: float) -> str:
        """For the live status line, past the duration: what the workload goes on for."""
        return f"; past the {duration_s:g}s duration while {self.why}" if self.asked and self.why else ""

    def record(self, wl, report: dict) -> dict:
        """How long the workload was sent, and why (cases[].workload)."""
        extended, cut = report.get("extended_by_s", 0.0), report.get("cut_at_cap", False)
        done = f"every fault had landed and the query had read {self.batches} batches past each"
        if not self.schedule.specs:
            why = "no fault is scheduled: the workload is sent for its duration"
        elif wl.cap_s <= wl.duration_s:
            why = "max_duration is the duration: the workload does not wait for its faults"
        elif self.failed:
            why = ("the case had failed (its driver died), so the workload went no further than "
                   + (f"{extended:g} s past its duration, where it was" if extended else "its duration"))
        elif cut:
            why = (f"cut at max_duration ({wl.cap_s:g} s) while {self.why}" if wl.cap_s - wl.duration_s
                   <= extended + 1e-6 else f"the rate shape ended {extended:g} s past the duration while "
                   f"{self.why}")
        elif extended:
            last = "" if self.why == self.first else f", and last {self.why}"
            why = f"went on {extended:g} s past the duration: at its end {self.first}{last}; then {done}"
        else:
            why = f"{done} by the end of the duration"
        return {"duration_s": wl.duration_s, "max_duration_s": wl.cap_s,
                "read_past_batches": self.batches, "sent_for_s": report.get("sent_for_s", wl.duration_s),
                "extended_by_s": extended, "cut_at_max_duration": bool(cut and not self.failed), "why": why}


def offer_load(case: Case, schedule: FaultRunner) -> None:
    """Send the workload open-loop, then the control events that move the watermark past
    the last output; ground truth goes to the case's truth/ directory. With faults, the
    workload goes on past its duration until each has landed and the query has read past it
    (GoingOn), up to max_duration."""
    from workloads import generator
    from workloads.generator import shapes, truth

    wl = case.scenario.measure.offered(case.scenario.workload)
    rate = shapes.describe(wl.rate)
    warmup = rate.pop("warmup", None)
    params = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in rate.items()
                       if k != "shape")
    first = ("" if warmup is None
             else f", after a {warmup['for_s']:g}s warm-up at {warmup['eps']:,.0f} events/s")
    going = GoingOn(case, schedule, wl.read_past_batches)
    waits = bool(schedule.specs) and wl.cap_s > wl.duration_s
    more = f", then on while a fault is pending, up to {wl.cap_s:g}s" if waits else ""
    speed = getattr(wl, "speed", None)   # a replay paced by its records' own event times
    pace = (f"at {speed:g} times the records' event-time pace (about {rate.get('eps', 0):,.0f} records/s)"
            if speed else f"at a {rate['shape']} rate ({params})")
    case.progress.step(f"case {case.name}: sending for {wl.duration_s:g}s {pace}{first}{more}")
    case.phase = "sending"
    live = LiveStatus(case.spark.progress_path, case.topic, len(case.warmup))

    def on_progress(sent: int, planned: int) -> None:
        case.sent, case.planned = sent, planned
        if case.failure is None and not case.expect_down:
            try:
                case.spark.check_alive()
            except DriverDied as exc:   # the schedule never waits for the system, nor stops for it
                if not case.expect_down:   # a fault may have killed it between the two checks
                    driver_died(case, exc)
        case.progress.update(live.line(sent, planned) + going.line(wl.duration_s))

    start_ms = time.time_ns() // 1_000_000 + generator.START_LEAD_MS
    steps = partition_steps(case.scenario.faults, wl.partitions)
    case.pace.sending(start_ms, start_ms + wl.duration_s * 1000)
    # a fault's `at` counts from the first event sent; its anchor, from the query's progress
    t0 = start_ms / 1000
    schedule.start(t0=t0, send_end=t0 + wl.duration_s, cap=t0 + wl.cap_s)
    try:
        report = offer.generate(wl, case.stack.bootstrap_servers, case.truth_dir, topic=case.topic,
                                    start_ms=start_ms, progress=on_progress, partitions_from=steps,
                                    keep_going=going if waits else None)
    finally:
        schedule.ended(time.time())   # a fault whose moment has not come is missed now
        truth.write_control(case.truth_dir, case.warmup)   # the warm-up events are truth too
    case.workload = going.record(wl, report)
    if schedule.specs:
        case.progress.step(f"case {case.name}: waiting for the faults to heal and be observed")
        schedule.join()
    case.sent, case.report = report["events"], report
    generator.write_report(case.files.generator, report)
    if not report["events"]:
        raise HarnessError("the workload sent no event (idle partitions or a custom shape ended at once)",
                           "check [workload] in the scenario")
    pl = case.pipeline
    max_ms = report["event_time_ms"]["max"]
    final_wm = checker.final_watermark_ms(pl, max_ms, case.dir)
    # Spark's watermark is the largest event time read by earlier batches minus the delay
    flush_ms = (max_ms if final_wm is None else final_wm) + pl.watermark_ms + pl.trigger_ms + 1000
    partitions = steps[-1][1] if steps else wl.partitions   # the flush reaches every partition
    control = offer.send_control(wl, case.stack.bootstrap_servers, case.topic, partitions,
                                 report["events"], flush_ms)
    truth.write_control(case.truth_dir, case.warmup + control)
    case.flush_offsets = {c["partition"]: c["offset"] + 1 for c in control}


def drain(case: Case) -> None:
    """Wait until a committed batch ran with a watermark at which all output is final (or,
    for a pipeline without a watermark, until the batches have read every offset): every
    result has then been emitted and committed to the sink."""
    pl, timeout_s = case.pipeline, case.scenario.drain_timeout_s
    assert case.report is not None, "drain after the load"
    final_wm = checker.final_watermark_ms(pl, case.report["event_time_ms"]["max"], case.dir)
    case.phase = "draining"
    case.progress.step(f"waiting for the pipeline to emit every result (up to {timeout_s:.0f}s)")

    def behind() -> int:
        read = checkpoint.committed_offsets(case.checkpoint, case.topic)
        return sum(max(0, end - read.get(p, 0)) for p, end in case.flush_offsets.items())

    def drained() -> bool:
        case.spark.check_alive()
        if final_wm is None:
            left = behind()
            case.progress.update(f"{left:,} records not yet read by a committed batch")
            return left == 0
        wm = checkpoint.committed_watermark(case.checkpoint, case.topic)
        if wm > 0:
            short_s = max(0, final_wm - wm) / 1000
            case.progress.update(f"the watermark is {short_s:,.1f} s of event time short of closing the "
                                 "last output (the end-of-run flush moves it there)")
        return wm >= final_wm

    try:
        wait_until(drained, timeout_s, 0.5)
    except WaitTimeout:
        # a result of the system under test, not bad input: the checker reads what the sink
        # holds, and the case fails for liveness only when outputs are missing (collect.py)
        waited = checker.drain_wait(pl, case.dir)
        if final_wm is None:
            where = f"{behind():,} records were still unread by a committed batch"
        else:
            wm = checkpoint.committed_watermark(case.checkpoint, case.topic)
            where = ("its watermark stayed " + (f"{(wm - final_wm) / 1000:+,.1f} s from" if wm > 0
                                                 else "never past the start of") + " the last window end")
        case.drain_short = ("the pipeline did not emit every result within drain_timeout "
                            f"({timeout_s:.0f}s): it waited for {waited}, and {where}; "
                            f"read {case.spark.log_path}")
        case.progress.step(f"the drain ran out: {case.drain_short}; the sink's rows decide")


def _state_checked(case: Case) -> bool:
    """Whether the state check will read this case's state (its query's, on one checkpoint)."""
    from harness.check import state_check

    return (case.scenario.measure.state_check is not False and state_check.applies(case.pipeline)
            and not state_check.unmodelled(case.dir, case.pipeline, case.checkpoints))


# the largest state a copy before a fault takes (a copy per fault, deleted once read), and how
# long the fault waits for it (the state_rollback plants' copies took 13-40 ms on one core)
SNAPSHOT_MAX_BYTES = 512 * 2**20
SNAPSHOT_WAIT_S = 5.0


def state_snapshot(case: Case):
    """The schedule's `snapshot` (harness/run/schedule.py): as each fault comes due, before it
    acts, a copy of the query's checkpoint in `<case>/state-check/before/<n>/`, read after its
    last committed batch with the other reads at the case's end (state_read.py `snapshot`,
    `read_before`): the state the fault found, which a read after the run cannot give (a fault
    may rewrite the very files). None when the state check will not read this case."""
    from harness.check import state_check

    if case.scenario.measure.state_check is False or not state_check.applies(case.pipeline):
        return None
    return lambda run: _snapshot_within(case, run, SNAPSHOT_WAIT_S)


def _snapshot_within(case: Case, run, wait_s: float) -> None:
    """`state_snapshot`'s copy for the fault `run` (a FaultRun), given `wait_s` at most: a
    checkpoint on storage that an earlier fault holds (a FUSE stall) would hold the copy, and with
    it this fault. A copy not done by then is abandoned (deleted when it ends, never read) and
    said; the fault goes on. A copy that fails or is not made is said the same way, in the fault's
    `error.txt`, which the state check's note repeats."""
    import json
    import shutil
    import threading

    from harness.check import state_check
    from workloads.pipelines.state_read import BEFORE, FAULT, snapshot

    live = Path(case.checkpoints[-1])
    if not live.is_dir() or not _state_checked(case):
        return
    where = case.dir / state_check.STATE_DIR / BEFORE / str(run.index)
    began = time.time()
    done: dict = {}
    abandoned = threading.Event()

    def work() -> None:
        try:
            size = sum(f.stat().st_size for f in (live / "state").rglob("*") if f.is_file())
            if size > SNAPSHOT_MAX_BYTES:
                done["said"] = (f"not copied: the query's state was {size / 2**20:,.0f} MiB, above the "
                                f"{SNAPSHOT_MAX_BYTES // 2**20} MiB a copy before a fault takes")
                return
            done["batch"] = snapshot(live, where / "checkpoint")
        except Exception as exc:  # noqa: BLE001 - said where the check looks, below
            done["said"] = f"its copy failed: {type(exc).__name__}: {exc}"
        finally:
            if abandoned.is_set():
                shutil.rmtree(where / "checkpoint", ignore_errors=True)

    worker = threading.Thread(target=work, name=f"state-copy-{run.index}", daemon=True)
    worker.start()
    worker.join(wait_s)
    if worker.is_alive():
        abandoned.set()
        done["said"] = (f"not copied: the copy took over {wait_s:g} s (the checkpoint's storage slow, or "
                        "held by a fault before this one?), and this fault went on without it")
    if "said" in done:   # the state check says it: "the state before fault n not read: ..."
        where.mkdir(parents=True, exist_ok=True)
        (where / "error.txt").write_text(done["said"] + "\n")
        return
    if done.get("batch") is None:
        return
    record = {"index": run.index, "kind": run.spec.kind, "at_s": round(began - run.t0, 3),
              "batch": done["batch"], "copy_s": round(time.time() - began, 3)}
    (where / FAULT).write_text(json.dumps(record, indent=2) + "\n")


def ask_state_read(case: Case, schedule: FaultRunner) -> bool:
    """Before the driver is asked to stop: ask it to read its state once its query has stopped
    (harness/check/state_check.py `ask`), after each fault's landing and at the end, when the
    state check will want it: a read in the case's own warm driver costs the reads alone, where
    a reader of its own first starts a JVM. Whether it asked (then the stop may take longer)."""
    from harness.check import state_check

    if not _state_checked(case):
        return False   # not asked, or a fresh query's state, a job's operators: no model of them
    if not (Path(case.checkpoints[0]) / "state").is_dir():
        return False   # no state kept
    is_job = case.pipeline.kind == "job"
    landed = [run.fault.landed_at or run.fault.injected_at for run in schedule.runs if run.fault is not None]
    state_check.ask(case.files.control, case.dir, case.checkpoints[0],
                    [t * 1000 for t in landed if t is not None], job=is_job)
    return True
