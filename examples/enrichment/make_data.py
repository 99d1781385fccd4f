"""Write the enrichment example's data: `python examples/enrichment/make_data.py [ROWS]`.

products.parquet: the catalogue the job joins with (400 products: name, category, unit price
in cents), a static table. orders.jsonl: ROWS order lines (default 20,000), each naming a
product and a quantity; 2% name a product the catalogue does not have (a product retired
mid-stream), which the job's left join keeps with nulls. Deterministic (seed 11); no
download. Both files beside this one.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

START_MS = 1_714_564_800_000   # 2024-05-01T12:00:00Z
PRODUCTS = 400
CATEGORIES = ["books", "garden", "kitchen", "toys", "tools", "music", "sports", "games"]


def catalogue(seed: int = 11):
    import pyarrow as pa

    rng = random.Random(seed)
    return pa.table({"product_id": list(range(PRODUCTS)),
                     "name": [f"product {i}" for i in range(PRODUCTS)],
                     "category": [rng.choice(CATEGORIES) for _ in range(PRODUCTS)],
                     "unit_price_cents": [rng.randint(99, 19_999) for _ in range(PRODUCTS)]})


def orders(rows: int, seed: int = 11) -> list[dict]:
    rng = random.Random(seed + 1)
    at, out = START_MS, []
    for i in range(rows):
        at += rng.randint(20, 120)
        product = rng.randint(0, PRODUCTS - 1) if rng.random() >= 0.02 else PRODUCTS + rng.randint(0, 50)
        out.append({"order_id": f"o{i:07d}", "customer": f"c{rng.randint(0, 2999):04d}",
                    "product_id": product, "quantity": rng.randint(1, 5), "ts": at})
    return out


def main(argv: list[str]) -> int:
    import pyarrow.parquet as pq

    rows = int(argv[1]) if len(argv) > 1 else 20_000
    here = Path(__file__).parent
    pq.write_table(catalogue(), here / "products.parquet")
    with (here / "orders.jsonl").open("w") as f:
        for order in orders(rows):
            f.write(json.dumps(order, separators=(",", ":")) + "\n")
    print(f"wrote {PRODUCTS} products and {rows:,} orders to {here}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
