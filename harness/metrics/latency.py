"""Latency in HdrHistogram: percentiles, the encoded histograms, and a timeline per second.

Samples (ms) are recorded into an HdrHistogram of 3 significant digits from 1 ms to 24 h,
as OpenMessaging Benchmark and wrk2 do: a percentile is then exact to 0.1% whatever the
spread, and the histogram, saved in its standard compressed encoding, can be merged with
other runs' by any HdrHistogram library. Samples are counted with numpy first and recorded
once per distinct value, so ten million samples cost what their distinct values cost.

Latency counts from the event's intended send time where the oracle has it (its event
time, or its append to Kafka); the generator's schedule slip is reported beside it
(harness/run/runner.py), so a slow generator cannot hide a slow system.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from hdrh.histogram import HdrHistogram

LOWEST_MS, HIGHEST_MS, DIGITS = 1, 24 * 3600 * 1000, 3
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}
LATENCY_KINDS = ("event_time", "processing_time")   # every case records these two
OPTIONAL = ("event_time_newest",)   # windows: from the newest event in the window (Karimov et al.)


def histogram(samples_ms: np.ndarray) -> HdrHistogram:
    """The samples, rounded to whole ms and clamped to [0, 24 h], in a new histogram."""
    h = HdrHistogram(LOWEST_MS, HIGHEST_MS, DIGITS)
    values = np.clip(np.rint(np.asarray(samples_ms, dtype=float)), 0, HIGHEST_MS).astype(np.int64)
    distinct, counts = np.unique(values, return_counts=True)
    for value, count in zip(distinct.tolist(), counts.tolist(), strict=True):
        h.record_value(value, count)
    return h


def percentiles(h: HdrHistogram) -> dict:
    """p50/p90/p99/p99.9/max in ms (None each for an empty histogram), plus the count."""
    if h.get_total_count() == 0:
        return {**{name: None for name in [*PERCENTILES, "max"]}, "count": 0}
    out = {name: float(h.get_value_at_percentile(p)) for name, p in PERCENTILES.items()}
    return {**out, "max": float(h.get_max_value()), "count": int(h.get_total_count())}


def summarise(samples_ms: np.ndarray, h: HdrHistogram | None = None) -> dict:
    """percentiles() of the samples' histogram, with the exact max: the histogram's max is
    the top of the max's bucket (9,007 for 9,000), and the samples are at hand."""
    h = histogram(samples_ms) if h is None else h
    out = percentiles(h)
    if len(samples_ms):
        out["max"] = top = float(np.clip(np.rint(np.max(samples_ms)), 0, HIGHEST_MS))
        # a percentile is reported as the top of its bucket, which can lie past the largest
        # sample (p99.9 9,151 over a max of 9,146): no percentile is above the max
        out.update({name: min(out[name], top) for name in PERCENTILES})
    return out


def save(h: HdrHistogram, path: Path) -> Path:
    """The histogram in HdrHistogram's compressed, base64 encoding (one line)."""
    path.write_bytes(h.encode() + b"\n")
    return path


def load(path: Path) -> HdrHistogram:
    return HdrHistogram.decode(path.read_bytes().strip())


def timeline(samples_ms: np.ndarray, at_ms: np.ndarray, start_ms: float) -> pd.DataFrame:
    """Per second since `start_ms` at which the samples became visible: count, p50, p99 and
    max, exact from that second's samples, by the histogram's rule (the smallest sample
    with at least that share of the samples at or below it)."""
    columns = ["second", "count", "p50", "p99", "max"]
    if len(samples_ms) == 0 or len(at_ms) != len(samples_ms):
        return pd.DataFrame(columns=columns)
    frame = pd.DataFrame({"second": ((np.asarray(at_ms) - start_ms) // 1000).astype(np.int64),
                          "ms": np.asarray(samples_ms, dtype=float)})
    grouped = frame.groupby("second")["ms"]

    def at(q: float):
        return grouped.agg(lambda ms: float(np.percentile(ms, q, method="inverted_cdf")))

    out = pd.DataFrame({"count": grouped.size(), "p50": at(50), "p99": at(99), "max": grouped.max()})
    return out.reset_index()[columns]


def record(case_dir: Path, checked, start_ms: float,
           measured_from_ms: float | None = None) -> tuple[dict, dict, dict[str, pd.DataFrame]]:
    """Both kinds of latency of a checked case: the histograms saved as
    `latency-<kind>.hdr`; returns the percentiles of all samples and of those that became
    visible from `measured_from_ms` on (after the warm-up), for summary.json, and each
    kind's timeline per second (for the case's timeline.parquet)."""
    out, measured, timelines = {}, {}, {}
    kinds = [*LATENCY_KINDS, *(k for k in OPTIONAL if getattr(checked, f"{k}_latency_ms", None) is not None)]
    for kind in kinds:
        samples = getattr(checked, f"{kind}_latency_ms")
        at_ms = getattr(checked, f"{kind}_at_ms")
        h = histogram(samples)
        save(h, case_dir / f"latency-{kind}.hdr")
        out[kind] = summarise(samples, h)
        if measured_from_ms is not None and len(at_ms) == len(samples):
            after = np.asarray(at_ms) >= measured_from_ms
            measured[kind] = summarise(np.asarray(samples)[after])
        else:
            measured[kind] = out[kind]
        timelines[kind] = timeline(samples, at_ms, start_ms)
    return out, measured, timelines
