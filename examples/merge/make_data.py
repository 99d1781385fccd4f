"""Write the foreach_batch example's clicks: `python examples/merge/make_data.py [ROWS]`.

300 users click through a shop, each click a few seconds after the user's last, sent in
event-time order give or take up to 2 s. The job keeps no state and has no watermark, so no
click is ever late. Deterministic (seed 7); no download. Writes clicks.jsonl beside this file
(ROWS clicks, default 20,000: about 11 minutes of event time).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

START_MS = 1_714_564_800_000   # 2024-05-01T12:00:00Z
USERS = 300
PAGES = ["/", "/search", "/cart", "/checkout"] + [f"/product/{i}" for i in range(40)]


def clicks(rows: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    at = {f"u{u:03d}": START_MS + rng.randint(0, 10_000) for u in range(USERS)}
    out = []
    for _ in range(rows):
        user = rng.choice(sorted(at))
        at[user] += rng.randint(1_000, 20_000)
        out.append({"user": user, "page": rng.choice(PAGES), "ts": at[user]})
    out.sort(key=lambda c: c["ts"] + rng.randint(-2_000, 2_000))
    return out


def main(argv: list[str]) -> int:
    rows = int(argv[1]) if len(argv) > 1 else 20_000
    path = Path(__file__).with_name("clicks.jsonl")
    with path.open("w") as f:
        for click in clicks(rows):
            f.write(json.dumps(click, separators=(",", ":")) + "\n")
    print(f"wrote {rows:,} clicks to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
