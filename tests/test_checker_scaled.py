"""The check of a large run from its files (harness/check/large.py, large_windows.py) gives the
in-memory oracles' CheckResult: the same counts, problems and discrepancies, and the same
latency samples, on one synthetic run with every kind of fault in it."""

from __future__ import annotations

from types import MappingProxyType

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness import check as checker
from harness.check import large, large_windows, passthrough, sweep, windows
from harness.check.checkpoint import Batch
from harness.check.large import RunFiles
from harness.scenario.model import Pipeline
from workloads.generator import truth as truth_files
from workloads.pipelines import passthrough as passthrough_pipeline
from workloads.wire import CONTROL_KEY

pytestmark = pytest.mark.unit

N = 6_000            # real events: 6 per 10 ms of event time
KEYS, PARTITIONS, PER_BATCH = 23, 3, 500
T0_MS = 1_700_000_000_000
DELAY_MS = 2_000
TUMBLING = {"window_ms": 5_000, "slide_ms": 5_000}
SLIDING = {"window_ms": 10_000, "slide_ms": 5_000}
COLUMNS = ["event_id", "key", "event_time_ms", "sent_ms", "partition", "offset", "append_ms", "amount",
           "control"]


def _events(seed: int = 7) -> pd.DataFrame:
    """N real events in event-id order, out of order in event time, one in 40 late by 30 s,
    and 8 control events on partition 0 (keyed CONTROL_KEY, amount 0)."""
    rng = np.random.default_rng(seed)
    ids = np.arange(N, dtype=np.int64)
    intended = T0_MS + ids * 10 // 6
    key = rng.integers(0, KEYS, N)
    times = intended - rng.integers(0, 1_500, N) - np.where(rng.random(N) < 1 / 40, 30_000, 0)
    real = pd.DataFrame({"event_id": ids, "key": [f"k{k:02d}" for k in key], "event_time_ms": times,
                         "sent_ms": intended, "partition": (key % PARTITIONS).astype(np.int32),
                         "append_ms": intended + rng.integers(1, 30, N),
                         "amount": rng.integers(1, 100, N), "control": False})
    control = pd.DataFrame({"event_id": 10**9 + np.arange(8), "key": CONTROL_KEY,
                            "event_time_ms": T0_MS + np.arange(8) * 1_500, "sent_ms": T0_MS,
                            "partition": np.int32(0), "append_ms": T0_MS + 5, "amount": 0, "control": True})
    events = pd.concat([real, control], ignore_index=True)
    events["offset"] = events.groupby("partition").cumcount().astype(np.int64)
    return events[COLUMNS]


def _batches(events: pd.DataFrame) -> list[Batch]:
    """A batch per PER_BATCH events, the watermark DELAY_MS behind the newest event read; batch
    5 planned but never committed (a restart reads its offsets again as batch 6), the last
    200 events read by no batch, and the last watermark short of the last windows (open)."""
    real = events[~events["control"]]
    bounds = list(range(PER_BATCH, N - 200, PER_BATCH)) + [N - 200]
    batches, start, mark, newest = [], {p: 0 for p in range(PARTITIONS)}, 0, 0
    for b, end_id in enumerate(bounds):
        read = real[real["event_id"] < end_id]
        end = {p: int((read["partition"] == p).sum()) for p in range(PARTITIONS)}
        if b == 0:
            end[0] += 8   # the control events come first on partition 0
        batches.append(Batch(b, mark, end, b != 5, dict(start)))
        if b == 5:
            continue      # not committed: its offsets are read again by the next batch
        newest = max(newest, int(events["event_time_ms"][events["event_id"] < end_id].max()))
        mark, start = max(mark, newest - DELAY_MS), end
    batches.append(Batch(len(bounds), mark, dict(start), True, dict(start)))
    return batches


def _write_truth(events: pd.DataFrame, truth_dir) -> None:
    """Two generator parts (event ids mod 2) and the control events, in small row groups."""
    schema = pa.schema([truth_files.SCHEMA.field(c) for c in COLUMNS])
    real = events[~events["control"]]
    for j in range(2):
        part = real[real["event_id"] % 2 == j]
        pq.write_table(pa.Table.from_pandas(part, schema=schema, preserve_index=False),
                       truth_files.part_path(truth_dir, j), row_group_size=250)
    pq.write_table(pa.Table.from_pandas(events[events["control"]], schema=schema, preserve_index=False),
                   truth_dir / "control.parquet")


def _commit_ms(batch: np.ndarray) -> np.ndarray:
    return T0_MS + (batch + 1) * 1_000 + 300


