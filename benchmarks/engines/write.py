"""Write a synthetic perfect run of EVENTS events into DIR (truth, sinks, batches.pkl)."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

from benchmarks.test_checker_speed import write_run


def main(root: Path, n: int) -> None:
    written = write_run(root, n, {})
    (root / "batches.pkl").write_bytes(pickle.dumps(written.batches))
    print(f"{n:,} events in {root}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
