"""The per-event accounting as one Polars lazy query, collected in batches."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.engines._peak import Peak


class Tally:
    """Lost, unexpected and wrong rows, and each delivered event's latencies, kept whole as the
    oracle keeps them."""

    def __init__(self, capacity: int = 100_000_000):
        self.et, self.pt = np.empty(capacity), np.empty(capacity)
        self.at = np.empty(capacity, np.int64)
        self.n = self.lost = self.unexpected = self.wrong = 0

    def add(self, e_id, s_id, et, pt, at, wrong) -> None:
        e_null, s_null = np.isnan(e_id.astype(float)), np.isnan(s_id.astype(float))
        both = ~e_null & ~s_null
        self.lost += int(s_null.sum())
        self.unexpected += int(e_null.sum())
        m = int(both.sum())
        self.et[self.n:self.n + m], self.pt[self.n:self.n + m] = et[both], pt[both]
        self.at[self.n:self.n + m] = at[both]
        self.wrong += int(wrong[both].astype(bool).sum())
        self.n += m

    def __str__(self) -> str:
        return f"delivered {self.n:,} lost {self.lost} unexpected {self.unexpected} wrong {self.wrong}"


def main(root: Path) -> None:
    os.environ.setdefault("POLARS_MAX_THREADS", "2")
    import polars as pl

    peak, began = Peak(), time.perf_counter()
    c = pl.col
    e = (pl.scan_parquet(f"{root}/truth/*.parquet").filter(~c("control") & (c("amount") >= 10))
         .select("event_id", "key", "event_time_ms", "amount", "partition", "offset", "append_ms"))
    s = pl.scan_parquet(f"{root}/sink-passthrough.parquet")
    j = e.join(s, on="event_id", how="full", coalesce=False, suffix="_s")
    tier = pl.when(c("amount") >= 50).then(pl.lit("high")).otherwise(pl.lit("low"))
    wrong = (c("key_s").ne_missing(c("key")) | c("event_time_ms_s").ne_missing(c("event_time_ms"))
             | c("amount_s").ne_missing(c("amount")) | c("tier").ne_missing(tier)
             | c("partition_s").ne_missing(c("partition").cast(pl.Int64))
             | c("offset_s").ne_missing(c("offset")))
    q = j.select(c("event_id").alias("e_id"), c("event_id_s").alias("s_id"),
                 (c("committed_ms") - c("event_time_ms")).alias("et"),
                 (c("committed_ms") - c("append_ms")).alias("pt"), c("committed_ms"), wrong.alias("wrong"))
    tally = Tally()
    for b in q.collect_batches():
        tally.add(*(b[name].to_numpy() for name in ("e_id", "s_id", "et", "pt", "committed_ms", "wrong")))
    print(f"Polars        {time.perf_counter() - began:6.1f} s  peak {peak.mb:6,} MB  {tally}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
