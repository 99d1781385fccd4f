"""DuckDB and Polars against the sliced numpy check of a large run (docs/performance.md,
"An hour's events: from the files"): the per-event accounting of a passthrough run as a
full outer join of truth and sink, each engine in its own process for its own peak RSS.

    python -m benchmarks.engines.write DIR EVENTS     # a synthetic run, as test_checker_speed writes it
    python -m benchmarks.engines DIR                  # the three paths on it

DuckDB and Polars are not dependencies of the harness: `pip install duckdb polars` first.
"""
