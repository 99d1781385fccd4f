"""The `transformWithState` processors of Nexmark's updating queries (q4, q6, q9, q18).

Nexmark writes these as Top-1s and averages over all time, outputs that change as bids come;
append mode cannot retract a row. Each processor emits a row only when it is final, or as one
numbered version of an updating result, so that every row it writes stays true:

  Winner      q9 (and the first stage of q4 and q6): per auction, its auction and the best bid
              within its life (Nexmark's `B.dateTime BETWEEN A.dateTime AND A.expires`, best by
              price, then the earlier bid; then bidder and extra, to be deterministic). An
              event-time timer at the auction's expiry emits it: no bid that is not late can
              still come (its time <= expires < the watermark). A bid before its auction waits
              in a list, until the auction comes or the watermark passes the bid's time (an
              auction that comes later starts after it).
  Running     q4 and q6's second stage: per category (q4) or seller (q6), each closed auction
              in the order of its expiry, a running average: over all of them (q4), over the
              last 10 (q6). Timers fire in watermark order, so the closings of one batch all
              expire after those of the batch before it: the sequence of versions is the same
              however the input was cut into batches.
  Newest      q18: per bidder and auction, the newest bid of each batch when it is newer than
              the newest written so far: the changelog of Nexmark's last bid per key as
              micro-batches emit it.

transformWithState runs on the RocksDB state store only (PySpark 4.2 refuses others). The
oracles in harness/check/nexmark.py mirror the same rules.
"""

from __future__ import annotations

AUCTION = (("id", "LONG"), ("item_name", "STRING"), ("description", "STRING"), ("initial_bid", "LONG"),
           ("reserve", "LONG"), ("date_time_ms", "LONG"), ("expires_ms", "LONG"), ("seller", "LONG"),
           ("category", "LONG"), ("extra", "STRING"))
BID = (("bidder", "LONG"), ("price", "LONG"), ("bid_date_time_ms", "LONG"), ("bid_extra", "STRING"))
WINNER_COLUMNS = {**dict(AUCTION), "auction": "LONG", **dict(BID)}
LAST_N = 10   # q6: the seller's last 10 closed auctions (Nexmark's Beam model)


def _ddl(fields) -> str:
    return ", ".join(f"{name} {kind}" for name, kind in fields)


def better(bid, best) -> bool:
    """Whether `bid` (bidder, price, time, extra) beats `best`: a higher price, then the
    earlier bid, then the smaller bidder and extra (Nexmark orders by price and time only)."""
    return best is None or (-bid[1], bid[2], bid[0], bid[3]) < (-best[1], best[2], best[0], best[3])


def _processor_base():
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    return StatefulProcessor


