"""The per-event accounting as one DuckDB query: truth's real events past the pipeline's filter
(amount >= 10), fully outer joined with the sink on event_id, streamed out in batches."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.engines._peak import Peak
from benchmarks.engines.with_polars import Tally


def main(root: Path) -> None:
    import duckdb

    peak, began = Peak(), time.perf_counter()
    con = duckdb.connect()
    con.execute("SET memory_limit='1500MB'; SET threads=2; SET preserve_insertion_order=false")
    truth = f"read_parquet('{root}/truth/*.parquet')"
    sink = f"read_parquet('{root}/sink-passthrough.parquet')"
    sql = f"""
    WITH e AS (SELECT event_id, key, event_time_ms, amount, partition, "offset", append_ms FROM {truth}
               WHERE NOT control AND amount >= 10)
    SELECT e.event_id AS e_id, s.event_id AS s_id, s.committed_ms - e.event_time_ms AS et,
           s.committed_ms - e.append_ms AS pt, s.committed_ms,
           (s.key IS DISTINCT FROM e.key OR s.event_time_ms IS DISTINCT FROM e.event_time_ms
            OR s.amount IS DISTINCT FROM e.amount OR s.partition IS DISTINCT FROM e.partition
            OR s.tier IS DISTINCT FROM (CASE WHEN e.amount >= 50 THEN 'high' ELSE 'low' END)
            OR s."offset" IS DISTINCT FROM e."offset") AS wrong
    FROM e FULL OUTER JOIN {sink} s ON e.event_id = s.event_id"""
    tally = Tally()
    for b in con.sql(sql).to_arrow_reader(1 << 20):
        tally.add(*(np.asarray(b.column(c).to_numpy(zero_copy_only=False))
                    for c in ("e_id", "s_id", "et", "pt", "committed_ms", "wrong")))
    print(f"DuckDB        {time.perf_counter() - began:6.1f} s  peak {peak.mb:6,} MB  {tally}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
