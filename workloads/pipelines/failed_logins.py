"""An alert on `attempts` failed logins by one user within `within`: the seeds' CEP
example, on `transformWithState` with value, list and map state and event-time timers.

Per user, in each batch: the new failures (type "login-failed"; a re-sent copy, by its
event_id in the map state, counts once) join the ones kept in the list state, sorted by
(event time, event_id). Scanning them in order, as soon as `attempts` of them fall within
`within` (last - first < within), they raise an alert and are consumed. The value state
numbers the user's alerts. An event-time timer at each failure's time + `within` forgets
it: no later failure that is not late could join it any more, so the timers bound the
state and never change the output (harness/check/logins.py mirrors the same rule). Each
firing is recorded when the harness gives the build a timer log (timer_log.py), for the
timers' check (harness/check/timers.py).

transformWithState runs on the RocksDB state store only (PySpark 4.2 refuses others).
"""

from __future__ import annotations

from workloads.pipelines.params import ATTEMPTS, WATERMARK, WITHIN
from workloads.pipelines.timer_log import TimerLog

NAME = "failed_logins"
PARAMS = (ATTEMPTS, WITHIN, WATERMARK)
COLUMNS = {"user_id": "LONG", "alert_seq": "LONG", "first_failure_ms": "LONG", "last_failure_ms": "LONG",
           "failures": "LONG"}
STATE_STORES = ("rocksdb", "rocksdb-changelog")
FAILED = "login-failed"


def alerts(failures: list[tuple[int, int]], attempts: int, within_ms: int):
    """Scan (event time, event_id) pairs in order: ([alerts as (first, last, n)], kept pairs)."""
    found, kept, start = [], [], 0
    ordered = sorted(failures)
    for j in range(len(ordered)):
        while ordered[j][0] - ordered[start][0] >= within_ms:
            kept.append(ordered[start])
            start += 1
        if j - start + 1 >= attempts:
            found.append((ordered[start][0], ordered[j][0], j - start + 1))
            start = j + 1
    kept.extend(ordered[start:])
    return found, kept


def build(events, params: dict, processor=None):
    """The query; `processor` in place of FailedLogins (a planted one: tests/scenarios/timer_rearm.py)."""
    from pyspark.sql import functions as F

    watermarked = events.withWatermark("event_time", f"{params['watermark_ms']} milliseconds")
    # one predicate that names event_time: Spark pushes a filter that does not below the
    # watermark, which would then follow the failures only, not every event read
    failures = watermarked.where((F.col("type") == FAILED) | F.col("event_time").isNull())
    by_user = failures.select(F.expr("cast(substring(user, 2) as long)").alias("user_id"),
                              "event_id", "event_time_ms", "event_time")
    schema = ", ".join(f"{name} {kind}" for name, kind in COLUMNS.items())
    return by_user.groupBy("user_id").transformWithState(
        processor or FailedLogins(params["attempts"], params["within_ms"], TimerLog.opened(params)),
        outputStructType=schema,
        outputMode="Append", timeMode="EventTime")


def _processor_base():
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    return StatefulProcessor


class FailedLogins(_processor_base()):  # type: ignore[misc]
    def __init__(self, attempts: int, within_ms: int, log: TimerLog | None = None):
        self.attempts, self.within_ms, self.log = attempts, within_ms, log

    def init(self, handle) -> None:
        self.handle = handle
        self.pending = handle.getListState("pending", "event_time_ms LONG, event_id LONG")
        self.seen = handle.getMapState("seen", "event_id LONG", "event_time_ms LONG")
        self.raised = handle.getValueState("raised", "n LONG")

    def handleInputRows(self, key, rows, timerValues):
        from pyspark.sql import Row

        new = []
        for row in rows:
            if self.seen.containsKey((row.event_id,)):
                continue
            self.seen.updateValue((row.event_id,), (row.event_time_ms,))
            self.register(row.event_time_ms + self.within_ms)
            new.append((row.event_time_ms, row.event_id))
        old = [(t, i) for t, i in self.pending.get()] if self.pending.exists() else []
        found, kept = alerts(old + new, self.attempts, self.within_ms)
        self.pending.put(kept) if kept else self.pending.clear()
        n = self.raised.get()[0] if self.raised.exists() else 0
        for first, last, count in found:
            n += 1
            yield Row(user_id=key[0], alert_seq=n, first_failure_ms=first, last_failure_ms=last,
                      failures=count)
        if found:
            self.raised.update((n,))

    def register(self, expiry_ms: int) -> None:
        self.handle.registerTimer(expiry_ms)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        if self.log is not None:
            self.log.fired(key, expiredTimerInfo.getExpiryTimeInMs(), timerValues)
        gone = expiredTimerInfo.getExpiryTimeInMs() - self.within_ms   # failures at or before it
        if self.pending.exists():
            kept = [(t, i) for t, i in self.pending.get() if t > gone]
            self.pending.put(kept) if kept else self.pending.clear()
        for (event_id,), (t,) in list(self.seen.iterator()):
            if t <= gone:
                self.seen.removeKey((event_id,))
        return iter([])

    def close(self) -> None:
        pass