def _passthrough_sink(truth: pd.DataFrame, batches: list[Batch], rng) -> pd.DataFrame:
    """Every kept event read by a committed batch, then: 150 lost, 120 duplicated (20 of them
    first committed by a wrong copy), 130 wrong, 12 unexpected (never sent, a control event,
    filtered out); in blocks out of event-id order."""
    kept, _ = passthrough.expected(truth, batches)
    kept = kept[kept["batch"] >= 0]
    sink = kept[list(passthrough_pipeline.COLUMNS)].assign(
        tier=kept["tier"].astype(str), partition=kept["partition"].astype(np.int64),
        batch_id=kept["batch"].to_numpy(), committed_ms=_commit_ms(kept["batch"].to_numpy()))
    sink = sink.reset_index(drop=True)
    wrong = rng.choice(len(sink), 130, replace=False)
    sink.loc[wrong[:60], "amount"] += 1
    sink.loc[wrong[60:100], "key"] = "k99"
    sink.loc[wrong[100:], "tier"] = "mid"
    copies = sink.iloc[rng.choice(len(sink), 120, replace=False)].copy()
    copies["committed_ms"] += 5_000
    early = copies.iloc[:20].copy()
    early["committed_ms"] -= 10_000
    early["amount"] += 7
    never = sink.iloc[:5].assign(event_id=10**7 + np.arange(5))
    control = sink.iloc[:1].assign(event_id=10**9 + 3)
    filtered = truth[(truth["amount"] < passthrough_pipeline.MIN_AMOUNT) & ~truth["control"]].head(6)
    filtered = sink.iloc[:6].assign(event_id=filtered["event_id"].to_numpy())
    sink = sink.drop(index=rng.choice(len(sink), 150, replace=False))
    sink = pd.concat([sink, copies, early, never, control, filtered], ignore_index=True)
    blocks = np.array_split(np.arange(len(sink)), 9)
    return sink.iloc[np.concatenate(blocks[::-1])].reset_index(drop=True)


def _window_sink(truth: pd.DataFrame, batches: list[Batch], shape: dict, rng) -> pd.DataFrame:
    """Every closed window's count and sum, then: 8 windows lost, 6 duplicated, 5 counted
    short, 4 with a wrong sum, 3 unexpected (a key never sent, a window out of step), and the
    control events' own windows."""
    _, pairs = windows.expected_pairs(truth, batches, shape["window_ms"], shape["slide_ms"])
    pairs = pairs[~pairs["late"] & (pairs["window_end_ms"] <= batches[-1].watermark_ms)]
    rows = (pairs.groupby(windows.WINDOW).agg(count=("event_id", "size"), sum_amount=("amount", "sum"))
            .reset_index())
    rows["committed_ms"] = rows["window_end_ms"] + 4_000
    rows = rows.drop(index=rng.choice(len(rows), 8, replace=False)).reset_index(drop=True)
    pick = rng.choice(len(rows), 15, replace=False)
    rows.loc[pick[:5], "count"] -= 1
    rows.loc[pick[5:9], "sum_amount"] += 3
    copies = rows.iloc[pick[9:]].assign(committed_ms=lambda d: d["committed_ms"] + 1_000)
    start = T0_MS - T0_MS % shape["slide_ms"]
    odd = pd.DataFrame({"key": ["nobody", "k01", CONTROL_KEY, CONTROL_KEY], "count": 1, "sum_amount": 1,
                        "window_start_ms": [start, start + 7, start, start + shape["slide_ms"]],
                        "committed_ms": T0_MS + 9_000})
    odd["window_end_ms"] = odd["window_start_ms"] + shape["window_ms"]
    out = pd.concat([rows, copies, odd], ignore_index=True)
    return out.astype({"count": np.int64, "sum_amount": np.int64})


@pytest.fixture
def run(tmp_path, monkeypatch):
    """The run's files and batches, read back by the in-memory check as the harness reads them;
    slices and chunks of a few hundred rows, so that a small run has many."""
    monkeypatch.setattr(sweep, "SLICE_ROWS", 700)
    monkeypatch.setattr(sweep, "CHUNK_ROWS", 900)
    events = _events()
    (tmp_path / "truth").mkdir()
    _write_truth(events, tmp_path / "truth")
    batches = _batches(events)
    truth = truth_files.read(tmp_path / "truth", list(checker.TRUTH_COLUMNS))
    return tmp_path, truth, batches


def _assert_same(got, want) -> None:
    assert got.counts == want.counts
    assert got.problems == want.problems
    pd.testing.assert_frame_equal(got.discrepancies.reset_index(drop=True),
                                  want.discrepancies.reset_index(drop=True))
    for samples, at in (("event_time_latency_ms", "event_time_at_ms"),
                        ("processing_time_latency_ms", "processing_time_at_ms"),
                        ("event_time_newest_latency_ms", "event_time_newest_at_ms")):
        mine, theirs = _pairs(got, samples, at), _pairs(want, samples, at)
        assert (mine is None) == (theirs is None), samples
        if mine is not None:
            np.testing.assert_array_equal(mine, theirs, err_msg=samples)


def _pairs(result, samples: str, at: str) -> np.ndarray | None:
    """Each latency sample with the time it became visible, in one order."""
    values = getattr(result, samples)
    if values is None:
        return None
    both = np.column_stack([np.asarray(getattr(result, at), float), np.asarray(values, float)])
    return both[np.lexsort(both.T[::-1])]