class Winner(_processor_base()):  # type: ignore[misc]
    """q9: per auction id, rows of kind 1 (the auction) and 2 (its bids). Each timer's firing is
    recorded when the harness gives the build a timer log (timer_log.py), for the timers' check
    (harness/check/timers.py: a timer fired twice)."""

    def __init__(self, log=None):
        self.log = log

    def init(self, handle) -> None:
        self.handle = handle
        self.auction = handle.getValueState("auction", _ddl(AUCTION))
        self.best = handle.getValueState("best", _ddl(BID))
        self.pending = handle.getListState("pending", _ddl(BID))

    def handleInputRows(self, key, rows, timerValues):
        auction = self.auction.get() if self.auction.exists() else None
        bids = []
        for r in rows:
            if r.kind == 1:
                if auction is None:
                    auction = tuple(getattr(r, name) for name, _ in AUCTION)
                    self.auction.update(auction)
                    self.handle.registerTimer(r.expires_ms)
            else:
                bids.append((r.bidder, r.price, r.date_time_ms, r.extra))
        if auction is None:
            if bids:
                self.pending.appendList(bids)
                for b in bids:   # past it, no auction that is not late can start before the bid
                    self.handle.registerTimer(b[2])
            return iter([])
        if self.pending.exists():
            bids.extend(tuple(b) for b in self.pending.get())
            self.pending.clear()
        best = tuple(self.best.get()) if self.best.exists() else None
        start, end = auction[5], auction[6]
        for b in bids:
            if start <= b[2] <= end and better(b, best):
                best = b
        if best is not None:
            self.best.update(best)
        return iter([])

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        from pyspark.sql import Row

        at = expiredTimerInfo.getExpiryTimeInMs()
        if self.log is not None:
            self.log.fired(key, at, timerValues)
        auction = self.auction.get() if self.auction.exists() else None
        if auction is None:
            if self.pending.exists():
                kept = [tuple(b) for b in self.pending.get() if b[2] > at]
                self.pending.put(kept) if kept else self.pending.clear()
            return iter([])
        if auction[6] != at:
            return iter([])
        best = self.best.get() if self.best.exists() else None
        self.auction.clear()
        self.best.clear()
        if best is None:
            return iter([])
        names = [name for name, _ in AUCTION]
        return iter([Row(**dict(zip(names, auction, strict=True)), auction=auction[0], bidder=best[0],
                         price=best[1], bid_date_time_ms=best[2], bid_extra=best[3])])

    def close(self) -> None:
        pass


class Running(_processor_base()):  # type: ignore[misc]
    """q4 (`last` None: every closed auction) and q6 (`last` 10) over Winner's rows, per
    `by` (category or seller): one row per closed auction, in the order of its expiry."""

    def __init__(self, by: str, out: str, last: int | None):
        self.by, self.out, self.last = by, out, last

    def init(self, handle) -> None:
        self.totals = handle.getValueState("totals", "auctions LONG, total LONG")
        self.recent = handle.getListState("recent", "price LONG")

    def handleInputRows(self, key, rows, timerValues):
        from pyspark.sql import Row

        closed = sorted((r.expires_ms, r.id, r.price) for r in rows)
        n, total = self.totals.get() if self.totals.exists() else (0, 0)
        recent = [p for (p,) in self.recent.get()] if self.last and self.recent.exists() else []
        out = []
        for expires, _, price in closed:
            n += 1
            if self.last:
                recent = (recent + [price])[-self.last:]
                avg = sum(recent) // len(recent)
            else:
                total += price
                avg = total // n
            out.append(Row(**{self.by: key[0], self.out: avg, "auctions": n, "as_of_ms": expires}))
        self.totals.update((n, total))
        if self.last:
            self.recent.put([(p,) for p in recent])
        return iter(out)

    def close(self) -> None:
        pass


NEWEST = ("date_time_ms", "price", "channel", "url", "extra")
NEWEST_COLUMNS = {"auction": "LONG", "bidder": "LONG", "price": "LONG", "channel": "STRING", "url": "STRING",
                  "date_time_ms": "LONG", "extra": "STRING"}   # Nexmark's q18 columns, in its order


class Newest(_processor_base()):  # type: ignore[misc]
    """q18: per (bidder, auction), the batch's newest bid when it is newer than the last one
    written (newest by time, then price, channel, url and extra, to be deterministic)."""

    def init(self, handle) -> None:
        self.last = handle.getValueState("last", _ddl((c, NEWEST_COLUMNS[c]) for c in NEWEST))

    def handleInputRows(self, key, rows, timerValues):
        from pyspark.sql import Row

        newest = max((tuple(getattr(r, c) for c in NEWEST) for r in rows), default=None)
        last = tuple(self.last.get()) if self.last.exists() else None
        if newest is None or (last is not None and newest <= last):
            return iter([])
        self.last.update(newest)
        bidder, auction = key
        fields = {"auction": auction, "bidder": bidder, **dict(zip(NEWEST, newest, strict=True))}
        return iter([Row(**{c: fields[c] for c in NEWEST_COLUMNS})])

    def close(self) -> None:
        pass
