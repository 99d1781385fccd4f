"""Each path on the run in DIR, one process each: python -m benchmarks.engines DIR."""

from __future__ import annotations

import subprocess
import sys

for module in ("sliced", "with_duckdb", "with_polars"):
    subprocess.run([sys.executable, "-m", f"benchmarks.engines.{module}", sys.argv[1]], check=False)
