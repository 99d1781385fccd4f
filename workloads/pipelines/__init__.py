"""Spark Structured Streaming pipelines, their registry, and the driver program.

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

A scenario may replace `build` with its own (`build = "module:function"`) and keep the
kind's oracle, or declare `kind = "custom"` with its own oracle (harness/check).

Nothing here runs in the harness process except these declarations: the queries run in
their own driver process (`python -m workloads.pipelines.driver CONFIG.json`).
"""

from __future__ import annotations

import importlib
from types import ModuleType

# name -> module; an alias keeps an older scenario name working
PIPELINES = {
    "passthrough": "workloads.pipelines.passthrough",
    "tumbling_count": "workloads.pipelines.tumbling_count",
    "windowed_count": "workloads.pipelines.tumbling_count",
    "sliding_top_n": "workloads.pipelines.sliding_top_n",
    "session_count": "workloads.pipelines.session_count",
    "dedup": "workloads.pipelines.dedup",
    "failed_logins": "workloads.pipelines.failed_logins",
    "order_payment_join": "workloads.pipelines.order_payment_join",
}
CUSTOM = "custom"   # the user's own query and oracle: no module of ours


def pipeline(kind: str) -> ModuleType:
    """The module of pipeline `kind` (a KeyError names an unknown kind)."""
    return importlib.import_module(PIPELINES[kind])


def builder_target(kind: str) -> str:
    """The "module:function" of kind's own build."""
    return f"{PIPELINES[kind]}:build"
