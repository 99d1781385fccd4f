"""Write the sessions example's click stream: `python examples/my-job/make_data.py [ROWS]`.

200 users browse a shop in bursts: 3-15 clicks a few seconds apart, then a pause of 35-90 s,
so that a 30 s gap closes each session. The clicks go out in event-time order,
give or take up to 2 s (a mobile client's retries), well within the job's 10 s watermark
delay: no click comes late. Deterministic (seed 42); no download. Writes clicks.jsonl beside
this file (ROWS clicks, default 24,000: about 18 minutes of event time).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

START_MS = 1_714_564_800_000   # 2024-05-01T12:00:00Z
USERS = 200
PAGES = ["/", "/search", "/cart", "/checkout"] + [f"/product/{i}" for i in range(40)]


def clicks(rows: int, seed: int = 42) -> list[dict]:
    rng = random.Random(seed)
    out: list[dict] = []
    per_user = rows // USERS
    for u in range(USERS):
        at = START_MS + rng.randint(0, 60_000)
        made = 0
        while made < per_user:
            for _ in range(min(rng.randint(3, 15), per_user - made)):
                out.append({"user": f"u{u:03d}", "page": rng.choice(PAGES), "ts": at})
                at += rng.randint(500, 6_000)
                made += 1
            at += rng.randint(35_000, 90_000)
    # sent in event-time order, each click up to 2 s early or late against its neighbours
    out.sort(key=lambda c: c["ts"] + rng.randint(-2_000, 2_000))
    return out


def main(argv: list[str]) -> int:
    rows = int(argv[1]) if len(argv) > 1 else 24_000
    path = Path(__file__).with_name("clicks.jsonl")
    with path.open("w") as f:
        for click in clicks(rows):
            f.write(json.dumps(click, separators=(",", ":")) + "\n")
    print(f"wrote {rows:,} clicks to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
