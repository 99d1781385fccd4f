"""The Spark driver program: `python -m workloads.pipelines.driver CONFIG.json`.

Runs in its own process (the harness starts it as a service), so a fault can kill it
and a restart resumes from the same checkpoint. It reads a DriverConfig (config.py),
starts the query, and writes beside it:
  status.json     {"state": "running"|"stopped"|"failed", "query_id", "error"}
  spark-conf.json the SparkConf it runs with
  progress.jsonl  one StreamingQueryProgress JSON per micro-batch
It stops gracefully when the file named by `stop_path` appears. Between a sink's write
and Spark's commit it obeys the control directory (pipelines/control.py).

With the available-now trigger the driver is a scheduled incremental job: the query
drains what the topic holds and stops, and the driver starts it again `trigger_ms` later,
on the same checkpoint, until told to stop.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

from workloads import plugins
from workloads.pipelines import control, state_read, timer_log
from workloads.pipelines.config import DriverConfig
from workloads.pipelines.control import CommitGate
from workloads.pipelines.executors import ExecutorWatch
from workloads.pipelines.source import parse_events, rate_events, read_delta, read_kafka
from workloads.pipelines.taskfault import JOB, SPARK_SINK, with_task_faults
from workloads.sinks import SINKS, sink_target

DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    # 200 shuffle partitions on 2 cores spends most of each batch scheduling state-store tasks
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
}


def main(argv: list[str]) -> int:
    config = DriverConfig.read(Path(argv[1]))
    status = Path(config.status_path)
    try:
        return run(config, status)
    except Exception as exc:  # noqa: BLE001 - the harness reads the failure from status.json
        _write_status(status, state="failed", error=error_text(exc), traceback=traceback.format_exc())
        traceback.print_exc()
        return 1


def run(config: DriverConfig, status: Path) -> int:
    plugins.add_import_paths(config.import_paths)
    spark = _session(config)
    target = config.sink_class or sink_target(config.sink, None)
    sink_class = plugins.load(target, "sink_class") if config.sink_class else SINKS[config.sink].load()
    try:
        sink = sink_class(config.sink_context)
    except Exception as exc:
        raise RuntimeError(f"the sink {target}: its constructor {target.partition(':')[2]}(ctx) raised "
                           f"{type(exc).__name__}: {exc}") from exc
    sink.setup()
    query = _start_query(spark, config, sink)
    _write_status(status, state="running", query_id=str(query.id), run_id=str(query.runId))
    stop_path = Path(config.stop_path)
    executors = ExecutorWatch(spark, config.executors_path)
    while True:
        while query.isActive and not stop_path.exists():
            query.awaitTermination(0.5)
            control.serve(spark, Path(config.control_dir))
            executors.poll()
        if query.exception() is not None or config.trigger != "available-now":
            break
        # an available-now run drained what was there: the next one, trigger_ms later
        next_at = time.monotonic() + config.trigger_ms / 1000
        while time.monotonic() < next_at and not stop_path.exists():
            time.sleep(0.1)
            control.serve(spark, Path(config.control_dir))
            executors.poll()
        if stop_path.exists():
            break
        query = _start_query(spark, config, sink)
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    query.stop()
    sink.close()
    state_read.serve(spark, Path(config.control_dir))   # the state check's reads, if the harness asked
    spark.stop()
    _write_status(status, state="stopped", query_id=str(query.id))
    return 0


def _session(config: DriverConfig):
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(config.app_name).master(config.master)
    conf = {**DEFAULT_CONF, "spark.jars": ",".join(config.jars), **config.spark_conf, **_clock_conf(config)}
    for key, value in conf.items():
        builder = builder.config(key, value)
    with _jvm_clock(config):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    _write_conf(spark, Path(config.conf_path))
    if config.progress:
        clock = Path(config.clock_file) if config.clock_file else None
        delta = (config.topic, Path(config.delta_table)) if config.source == "delta" else None
        spark.streams.addListener(_progress_listener(Path(config.progress_path), clock, delta))
    return spark


def _clock_conf(config: DriverConfig) -> dict[str, str]:
    """Each executor on a clock file of its own (clock.rc in its working directory), so that the
    driver's never reaches it (its environment is the driver JVM's); workloads/clock.py."""
    if not (config.clock_file or config.executor_clock):
        return {}
    from workloads import clock

    return {f"spark.executorEnv.{k}": v for k, v in clock.env(clock.EXECUTOR_FILE).items()}


@contextmanager
def _jvm_clock(config: DriverConfig):
    """The driver JVM starts on its clock file; this Python process stays on the real clock
    (the environment is its children's only while the JVM starts)."""
    if not config.clock_file:
        yield
        return
    from workloads import clock

    added = clock.env(config.clock_file)
    saved = {k: os.environ.get(k) for k in added}
    os.environ.update(added)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _progress_listener(path: Path, clock_file: Path | None = None, delta: tuple[str, Path] | None = None):
    """A listener that appends each progress's JSON to `path`; with `clock_file` (a clock
    fault's on the driver JVM), each record also carries `clock_offset_ms`, the offset of the
    JVM's clock when it was written, from which the harness puts the batch's times back on
    the real clock (progress_log.end_ms). With `delta` (the topic, the source table), each
    Delta source offset is also given as the topic's (workloads/delta_source.py).

    PySpark's own listener turns every event into Python objects first, field by field, a py4j
    round trip each (some 60 for one stateful query's progress), on the driver the query
    shares its 2 cores with; this one asks the JVM for the event's JSON alone, in 2."""
    from pyspark.sql.streaming import StreamingQueryListener

    class JsonToFile:
        """Implements Spark's PythonStreamingQueryListener through py4j, as PySpark's does."""

        def onQueryStarted(self, jevent):
            pass

        def onQueryProgress(self, jevent):
            line = jevent.progress().json().replace("\n", " ")
            if delta is not None:
                from workloads import delta_source

                topic, table = delta
                line = json.dumps(delta_source.translate_progress(json.loads(line), topic,
                                                                  delta_source.manifest_path(table)))
            if clock_file is not None:
                from workloads import clock

                line = line.rstrip()[:-1] + f',"clock_offset_ms":{clock.read_ms(clock_file)}}}'
            with open(path, "a") as out:
                out.write(line + "\n")

        def onQueryIdle(self, jevent):
            pass

        def onQueryTerminated(self, jevent):
            pass

        class Java:
            implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]

    class ProgressToFile(StreamingQueryListener):
        @property
        def _jlistener(self):   # what StreamingQueryManager.addListener registers
            from pyspark import SparkContext

            if not hasattr(self, "_jlistenerobj"):
                jvm = SparkContext._jvm
                self._jlistenerobj = jvm.PythonStreamingQueryListenerWrapper(JsonToFile())
            return self._jlistenerobj

        def onQueryStarted(self, event):
            pass

        def onQueryProgress(self, event):
            pass

        def onQueryIdle(self, event):
            pass

        def onQueryTerminated(self, event):
            pass

    return ProgressToFile()


