"""Run a scenario: services, then each case (generator -> pipeline -> sink -> checker).

Data flows one way and every stage leaves its output in the run directory, so a
report can be rebuilt from the directory alone.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path

from harness import checker, checkpoint, environment, jvm, metrics
from harness import summary as summary_mod
from harness.errors import HarnessError, RunAborted, ServiceError
from harness.progress import Progress
from harness.services.base import Registry
from harness.services.kafka import KafkaBroker, cluster_answers
from harness.services.postgres import PostgresServer
from harness.services.spark import SparkDriver
from harness.wait import WaitTimeout, wait_until

log = logging.getLogger(__name__)


@dataclass
class Stack:
    """Endpoints of the shared services for all cases of a run."""

    bootstrap_servers: str
    postgres_url: str | None
    own_kafka: bool


def run(scenario, run_dir: Path, run_id: str, progress: Progress, registry: Registry) -> dict:
    """Run every case of `scenario`; returns the summary (already written to run_dir)."""
    result = _skeleton(scenario, run_id)
    try:
        stack = start_stack(scenario, run_dir / "services", registry, progress)
        for case in scenario.cases:
            result["cases"].append(run_case(scenario, case, stack, run_dir, run_id, progress, registry))
        result["status"] = "completed"
    except RunAborted as exc:
        result.update(status="aborted", error=str(exc))
        raise
    except Exception as exc:
        result.update(status="error", error=f"{type(exc).__name__}: {exc}")
        raise
    finally:
        result["ended_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        summary_mod.write(run_dir, result)
    return result


def preflight(scenario) -> None:
    """Check the environment before anything starts or is written: java, the jars,
    pyspark's version, PostgreSQL's binaries. Raises EnvironmentProblem with the fix."""
    from harness.services.postgres import find_bindir

    jvm.java()
    environment.check_spark_version()
    jvm.spark_connector_jars()
    if scenario.services.kafka.bootstrap_servers is None:
        jvm.jars("kafka")
        jvm.jars("kafka-log")
    if scenario.services.postgres.url is None and any(c.sink == "postgres" for c in scenario.cases):
        find_bindir()


def _skeleton(scenario, run_id: str) -> dict:
    return {
        "schema_version": summary_mod.SCHEMA_VERSION, "run_id": run_id, "status": "error",
        "scenario": {"name": scenario.name, "path": str(scenario.path)},
        "environment": environment.describe(scenario.services.spark.master,
                                            scenario.services.kafka.bootstrap_servers is None),
        "cases": [], "error": None, "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def start_stack(scenario, services_dir: Path, registry: Registry, progress: Progress) -> Stack:
    """Start (or check) Kafka and Postgres; Spark drivers start per case."""
    kafka_cfg, pg_cfg = scenario.services.kafka, scenario.services.postgres
    if kafka_cfg.bootstrap_servers:
        if not cluster_answers(kafka_cfg.bootstrap_servers):
            raise ServiceError(f"no Kafka cluster answers at {kafka_cfg.bootstrap_servers}",
                               "start it, or remove services.kafka.bootstrap_servers to use our own")
        bootstrap, own = kafka_cfg.bootstrap_servers, False
    else:
        progress.step("starting Kafka broker (KRaft)")
        broker = KafkaBroker(services_dir / "kafka", registry).start()
        bootstrap, own = broker.wait_ready().bootstrap_servers, True
    url = pg_cfg.url
    if url is None and any(c.sink == "postgres" for c in scenario.cases):
        progress.step("starting PostgreSQL")
        url = PostgresServer(services_dir / "postgres", registry).start().wait_ready().url
    return Stack(bootstrap, url, own)


def run_case(scenario, case, stack: Stack, run_dir: Path, run_id: str, progress: Progress,
             registry: Registry) -> dict:
    """Generator -> Kafka -> Spark driver -> sink, then the checker: one summary case."""
    case_dir = run_dir / "cases" / case.name
    suffix = re.sub(r"[^A-Za-z0-9]", "_", f"{case.name}_{run_id[-4:]}").lower()
    topic, table = f"{scenario.workload.topic}-{suffix}", f"sink_{suffix}"
    driver, warmup = _start_driver(scenario, case, stack, case_dir, topic, table, progress, registry)
    spark_pids = {"driver": driver.pid, "executors": driver.executor_pids()}
    truth_dir, last_window_end, report = _offer_load(scenario, case, stack, driver, topic, warmup, progress)
    _drain(driver, case_dir / "checkpoint", topic, last_window_end, scenario.drain_timeout_s, progress)
    driver.request_stop()
    return {**_case_result(scenario, case, stack, case_dir, truth_dir, topic, table),
            "generator": _generator_summary(report), "spark_pids": spark_pids}


def _start_driver(scenario, case, stack: Stack, case_dir: Path, topic: str, table: str,
                  progress: Progress, registry: Registry) -> tuple[SparkDriver, list[dict]]:
    """Create the topic, start the case's driver and wait until its first batch ran.
    Returns the driver and the warm-up control events (part of ground truth)."""
    from workloads import generator

    generator.create_topic(stack.bootstrap_servers, topic, scenario.workload.partitions)
    progress.step(f"case {case.name}: starting Spark driver ({scenario.services.spark.master})")
    config = _driver_config(scenario, case, stack, topic, table, case_dir)
    driver = SparkDriver(case_dir, config, registry).start().wait_ready()
    return driver, _warm_up(driver, stack, topic, scenario.workload.partitions, progress)


def _offer_load(scenario, case, stack: Stack, driver: SparkDriver, topic: str, warmup: list[dict],
                progress: Progress) -> tuple[Path, int, dict]:
    """Send the workload open-loop, then the watermark-moving control events; ground truth
    goes to the case's truth/ directory. Returns it, the end of the last window the
    events fall in, and the generator's report."""
    from workloads import generator, shapes, truth

    wl, pl = scenario.workload, scenario.pipeline
    truth_dir = driver.workdir / "truth"
    rate = shapes.describe(wl.rate)
    params = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in rate.items()
                       if k != "shape")
    progress.step(f"case {case.name}: sending for {wl.duration_s:g}s at a {rate['shape']} rate ({params})")

    def on_progress(sent: int, planned: int) -> None:
        driver.check_alive()
        progress.update(f"sent {sent:,}/{planned:,}")

    report = generator.generate(wl, stack.bootstrap_servers, truth_dir, topic=topic, progress=on_progress)
    generator.write_report(driver.workdir / "generator.json", report)
    if not report["events"]:
        raise HarnessError("the workload sent no event (idle partitions or a custom shape ended at once)",
                           "check [workload] in the scenario")
    max_event_ms = report["event_time_ms"]["max"]
    flush_ms = max_event_ms + pl.window_ms + pl.watermark_ms + pl.trigger_ms + 1000
    control = generator.send_control(stack.bootstrap_servers, topic, wl.partitions, report["events"],
                                     flush_ms)
    truth.write_control(truth_dir, warmup + control)
    return truth_dir, _last_window_end(max_event_ms, pl.window_ms, pl.slide_ms), report


