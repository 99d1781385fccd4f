"""Spark Structured Streaming pipelines, their registry, and the driver program.

A pipeline is a module with:
  NAME      its scenario name (`[pipeline] kind`)
  PARAMS    the scenario keys it takes besides `kind` and `trigger`, e.g. ("window", "watermark")
  COLUMNS   its output columns -> Spark SQL type, in order (every sink writes these)
  build(events_df, params) -> the streaming DataFrame to write, in append mode
`events_df` is the parsed Kafka stream (pipelines/source.py); `params` holds the pipeline's
keys in milliseconds and counts (`window_ms`, `slide_ms`, `watermark_ms`, ...).

Nothing here runs in the harness process except these declarations: the queries run in
their own driver process (`python -m workloads.pipelines.driver CONFIG.json`).
"""

from __future__ import annotations

import importlib
from types import ModuleType

# name -> module; an alias keeps an older scenario name working
PIPELINES = {
    "tumbling_count": "workloads.pipelines.tumbling_count",
    "windowed_count": "workloads.pipelines.tumbling_count",
}


def pipeline(kind: str) -> ModuleType:
    """The module of pipeline `kind` (a KeyError names an unknown kind)."""
    return importlib.import_module(PIPELINES[kind])
