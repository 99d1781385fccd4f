"""The harness's own check of a large passthrough run from its files."""

from __future__ import annotations

import pickle
import sys
import time
from pathlib import Path

from benchmarks.engines._peak import Peak
from harness.check import large


def main(root: Path) -> None:
    batches = pickle.loads((root / "batches.pkl").read_bytes())
    if isinstance(batches, tuple):   # (batches, commit times), as earlier runs of write.py kept them
        batches = batches[0]
    peak, began = Peak(), time.perf_counter()
    files = large.RunFiles(root / "truth", root / "sink-passthrough.parquet")
    result = large.check_passthrough(files, batches)
    c = result.counts
    print(f"sliced numpy  {time.perf_counter() - began:6.1f} s  peak {peak.mb:6,} MB  "
          f"delivered {c['delivered']:,} lost {c['lost']} unexpected {c['unexpected']}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
