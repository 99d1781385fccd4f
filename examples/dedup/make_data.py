"""Write the dedup example's payments: `python examples/dedup/make_data.py [ROWS]`.

A payment service sends each payment once, and its client retries: 10% of the payments come
again, byte for byte, 1-8 s later (a retry after a lost acknowledgement), so the stream holds
ROWS payments (default 20,000) plus their copies. Times are in event-time order give or take
a second. Deterministic (seed 7); no download. Writes payments.jsonl beside this file.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

START_MS = 1_714_564_800_000   # 2024-05-01T12:00:00Z
RETRY_SHARE = 0.10


def payments(rows: int, seed: int = 7) -> list[tuple[int, dict]]:
    """(when it is sent, the payment) for every payment and every retried copy."""
    rng = random.Random(seed)
    out = []
    at = START_MS
    for i in range(rows):
        at += rng.randint(10, 90)
        payment = {"payment_id": f"p{i:07d}", "account": f"a{rng.randint(0, 499):04d}",
                   "amount_cents": rng.randint(100, 50_000), "ts": at}
        out.append((at + rng.randint(-1_000, 1_000), payment))
        if rng.random() < RETRY_SHARE:
            out.append((at + rng.randint(1_000, 8_000), payment))
    out.sort(key=lambda sent: sent[0])
    return out


def main(argv: list[str]) -> int:
    rows = int(argv[1]) if len(argv) > 1 else 20_000
    path = Path(__file__).with_name("payments.jsonl")
    sent = payments(rows)
    with path.open("w") as f:
        for _, payment in sent:
            f.write(json.dumps(payment, separators=(",", ":")) + "\n")
    print(f"wrote {rows:,} payments and {len(sent) - rows:,} retried copies to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
