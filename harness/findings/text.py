"""How a finding writes numbers, times and offset ranges: one way, everywhere."""

from __future__ import annotations

from collections.abc import Iterable


def plural(n: int, one: str, many: str | None = None) -> str:
    """"1 row", "1,200 rows"."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def seconds(s: float | None) -> str:
    """Seconds from the first event sent, one decimal: "12.3 s"."""
    return "an unknown time" if s is None else f"{s:.1f} s"


def span(first: int, last: int) -> str:
    """An inclusive range of offsets or ids: "1,200-1,489", or "1,200" for one."""
    return f"{first:,}" if first == last else f"{first:,}-{last:,}"


def offset_ranges(starts: dict[int, int], ends: dict[int, int]) -> str:
    """What a batch read, partition by partition: "offsets 1,200-1,489 of partition 0 and
    812-1,152 of partition 1" (end offsets are exclusive); "no offsets" when it read none.
    A partition without a start (added to the topic since the query's previous batch) is read
    from offset 0, as Spark reads a new partition from its earliest offset."""
    parts = [(p, starts.get(p, 0), end) for p, end in sorted(ends.items()) if end > starts.get(p, 0)]
    if not parts:
        return "no offsets"
    new = [p for p, _, _ in parts if starts and p not in starts]
    texts = [f"{span(a, b - 1)} of partition {p}" + (", new to the query" if p in new else "")
             for p, a, b in parts]
    return "offsets " + join(texts)


def positions(offsets: dict[int, int]) -> str:
    """Offsets per partition: "offset 10,321 of partition 0 and 7,181 of partition 1"."""
    texts = [f"{o:,} of partition {p}" for p, o in sorted(offsets.items())]
    if not texts:
        return "no recorded offsets"
    return ("offset " if len(texts) == 1 else "offsets ") + join(texts)


def join(items: Iterable[str], last: str = "and") -> str:
    """"a", "a and b", "a, b and c"."""
    items = [i for i in items if i]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {last} " + items[-1]


def ids(batch_ids: Iterable[int]) -> str:
    """Batch ids as runs: "3-5 and 8"."""
    values = sorted(set(batch_ids))
    runs: list[tuple[int, int]] = []
    for v in values:
        if runs and v == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def paragraph(clauses: Iterable[str]) -> str:
    """Clauses in time order, as one paragraph: "a; b; c." with the first letter capitalised."""
    text = "; ".join(c.strip().rstrip(".;") for c in clauses if c and c.strip())
    return (text[:1].upper() + text[1:] + ".") if text else ""


def event_time(ms: int, t0_s: float) -> str:
    """An event time as seconds from the first event sent (event time and wall time share the
    epoch): "9.4 s"; one before it (a window that began before the first event) "0.7 s before
    the first event", never a negative time."""
    return since_start(ms / 1000.0 - t0_s)


def since_start(s: float) -> str:
    """Seconds from the first event sent: "9.4 s", or "0.7 s before the first event"."""
    return f"{s:.1f} s" if round(s, 1) >= 0 else f"{-s:.1f} s before the first event"


def window(start_s: float, end_s: float) -> str:
    """A window in seconds from the first event sent, left-closed: "[1.3 s, 3.3 s)"."""
    return f"[{since_start(start_s)}, {since_start(end_s)})"