def _start_query(spark, config: DriverConfig, sink):
    # a user's job (pipelines/job.py) parses the records itself, from Kafka's raw columns
    parse = parse_events if config.pipeline != "job" else (lambda raw: raw)
    if config.source == "rate":
        events = rate_events(spark, config.rows_per_batch, nexmark=config.pipeline == "nexmark")
    elif config.source == "delta":
        options = {"startingOffsets": config.starting_offsets, **config.source_options}
        events = parse(read_delta(spark, config.delta_table, options))
    else:
        options = {"startingOffsets": config.starting_offsets, **config.source_options}
        events = parse(read_kafka(spark, config.bootstrap_servers, config.topic, options))
    build = plugins.load(config.build, "pipeline.build")
    params = dict(config.params)
    # for a build that reads the source its own way (the gallery's source models)
    if config.source == "delta":
        params["source_table"] = config.delta_table
    elif config.source != "rate":
        params["source_topic"], params["bootstrap_servers"] = config.topic, config.bootstrap_servers
    # for a processor that records its timers' firings (pipelines/timer_log.py): it makes the directory
    params.update(timer_log.params_for(config.timers_path, config.batch_base))
    timer_log.offer(params)   # a job's processor, given no params, finds it (TimerLog.current)
    out = _checked_output(build(events, params), config)
    own = getattr(sink, "streaming_format", False)   # Spark's own sink: it reads the stage's rows itself
    if config.task_faults:   # the scenario has a fail-task fault: the stage it fails tasks in
        out = with_task_faults(out, config.control_dir, SPARK_SINK if own else JOB)

    def configured(df):
        # real-time mode takes update mode only; for its stateless queries that is append
        mode = "update" if config.trigger == "real-time" else config.params.get("output_mode", "append")
        writer = df.writeStream.outputMode(mode).queryName(config.app_name).options(**config.writer_options)
        return _triggered(writer, config).option("checkpointLocation", config.checkpoint)

    if own:   # Spark's own sink: it shapes and starts the writer
        return sink.start(out, configured)
    gate = CommitGate(sink.write, Path(config.control_dir), lambda: getattr(sink, "last_rows", None),
                      config.batch_base, checkpoint=config.checkpoint)
    return configured(out).foreachBatch(gate).start()


