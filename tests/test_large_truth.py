"""An hour's truth in collect: the lag at each batch's end from sorted arrays, not a pass over
every record per batch, and truth read with its keys as categories (an 80-million-row soak
was OOM-killed at 23.5 GB reading the keys as Python strings)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from harness import metrics
from workloads.generator import truth

pytestmark = pytest.mark.unit


def _brute_lag(t: pd.DataFrame, progress: list[dict], topic: str) -> list[tuple[float, int, float]]:
    """The definition: for each batch end, every real record appended by then and at or past
    its partition's end offset, and the oldest one's age."""
    real = t[~t["control"]]
    out = []
    for record in progress:
        at = metrics._end_ms(record)
        ends = metrics.end_offsets(record, topic)
        end_of = real["partition"].map(lambda p, ends=ends: ends.get(int(p), 0)).to_numpy()
        waiting = (real["append_ms"].to_numpy() <= at) & (real["offset"].to_numpy() >= end_of)
        age = (at - real["append_ms"].to_numpy()[waiting].min()) / 1000 if waiting.any() else 0.0
        out.append((at, int(waiting.sum()), age))
    return sorted(out)


def _progress(at_ms: float, ends: dict[int, int]) -> dict:
    end = json.dumps({"events": {str(p): o for p, o in ends.items()}})
    return {"timestamp": pd.Timestamp(at_ms, unit="ms", tz="UTC").isoformat().replace("+00:00", "Z"),
            "batchDuration": 0, "sources": [{"endOffset": end}]}


def test_the_lag_at_each_batch_end_is_the_definitions():
    rng = np.random.default_rng(3)
    rows = []
    for p in range(3):
        n = 500
        append = 1_000_000 + np.cumsum(rng.integers(0, 20, n))   # appended in offset order
        rows.append(pd.DataFrame({"partition": p, "offset": np.arange(n), "append_ms": append,
                                  "control": rng.random(n) < 0.01}))
    t = pd.concat(rows, ignore_index=True).sample(frac=1, random_state=1).reset_index(drop=True)
    progress = [_progress(1_000_000 + k * 500,
                          {p: int(rng.integers(0, 500)) for p in range(3) if rng.random() < .9})
                for k in range(25)]
    got = metrics.lag_series(t, progress, "events")
    want = _brute_lag(t, progress, "events")
    assert [(a, n) for a, n, _ in got] == [(a, n) for a, n, _ in want]
    assert np.allclose([s for *_, s in got], [s for *_, s in want])
    assert any(n > 0 for _, n, _ in got) and any(n == 0 for _, n, _ in got)


def test_truth_read_with_categories_holds_the_same_rows(tmp_path):
    rng = np.random.default_rng(5)
    for j in range(2):
        n = 1000
        frame = pd.DataFrame({"event_id": rng.permutation(n) * 2 + j,
                              "key": [f"k{v}" for v in rng.integers(0, 40 + j, n)],
                              "event_time_ms": rng.integers(0, 10**6, n),
                              "sent_ms": rng.integers(0, 10**6, n),
                              "partition": rng.integers(0, 2, n).astype("int32"), "offset": np.arange(n),
                              "append_ms": rng.integers(0, 10**6, n), "control": rng.random(n) < .1})
        frame.to_parquet(tmp_path / f"part-{j:04d}.parquet", index=False)
    columns = ["key", "sent_ms", "partition", "offset", "append_ms", "control"]
    plain = truth.read(tmp_path, columns)
    lean = truth.read(tmp_path, columns, categorical=True)
    assert isinstance(lean["key"].dtype, pd.CategoricalDtype)
    assert lean.columns.tolist() == columns
    pd.testing.assert_frame_equal(lean.astype({"key": str}), plain.astype({"key": str}), check_dtype=False)
