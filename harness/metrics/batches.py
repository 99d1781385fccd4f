"""Where a micro-batch's time goes: Spark's `durationMs` phases and its state operators.

Every StreamingQueryProgress carries `durationMs` (ms per phase of that batch) and, per
stateful operator, `stateOperators[]`. This summarises them over the batches that read
input (an idle batch's phases would pull every median towards zero), so that a slow
case says which phase is slow: planning, the sink's `addBatch`, the offset log's
`walCommit`, the commit log's `commitOffsets`...
"""

from __future__ import annotations

import numpy as np

PHASES = ("triggerExecution", "latestOffset", "getBatch", "queryPlanning", "addBatch", "walCommit",
          "commitOffsets")
# per operator: figures that add up over a batch, and the ones that are a level
_OPERATOR_TIMES = ("allUpdatesTimeMs", "allRemovalsTimeMs", "commitTimeMs")
_OPERATOR_LEVELS = ("numRowsTotal", "memoryUsedBytes")


def _stats(values: list[float]) -> dict:
    if not values:
        return {"median": None, "p90": None, "max": None}
    a = np.asarray(values, dtype=float)
    return {"median": float(np.median(a)), "p90": float(np.percentile(a, 90, method="inverted_cdf")),
            "max": float(a.max())}


def breakdown(progress: list[dict], trigger_ms: int | None = None) -> dict:
    """Per phase, the median, p90 and max ms over the batches with input; with
    `trigger_ms`, how many of them took longer than the trigger interval; per stateful
    operator (in plan order), its time per batch and its largest state."""
    busy = [p for p in progress if p.get("numInputRows", 0) > 0]
    phases = {name: _stats([p["durationMs"][name] for p in busy if name in p.get("durationMs", {})])
              for name in PHASES}
    out: dict = {"batches": len(busy), "phases_ms": phases}
    if trigger_ms:
        out["over_trigger"] = sum(1 for p in busy if p.get("durationMs", {}).get("triggerExecution", 0)
                                  > trigger_ms)
    operators: list[dict] = []
    for p in busy:
        for i, op in enumerate(p.get("stateOperators", [])):
            if i == len(operators):
                operators.append({"name": op.get("operatorName", f"operator {i}"),
                                  **{k: [] for k in (*_OPERATOR_TIMES, *_OPERATOR_LEVELS)}})
            for key in (*_OPERATOR_TIMES, *_OPERATOR_LEVELS):
                if key in op:
                    operators[i][key].append(op[key])
    out["state_operators"] = [
        {"name": op["name"], **{f"{k}": _stats(op[k]) for k in _OPERATOR_TIMES},
         **{f"{k}_max": (max(op[k]) if op[k] else None) for k in _OPERATOR_LEVELS}}
        for op in operators]
    return out