def _triggered(writer, config: DriverConfig):
    if config.trigger == "available-now":
        return writer.trigger(availableNow=True)
    if config.trigger == "real-time":
        return writer.trigger(realTime=f"{config.trigger_ms} milliseconds")
    return writer.trigger(processingTime=f"{config.trigger_ms} milliseconds")


def _checked_output(out, config: DriverConfig):
    """The built query's output, as the sink's columns; a build that returns something else
    fails the driver with what it returned and what the kind expects."""
    from pyspark.sql import DataFrame

    where = config.build
    if not isinstance(out, DataFrame) or not out.isStreaming:
        raise TypeError(f"pipeline.build {where} returned {type(out).__name__}, not a streaming DataFrame")
    wanted = list(config.sink_context.columns)
    missing = [c for c in wanted if c not in out.columns]
    if missing:
        raise ValueError(f"pipeline.build {where} returned columns {out.columns}; "
                         f"{config.pipeline} output needs {wanted} (missing {missing})")
    return out.select(*wanted)


def _write_conf(spark, path: Path) -> None:
    """The Spark configuration the driver actually runs with (its defaults, the harness's and
    the sink's settings, the user's), for the run directory to describe itself."""
    conf = dict(sorted(spark.sparkContext.getConf().getAll()))
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(conf, indent=2) + "\n")
    os.replace(tmp, path)


PLAN = "\n=== Streaming Query ==="   # where a StreamingQueryException's message turns into the plan


def error_text(exc: BaseException, limit: int = 600) -> str:
    """The failure in a sentence: class and message without the query's plan, and the JVM's
    root cause when the message hides it ("Exception thrown in awaitResult")."""
    text = f"{type(exc).__name__}: {str(exc).split(PLAN)[0].strip()}"
    # py4j's message is a line of its own, then the Java exception, then its stack: keep the
    # lines that say something ("An error occurred while calling o211.start." alone did not)
    said = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("at ")]
    text = " ".join(said[:3])
    root = _root_cause(getattr(exc, "_origin", None))
    if root and root.split(":")[0] not in text:
        cause = f" (caused by {root[:limit // 2]})"
        # the cause is what says why (CANNOT_LOAD_STATE_STORE under a foreachBatch traceback):
        # the message is cut to leave it room
        text = _cut(text, limit - len(cause)) + cause
    return text[:limit]


def _cut(text: str, room: int) -> str:
    return text if len(text) <= room else text[:max(room - 3, 0)].rstrip() + "..."


def _root_cause(throwable) -> str | None:
    """The innermost cause of a Java exception (py4j), its first three lines joined."""
    try:
        depth = 0
        while throwable is not None and throwable.getCause() is not None and depth < 20:
            throwable, depth = throwable.getCause(), depth + 1
        if not depth:
            return None
        lines = [line.strip() for line in str(throwable.toString()).splitlines() if line.strip()]
        return " ".join(lines[:3])
    except Exception:  # noqa: BLE001 - the JVM may be gone; the message alone still says what failed
        return None


def _write_status(path: Path, **fields) -> None:
    fields.update(pid=os.getpid(), at_ms=time.time_ns() // 1_000_000)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(fields))
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