def _driver_config(scenario, case, stack: Stack, topic: str, table: str, case_dir: Path) -> dict:
    pl = scenario.pipeline
    return {
        "app_name": f"harness-{case.name}", "master": scenario.services.spark.master,
        "spark_conf": dict(scenario.services.spark.conf),
        "jars": [str(p) for p in jvm.spark_connector_jars()],
        "bootstrap_servers": stack.bootstrap_servers, "topic": topic,
        "checkpoint": str(case_dir / "checkpoint"),
        "pipeline": {"kind": pl.kind, "window_ms": pl.window_ms, "slide_ms": pl.slide_ms,
                     "watermark_ms": pl.watermark_ms, "trigger_ms": pl.trigger_ms},
        "sink": {"kind": case.sink, "url": stack.postgres_url, "table": table, "mode": case.guarantee},
    }


def _warm_up(driver: SparkDriver, stack: Stack, topic: str, partitions: int, progress: Progress,
             timeout_s: float = 180.0) -> list[dict]:
    """Send control events at event time 0 and wait for the batch that reads them, so
    that JVM warm-up is paid before measurement starts."""
    from harness.metrics import read_progress
    from workloads import generator

    progress.step("warming up: waiting for the first micro-batch")
    warmup = generator.send_control(stack.bootstrap_servers, topic, partitions, -partitions, 0)

    def first_batch_done() -> bool:
        driver.check_alive()
        return any(p.get("numInputRows", 0) > 0 for p in read_progress(driver.progress_path))

    wait_until(first_batch_done, timeout_s, 0.5, f"no micro-batch completed within {timeout_s:.0f}s")
    return warmup


