"""The checker: what the sink holds against ground truth, through each pipeline's oracle.

  checkpoint.py   Spark's offset and commit logs: which batch read which offsets, and its watermark
  windows.py      the oracle of windowed aggregations (tumbling_count)

An oracle module has `check(truth, sink, batches, *params)` returning a CheckResult, and
`final_watermark_ms(max_event_time_ms, params)`: the watermark at which all of a run's
output is final, so the runner knows when the pipeline has drained.
"""

from __future__ import annotations

import importlib
from types import ModuleType

ORACLES = {
    "tumbling_count": "harness.check.windows",
    "windowed_count": "harness.check.windows",
}


def oracle(kind: str) -> ModuleType:
    """The oracle module for pipeline `kind`."""
    return importlib.import_module(ORACLES[kind])
