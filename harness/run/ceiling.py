"""Spark's own ceiling for a case's query: the same pipeline on Spark's `rate-micro-batch`
source into the `noop` sink, as fast as it goes, on batches at least as big as the
sustained rate's (batch_for).

No Kafka, no sink, no harness load: what is left is what Spark spends on the query on
this master. The sustained rate of the real case against this ceiling says what Kafka,
the sink and everything around them cost (issue 11). Each batch holds `rows_per_batch`
events whose event time advances one second a batch, so windows close and state is
evicted as in the real run; the first `skip` batches pay for the JVM's warm-up and are
left out.

Over the same batches, the cores Spark's processes (the driver's tree: its JVM and the
executors) used, from their CPU times: the ceiling has the whole machine, and a sustained
rate on the real stack shares it with the broker, the generator and the sink, so the two
compare per core as well as per second (`spark_cores`, `eps_per_spark_core`).
"""

from __future__ import annotations

import time
from dataclasses import replace

import psutil

from harness.metrics import read_progress
from harness.services.spark import SparkDriver
from workloads.wait import wait_until

ROWS_PER_BATCH = 20_000
BATCHES, SKIP = 12, 4
POLL_S = 0.1    # how often the batches are counted, and so how close the CPU window fits them


def ceiling_of(progress: list[dict], skip: int = SKIP) -> dict:
    """Rows per second of busy time over the batches after the first `skip` with input."""
    busy = [p for p in progress if p.get("numInputRows", 0) > 0][skip:]
    rows = sum(int(p["numInputRows"]) for p in busy)
    times = sorted(p["durationMs"].get("triggerExecution", 0) for p in busy)
    seconds = sum(times) / 1000
    return {"eps": round(rows / seconds, 1) if seconds > 0 else None, "batches": len(busy), "rows": rows,
            "median_batch_ms": times[len(times) // 2] if times else None}


def batch_for(sustained_eps: float | None, pipeline) -> int:
    """The ceiling's batch: at least the batch the sustained rate gave the query (its rate
    times the processing-time trigger's interval), never under ROWS_PER_BATCH.

    A batch's fixed cost (planning, the state store's load and commit in every shuffle
    partition, the commit log) is spread over its rows, so a ceiling on smaller batches than
    the sustained trial's is no ceiling: q5 (windows of five slides) sustained 36,000 events/s
    in batches of 36,000 rows against 27,294 on batches of 20,000 (docs/performance.md)."""
    if not sustained_eps or pipeline.trigger != "processing-time" or not pipeline.trigger_ms:
        return ROWS_PER_BATCH
    return max(ROWS_PER_BATCH, round(sustained_eps * pipeline.trigger_ms / 1000))


def measure(case, rows_per_batch: int = ROWS_PER_BATCH, batches: int = BATCHES,
            timeout_s: float = 600.0) -> dict:
    """Run the case's query on the rate source into noop until `batches` batches with
    input have run; its ceiling, with the driver's directory `<case dir>/ceiling`."""
    workdir = case.dir / "ceiling"
    workdir.mkdir(parents=True, exist_ok=True)
    config = replace(case.driver_config(), source="rate", rows_per_batch=rows_per_batch, sink="noop",
                     sink_class="", trigger="processing-time", trigger_ms=0,
                     checkpoint=str(workdir / "checkpoint"), app_name=f"harness-{case.name}-ceiling")
    case.progress.step(f"case {case.name}: Spark's ceiling on the rate source into noop "
                       f"({batches} batches of {rows_per_batch:,} events)")
    driver = SparkDriver(workdir, config, case.registry, name="spark-ceiling").start()
    try:
        driver.wait_ready()
        marks: list[tuple[float, float]] = []   # (wall, Spark's CPU seconds) after SKIP and after `batches`

        def enough() -> bool:
            driver.check_alive()
            busy = sum(1 for p in read_progress(driver.progress_path) if p.get("numInputRows", 0) > 0)
            if busy >= SKIP and not marks or busy >= batches:
                marks.append((time.monotonic(), cpu_seconds(driver.pids())))
            return busy >= batches

        wait_until(enough, timeout_s, POLL_S, f"Spark did not run {batches} batches within {timeout_s:.0f}s")
    finally:
        driver.stop()
    found = ceiling_of(read_progress(driver.progress_path))
    cores = cores_between(marks[0], marks[-1]) if len(marks) > 1 else None
    return {**found, "rows_per_batch": rows_per_batch, "spark_cores": cores,
            "eps_per_spark_core": round(found["eps"] / cores, 1) if found["eps"] and cores else None}


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU seconds the live processes `pids` have used so far."""
    total = 0.0
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        total += times.user + times.system
    return total


def cores_between(start: tuple[float, float], end: tuple[float, float]) -> float | None:
    """The cores used between two (wall seconds, CPU seconds) marks."""
    wall = end[0] - start[0]
    return round((end[1] - start[1]) / wall, 3) if wall > 0 else None
