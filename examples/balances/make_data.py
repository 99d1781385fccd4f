"""Write the balances example's transactions: `python examples/balances/make_data.py [ROWS]`.

A card ledger: 300 accounts, each transaction a deposit or a spend (positive or negative cents),
ROWS transactions in all (default 20,000) 10-90 ms apart, sent in event-time order give or take
a second (well within the job's 20 s watermark delay: none comes late). Deterministic (seed
11); no download. Writes transactions.jsonl beside this file.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

START_MS = 1_714_564_800_000   # 2024-05-01T12:00:00Z
ACCOUNTS = 300


def transactions(rows: int, seed: int = 11) -> list[dict]:
    rng = random.Random(seed)
    out = []
    at = START_MS
    for i in range(rows):
        at += rng.randint(10, 90)
        cents = rng.randint(100, 20_000) * (1 if rng.random() < 0.4 else -1)
        out.append((at + rng.randint(-1_000, 1_000),
                    {"txn_id": f"t{i:07d}", "account": f"acct{rng.randint(0, ACCOUNTS - 1):03d}",
                     "amount_cents": cents, "ts": at}))
    out.sort(key=lambda sent: sent[0])
    return [t for _, t in out]


def main(argv: list[str]) -> int:
    rows = int(argv[1]) if len(argv) > 1 else 20_000
    path = Path(__file__).with_name("transactions.jsonl")
    with path.open("w") as f:
        for t in transactions(rows):
            f.write(json.dumps(t, separators=(",", ":")) + "\n")
    print(f"wrote {rows:,} transactions of {ACCOUNTS} accounts to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