class TestPassthrough:
    def test_same_result_as_in_memory(self, run):
        """Lost, duplicated (a wrong copy first), wrong and unexpected rows, events read by no
        batch and an uncommitted batch: counted and shown as the in-memory check does."""
        root, truth, batches = run
        sink = _passthrough_sink(truth, batches, np.random.default_rng(1))
        sink.to_parquet(root / "sink.parquet", index=False, row_group_size=400)
        want = passthrough.check(truth, pd.read_parquet(root / "sink.parquet"), batches, {})
        got = large.check_passthrough(RunFiles(root / "truth", root / "sink.parquet"), batches)
        assert min(want.counts[k] for k in ("lost", "duplicated", "unexpected")) > 0, want.counts
        assert (want.discrepancies["kind"].value_counts() == 100).sum() >= 2, "some kind past the first 100"
        _assert_same(got, want)

    def test_deleted_ranges_are_neither_expected_nor_lost(self, run):
        """Kafka's deleted ranges are taken out of truth as the runner takes them out."""
        root, truth, batches = run
        sink = _passthrough_sink(truth, batches, np.random.default_rng(2))
        sink.to_parquet(root / "sink.parquet", index=False)
        deleted = [{"partition": 1, "from": 100, "to": 300}]
        gone = (truth["partition"] == 1) & truth["offset"].between(100, 299) & ~truth["control"]
        want = passthrough.check(truth[~gone].reset_index(drop=True), sink, batches, {})
        got = large.check_passthrough(RunFiles(root / "truth", root / "sink.parquet", deleted), batches)
        _assert_same(got, want)

    def test_resent_copies_are_checked_in_memory(self, run, monkeypatch):
        """Truth that repeats an event id goes by Kafka record: the harness checks it in memory."""
        root, truth, batches = run
        monkeypatch.setattr(large, "LARGE_ROWS", 1)
        copy = truth.iloc[[10]].assign(offset=truth["offset"].max() + 1)
        pq.write_table(pa.Table.from_pandas(copy, preserve_index=False), root / "truth" / "part-0009.parquet")
        sink = _passthrough_sink(truth, batches, np.random.default_rng(3))
        sink.to_parquet(root / "sink.parquet", index=False)
        files = RunFiles(root / "truth", root / "sink.parquet")
        with pytest.raises(large.Resent):
            large.check_passthrough(files, batches)
        both = pd.concat([truth, copy], ignore_index=True)
        _assert_same(checker.check(PASSTHROUGH, both, sink, batches, files),
                     passthrough.check(both, sink, batches, {}))

    def test_perfect_sink_checks_clean(self, run):
        root, truth, batches = run
        kept, _ = passthrough.expected(truth, batches)
        sink = kept[list(passthrough_pipeline.COLUMNS)].assign(tier=kept["tier"].astype(str),
                                                               committed_ms=T0_MS)
        sink.to_parquet(root / "sink.parquet", index=False)
        got = large.check_passthrough(RunFiles(root / "truth", root / "sink.parquet"), batches)
        c = got.counts
        assert (c["lost"], c["duplicated"], c["unexpected"]) == (0, 0, 0), c
        assert not got.problems and not len(got.discrepancies)


PASSTHROUGH = Pipeline(kind="passthrough", columns=MappingProxyType(dict(passthrough_pipeline.COLUMNS)))


class TestWindows:
    @pytest.mark.parametrize("shape", [TUMBLING, SLIDING], ids=["tumbling", "sliding"])
    def test_same_result_as_in_memory(self, run, shape):
        """Lost, duplicated, short, wrong-sum and unexpected windows, late events, open windows
        and the control events' windows: counted and shown as the in-memory check does."""
        root, truth, batches = run
        sink = _window_sink(truth, batches, shape, np.random.default_rng(4))
        sink.to_parquet(root / "sink.parquet", index=False)
        want = windows.check(truth, sink, batches, shape)
        got = large_windows.check(RunFiles(root / "truth", root / "sink.parquet"), batches, shape)
        c = want.counts
        assert min(c["lost"], c["duplicated"], c["unexpected"], c["dropped_late"], c["open"]) > 0, c
        assert want.problems, "a window with a wrong sum"
        _assert_same(got, want)

    def test_harness_checks_a_large_run_from_files(self, run, monkeypatch):
        """checker.check with the run's files: from them once truth has LARGE_ROWS rows, the
        watermark oracle included; the same result either way."""
        root, truth, batches = run
        shape = {**TUMBLING, "watermark_ms": DELAY_MS - 1}   # not the delay Spark ran with
        pipeline = Pipeline(kind="tumbling_count", values=MappingProxyType(shape))
        sink = _window_sink(truth, batches, TUMBLING, np.random.default_rng(5))
        sink.to_parquet(root / "sink.parquet", index=False)
        files = RunFiles(root / "truth", root / "sink.parquet")
        want = checker.check(pipeline, truth, sink, batches)
        calls = []
        monkeypatch.setattr(large, "LARGE_ROWS", len(truth))
        monkeypatch.setattr(windows, "check", lambda *a: calls.append(a))
        got = checker.check(pipeline, truth, sink, batches, files)
        assert not calls, "a large run is not checked in memory"
        assert any("watermark" in p for p in want.problems), want.problems
        _assert_same(got, want)