def _last_window_end(max_event_time_ms: int, window_ms: int, slide_ms: int) -> int:
    return max_event_time_ms - max_event_time_ms % slide_ms + window_ms


def _drain(driver: SparkDriver, cp: Path, topic: str, window_end: int, timeout_s: float,
           progress: Progress) -> None:
    """Wait until a committed batch ran with a watermark past the last window: every
    window has then been emitted and committed to the sink."""
    progress.step(f"waiting for the pipeline to emit every window (up to {timeout_s:.0f}s)")

    def drained() -> bool:
        driver.check_alive()
        wm = checkpoint.committed_watermark(cp, topic)
        if wm > 0:
            progress.update(f"watermark {(wm - window_end) / 1000:+,.1f} s from the last window end")
        return wm >= window_end

    try:
        wait_until(drained, timeout_s, 0.5)
    except WaitTimeout:
        raise HarnessError(
            f"the pipeline did not emit every window within drain_timeout ({timeout_s:.0f}s)",
            f"raise drain_timeout in the scenario, or read {driver.log_path}") from None


def _first_send_ms(truth) -> float:
    return float(truth.loc[~truth["control"], "sent_ms"].min())


def _generator_summary(report: dict) -> dict:
    """The generator's own numbers: did it offer what the workload asked, on time?"""
    slip = report["schedule_slip_us"] or {}
    return {"target_eps": report["target_eps"], "achieved_eps": report["achieved_eps"],
            "pacing_error": report["pacing_error"], "late_by_design": report["late_by_design"],
            "per_partition": report["per_partition"],
            "schedule_slip_ms": {k: slip[q] / 1000 for k, q in
                                 (("p50", "p50"), ("p99", "p99"), ("p999", "p99.9"), ("max", "max"))
                                 if q in slip}}


def _case_result(scenario, case, stack: Stack, case_dir: Path, truth_dir: Path, topic: str,
                 table: str) -> dict:
    from workloads import truth as truth_mod
    from workloads.pipelines.sink_reader import read_postgres_sink

    truth = truth_mod.read(truth_dir)
    sink = read_postgres_sink(stack.postgres_url, table)
    sink.to_parquet(case_dir / "sink.parquet", index=False)
    batches = checkpoint.read_batches(case_dir / "checkpoint", topic)
    pl = scenario.pipeline
    result = checker.check(truth, sink, batches, pl.window_ms, pl.slide_ms)
    progress_records = metrics.read_progress(case_dir / "progress.jsonl")
    c = result.counts
    verdict = summary_mod.verdict(case.guarantee, c["lost"], c["duplicated"], c["unexpected"],
                                  expected_count=c["expected"])
    if result.mismatched_windows:
        verdict["holds"] = False
        verdict["detail"] += f"; {result.mismatched_windows} windows have the right count but a wrong sum"
    return {
        "name": case.name, "guarantee": case.guarantee, "pipeline": pl.kind, "sink": case.sink,
        "faults": [], "events": c, "verdict": verdict,
        "throughput_eps": {"offered": metrics.offered_eps(truth),
                           "processed": metrics.processed_eps(progress_records, _first_send_ms(truth))},
        "latency_ms": {"event_time": metrics.percentiles(result.event_time_latency_ms),
                       "processing_time": metrics.percentiles(result.processing_time_latency_ms)},
        "backpressure": metrics.backpressure(truth, progress_records, topic),
        "batches": len(progress_records), "topic": topic, "sink_table": table,
    }
