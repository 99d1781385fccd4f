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
    """Per phase, the median, p90 and max ms over the batches with input; Spark's input rate
    against its processing rate (and in how many batches it processed slower than rows came
    in); with `trigger_ms`, how many batches took longer than the trigger interval; per stateful
    operator (in plan order), its time per batch and its largest state."""
    busy = [p for p in progress if p.get("numInputRows", 0) > 0]
    phases = {name: _stats([p["durationMs"][name] for p in busy if name in p.get("durationMs", {})])
              for name in PHASES}
    out: dict = {"batches": len(busy), "phases_ms": phases}
    # Spark's two rates per batch: rows arriving per second (since the last batch) against rows
    # this batch processed per second of its own time; processing slower than input is backlog
    inputs = [(float(p["inputRowsPerSecond"]), float(p["processedRowsPerSecond"])) for p in busy
              if p.get("inputRowsPerSecond") is not None and p.get("processedRowsPerSecond") is not None]
    out["rows_per_s"] = {"input": _stats([i for i, _ in inputs]), "processed": _stats([r for _, r in inputs]),
                         "slower_than_input": sum(1 for i, r in inputs if r < i)}
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


def table(progress: list[dict]):
    """The case's batches.parquet: one row per micro-batch in the order they ran, `at_ms`
    its end (the driver's clock: the harness's own on one machine), with its input rows,
    each `durationMs` phase and its watermark."""
    import pandas as pd

    from workloads.pipelines import progress_log

    rows = [{"at_ms": int(progress_log.end_ms(p)), "batch_id": p.get("batchId"), "run_id": p.get("runId"),
             "input_rows": int(p.get("numInputRows", 0)),
             "input_rows_per_s": p.get("inputRowsPerSecond"),
             "processed_rows_per_s": p.get("processedRowsPerSecond"),
             **{f"{name}_ms": p.get("durationMs", {}).get(name) for name in PHASES},
             "watermark": p.get("eventTime", {}).get("watermark")} for p in progress]
    columns = ["at_ms", "batch_id", "run_id", "input_rows", "input_rows_per_s", "processed_rows_per_s",
               *(f"{n}_ms" for n in PHASES), "watermark"]
    return pd.DataFrame(rows, columns=columns)
