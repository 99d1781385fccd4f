"""Four throughputs and the consumer lag, per second, and whether the query keeps up.

Per second since the first event was sent:
  offered    events the generator sent (its intended schedule is in the generator report)
  ingested   records Kafka appended (each record's broker append time, from ground truth)
  processed  input rows of Spark's batches, counted in the second each batch ended
  delivered  events in the sink by their commit time: a row each, or a window's count
and per partition, the lag at each second's end: records appended by then that no
finished batch had read, and the age of the oldest of them. The lag is reconstructed
exactly from ground truth (every record's append time and offset) and each batch's end
offsets, not sampled: it is what a sampler of Kafka's end offsets against the query's
committed offsets would read at every second, without the sampler's load on the broker.

Over the measured window (from the warm-up's end, `from_s`, until the last event was sent) each
throughput is a mean rate, and the lag's trend is the least-squares slope of the total
lag (records per second, per second): a slope above `trend_max` of the offered rate
means the query is falling behind (Theodolite's lag-trend check).

The trend is taken from the lag at each batch's end (what arrived while the batch ran, and
anything older not read), not at each second's end: sampled by the second, the lag of a
query on a processing-time trigger depends on where in its trigger interval the second
falls, and that phase moves once, when the query stops catching up back to back and its
batches start on the interval again. Nexmark's q5 at 2,000 events/s kept up, batches of
2,000 rows in 0.7 s of each 1 s, but its lag by the second stepped from 2,100 to 3,240
records as its triggers realigned, a slope of 84 records/s a second that failed the
trial (sustain run c8c6); at the batches' ends the lag is flat.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.metrics import end_offsets, partition_logs
from workloads.pipelines import progress_log

THROUGHPUTS = ("offered", "ingested", "processed", "delivered")
TREND_MAX = 0.02      # a lag growing faster than 2% of the offered rate is falling behind
AGREE_WITHIN = 0.02   # the harness's and Spark's counts of records read must agree this closely


def _per_second(times_ms: np.ndarray, start_ms: float, n: int,
                weights: np.ndarray | None = None) -> np.ndarray:
    seconds = ((np.asarray(times_ms, dtype=np.float64) - start_ms) // 1000).astype(np.int64)
    inside = (seconds >= 0) & (seconds < n)
    w = None if weights is None else np.asarray(weights, dtype=np.float64)[inside]
    return np.bincount(seconds[inside], weights=w, minlength=n)[:n].astype(np.int64)


def timeline(truth: pd.DataFrame, progress: list[dict], topic: str, delivered_ms: np.ndarray,
             start_ms: float, delivered_weights: np.ndarray | None = None,
             ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(throughput per second, lag per partition and second). `truth`: every record sent
    (control ones too), with partition, offset, sent_ms, append_ms and control.
    `delivered_weights`: the events each sink row stands for (a window's count), if not one."""
    real = ~truth["control"].to_numpy(bool)
    ends_at = [float(v) for v in (truth["append_ms"].max(), *(progress_log.end_ms(p) for p in progress))
               if np.isfinite(v)]
    n = max(1, int((max(ends_at) - start_ms) // 1000) + 1) if ends_at else 1
    busy = [p for p in progress if p.get("numInputRows", 0) > 0]
    processed = np.zeros(n, np.int64)
    for p in busy:
        second = int((progress_log.end_ms(p) - start_ms) // 1000)
        if 0 <= second < n:
            processed[second] += int(p["numInputRows"])
    flow = pd.DataFrame({"second": np.arange(n),
                         "offered": _per_second(truth["sent_ms"].to_numpy()[real], start_ms, n),
                         "ingested": _per_second(truth["append_ms"].to_numpy(), start_ms, n),
                         "processed": processed,
                         "delivered": _per_second(delivered_ms, start_ms, n, delivered_weights)})
    return flow, _lag(truth, progress, topic, start_ms, n)


def _lag(truth: pd.DataFrame, progress: list[dict], topic: str, start_ms: float, n: int) -> pd.DataFrame:
    """Per partition and second: records appended by the second's end and not read by a
    batch finished by then, and the oldest one's age. A partition's records are appended
    in offset order, so both are counts and lookups in sorted arrays."""
    # a self-join's second source reads the same topic: its first source's offsets stand for both
    finished = sorted((progress_log.end_ms(p), end_offsets(p, topic, first_source_only=True))
                      for p in progress)
    finished_at = np.array([at for at, _ in finished], dtype=np.float64)
    at = start_ms + (np.arange(n) + 1) * 1000.0
    done = np.searchsorted(finished_at, at, side="right")        # batches finished by each second
    frames = []
    for partition, offset, append in partition_logs(truth):
        read_until = np.array([0, *(ends.get(partition, 0) for _, ends in finished)], dtype=np.int64)
        read = np.searchsorted(offset, np.maximum.accumulate(read_until)[done])   # records read
        appended = np.searchsorted(append, at, side="right")                       # records appended
        lag = np.maximum(appended - read, 0)
        oldest = append[np.minimum(read, len(append) - 1)] if len(append) else at
        age = np.where(lag > 0, (at - oldest) / 1000.0, 0.0)
        frames.append(pd.DataFrame({"second": np.arange(n), "partition": partition,
                                    "lag_records": lag, "lag_s": np.round(age, 3)}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["second", "partition", "lag_records", "lag_s"])


def measured(flow: pd.DataFrame, lag: pd.DataFrame, truth: pd.DataFrame, start_ms: float,
             from_s: float, trend_max: float = TREND_MAX,
             at_batch_ends: list[tuple[float, int, float]] | None = None) -> dict:
    """Mean rates over the measured window (from `from_s` seconds after the first event sent,
    the warm-up's end, to the last event sent), the lag trend over it, and its verdict.
    `at_batch_ends`: the lag at each batch's end (metrics.lag_series), which the trend is
    taken from when three or more batches ended in the window; else the lag per second."""
    sent = truth["sent_ms"].to_numpy()[~truth["control"].to_numpy(bool)]
    last_s = float((sent.max() - start_ms) / 1000) if len(sent) else 0.0
    first, last = int(np.ceil(from_s)), max(int(np.floor(last_s)), int(np.ceil(from_s)) + 1)
    window = flow[(flow["second"] >= first) & (flow["second"] < last)]
    span = max(len(window), 1)
    rates = {k: round(float(window[k].sum()) / span, 1) for k in THROUGHPUTS}
    ends = [((at - start_ms) / 1000, n) for at, n, _ in at_batch_ends or ()]
    ends = [(t, n) for t, n in ends if first <= t < last]
    if len(ends) > 2:
        x, y, sampled = np.array([t for t, _ in ends]), np.array([n for _, n in ends], float), "batch ends"
    else:
        total = lag.groupby("second")["lag_records"].sum()
        total = total[(total.index >= first) & (total.index < last)]
        x, y, sampled = total.index.to_numpy(float), total.to_numpy(float), "seconds"
    slope = float(np.polyfit(x, y, 1)[0]) if len(x) > 2 else None
    keeping_up = None if slope is None else slope <= trend_max * max(rates["offered"], 1.0)
    return {"window_s": [first, last], "eps": rates, "lag_trend_records_per_s": None if slope is None
            else round(slope, 2), "lag_trend_sampled_at": sampled if slope is not None else None,
            "keeping_up": keeping_up}


def committed_eps(batches, start_ms: float, window_s: list[int]) -> float | None:
    """Records per second read by the batches Spark committed within the measured window,
    from the checkpoint alone (offsets and commits/N's times): the query's throughput without
    its progress reports, so also of a run with [measure] enabled = false. None: no batch
    committed in the window."""
    first_ms, last_ms = start_ms + window_s[0] * 1000, start_ms + window_s[1] * 1000
    inside = [b for b in batches if b.committed_ms is not None and first_ms <= b.committed_ms < last_ms]
    if not inside:
        return None
    return round(sum(b.rows for b in inside) / ((last_ms - first_ms) / 1000), 1)


def counts_agree(truth: pd.DataFrame, progress: list[dict], within: float = AGREE_WITHIN) -> dict:
    """Records the harness appended against the input rows Spark reported reading (a batch
    run again after a restart counts twice in Spark's)."""
    ours = int(len(truth))
    spark = sum(int(p["sources"][0].get("numInputRows", 0)) for p in progress if p.get("sources"))
    agree = abs(spark - ours) <= within * max(ours, 1)
    return {"harness_records": ours, "spark_input_rows": spark, "agree": agree}


def per_second(rates: pd.DataFrame, lag: pd.DataFrame, latencies: dict[str, pd.DataFrame],
               start_ms: float, used: pd.DataFrame | None = None) -> pd.DataFrame:
    """The case's timeline.parquet: one row per second, `at_ms` its end on the harness's
    clock, with the four throughputs, the lag summed over partitions (records) and its
    largest age (seconds), each latency kind's p50 and p99 of that second's output, and,
    given the resource samples (resources.parquet), `cpu_percent:<component>` and
    `rss_bytes:<component>` of each component in that second."""
    total = (lag.groupby("second").agg(lag_records=("lag_records", "sum"), lag_s=("lag_s", "max"))
             .reset_index() if len(lag) else pd.DataFrame(columns=["second", "lag_records", "lag_s"]))
    out = rates.merge(total, on="second", how="left")
    for kind, frame in latencies.items():
        named = frame[["second", "p50", "p99"]].rename(columns={"p50": f"{kind}_p50_ms",
                                                                "p99": f"{kind}_p99_ms"})
        out = out.merge(named.astype({"second": "int64"}), on="second", how="outer")
    out = out.sort_values("second", ignore_index=True)
    if used is not None and len(used):
        out = out.merge(_resources_per_second(used, start_ms), on="second", how="left")
    out.insert(0, "at_ms", (start_ms + (out["second"] + 1) * 1000).astype("int64"))
    return out


def _resources_per_second(used: pd.DataFrame, start_ms: float) -> pd.DataFrame:
    """One row per second: each component's CPU (mean of that second's samples) and RSS (max).
    A sample measures the interval that ends at it, so it belongs to the second it ends in."""
    second = np.floor((used["at_ms"].to_numpy() - 1 - start_ms) / 1000).astype("int64")
    frame = used.assign(second=second)
    cpu = frame.pivot_table(index="second", columns="component", values="cpu_percent", aggfunc="mean")
    rss = frame.pivot_table(index="second", columns="component", values="rss_bytes", aggfunc="max")
    cpu.columns = [f"cpu_percent:{c}" for c in cpu.columns]
    rss.columns = [f"rss_bytes:{c}" for c in rss.columns]
    return cpu.join(rss).reset_index()


def spark_cores(timeline: pd.DataFrame, from_s: float, to_s: float) -> float | None:
    """The cores Spark's own processes (the driver and its executors) used on average over
    the seconds [from_s, to_s) of the timeline (its `cpu_percent:` columns): what Nexmark
    counts as Cores (its TaskManagers' CPU). None without samples in that span."""
    cols = [c for c in timeline.columns if c == "cpu_percent:driver" or c.startswith("cpu_percent:executor:")]
    if not cols or not len(timeline):
        return None
    second = (timeline["at_ms"] - timeline["at_ms"].min()) // 1000   # the timeline starts at second 0
    inside = timeline[(second >= from_s) & (second < to_s)]
    if not len(inside):
        return None
    return round(float(inside[cols].fillna(0).sum(axis=1).mean()) / 100, 3)
