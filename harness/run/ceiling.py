"""Spark's own ceiling for a case's query: the same pipeline on Spark's `rate-micro-batch`
source into the `noop` sink, as fast as it goes.

No Kafka, no sink, no harness load: what is left is what Spark spends on the query on
this master. The sustained rate of the real case against this ceiling says what Kafka,
the sink and everything around them cost (issue 11). Each batch holds `rows_per_batch`
events whose event time advances one second a batch, so windows close and state is
evicted as in the real run; the first `skip` batches pay for the JVM's warm-up and are
left out.
"""

from __future__ import annotations

from dataclasses import replace

from harness.metrics import read_progress
from harness.services.spark import SparkDriver
from workloads.wait import wait_until

ROWS_PER_BATCH = 20_000
BATCHES, SKIP = 12, 4


def ceiling_of(progress: list[dict], skip: int = SKIP) -> dict:
    """Rows per second of busy time over the batches after the first `skip` with input."""
    busy = [p for p in progress if p.get("numInputRows", 0) > 0][skip:]
    rows = sum(int(p["numInputRows"]) for p in busy)
    times = sorted(p["durationMs"].get("triggerExecution", 0) for p in busy)
    seconds = sum(times) / 1000
    return {"eps": round(rows / seconds, 1) if seconds > 0 else None, "batches": len(busy), "rows": rows,
            "median_batch_ms": times[len(times) // 2] if times else None}


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

        def enough() -> bool:
            driver.check_alive()
            busy = [p for p in read_progress(driver.progress_path) if p.get("numInputRows", 0) > 0]
            return len(busy) >= batches

        wait_until(enough, timeout_s, 1.0, f"Spark did not run {batches} batches within {timeout_s:.0f}s")
    finally:
        driver.stop()
    return {**ceiling_of(read_progress(driver.progress_path)), "rows_per_batch": rows_per_batch}
