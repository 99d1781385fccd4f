"""Spark Structured Streaming pipelines and the driver program.

A pipeline is a module with:
  NAME      its scenario name (`[pipeline] kind`)
  PARAMS    its scenario keys besides `kind`, `trigger` and `build`: Param objects (params.py)
  COLUMNS   its output columns -> Spark SQL type, in order (every sink writes these)
  build(events_df, params) -> the streaming DataFrame to write, in append mode
and, when its keys constrain each other, `check_params(params)` raising SpecError;
`STATE_STORES` when it runs on some state stores only; `STATELESS = True` when it keeps no
state (Spark's real-time trigger takes such queries only).
`events_df` is the parsed Kafka stream (pipelines/source.py); `params` holds the pipeline's
keys in milliseconds and counts (`window_ms`, `slide_ms`, `watermark_ms`, `gap_ms`, `n`).

Each is registered once, with the oracle that checks its output, in harness/check/registry.py.
A scenario may replace `build` with its own (`build = "module:function"`) and keep the
kind's oracle, or declare `kind = "custom"` with its own oracle (harness/check).

Nothing here runs in the harness process except these declarations: the queries run in
their own driver process (`python -m workloads.pipelines.driver CONFIG.json`), which is
told the "module:function" to build (DriverConfig.build).
"""
