"""Correct jobs of each stateful shape, written as teams write them, for the drain and the batch
oracle end to end (tests/test_job_shapes_e2e.py). Each reads the clicks of the sessions example
(user, page, ts in epoch ms) and keeps its state where Spark keeps it.

    running_count_watermarked   groupBy(user).agg(count) in update mode, a watermark before it
                                to bound state (the drain must not wait for that watermark)
    running_count               the same without a watermark
    total_in_state_watermarked  applyInPandasWithState, NoTimeout, the total in Spark's state, a
                                watermark before it (issue 47's false FAIL)
    sessions_by_timeout         applyInPandasWithState with EventTimeTimeout: a session of a
                                user's clicks written when its 30 s gap times out (append)
    count_with_timers           transformWithStateInPandas in EventTime mode: a running count in a
                                ValueState, and a timer that clears the state after an idle hour
"""

from __future__ import annotations

import pandas as pd

GAP_MS = 30_000
IDLE_MS = 3_600_000


def _timed(clicks):
    from pyspark.sql import functions as F

    return clicks.withColumn("at", F.timestamp_millis("ts")).withWatermark("at", "20 seconds")


def running_count_watermarked(clicks):
    from pyspark.sql import functions as F

    return _timed(clicks).groupBy("user").agg(F.count("*").alias("clicks"))


def running_count(clicks):
    from pyspark.sql import functions as F

    return clicks.groupBy("user").agg(F.count("*").alias("clicks"))


def _add_to_total(key, frames, state):
    total = (state.get[0] if state.exists else 0) + sum(len(frame) for frame in frames)
    state.update((total,))
    yield pd.DataFrame({"user": [key[0]], "clicks": [total]})


def total_in_state_watermarked(clicks):
    from pyspark.sql.streaming.state import GroupStateTimeout

    return _timed(clicks).groupBy("user").applyInPandasWithState(
        _add_to_total, "user STRING, clicks LONG", "total LONG", "update", GroupStateTimeout.NoTimeout)


def _session(key, frames, state):
    """A user's session: its first and last click and its clicks; a click more than GAP_MS after
    the last closes it. Written when a later click or the event-time timeout closes it."""
    user = key[0]
    if state.hasTimedOut:
        start, last, n = state.get
        state.remove()
        yield pd.DataFrame({"user": [user], "session_start": [start], "last_click_ms": [last], "clicks": [n]})
        return
    open_ = state.get if state.exists else None
    done = []
    times = sorted(int(t) for frame in frames for t in frame["ts"])
    for t in times:
        if open_ is not None and t > open_[1] + GAP_MS:
            done.append(open_)
            open_ = None
        open_ = (t, t, 1) if open_ is None else (min(open_[0], t), max(open_[1], t), open_[2] + 1)
    if open_ is not None:
        state.update(open_)
        state.setTimeoutTimestamp(open_[1] + GAP_MS)
    if done:
        yield pd.DataFrame({"user": [user] * len(done), "session_start": [d[0] for d in done],
                            "last_click_ms": [d[1] for d in done], "clicks": [d[2] for d in done]})


def sessions_by_timeout(clicks):
    from pyspark.sql.streaming.state import GroupStateTimeout

    return _timed(clicks).groupBy("user").applyInPandasWithState(
        _session, "user STRING, session_start LONG, last_click_ms LONG, clicks LONG",
        "start LONG, last LONG, n LONG", "append", GroupStateTimeout.EventTimeTimeout)


def _processor(log):
    from pyspark.sql.streaming import StatefulProcessor
    from pyspark.sql.types import LongType, StructField, StructType

    class CountWithTimers(StatefulProcessor):
        """A user's running count in a ValueState; an event-time timer an idle hour after the
        user's last click clears it (it never fires before the end of the run's clicks). Each
        firing is recorded in the harness's timer log, when it runs under one."""

        def init(self, handle):
            self.handle = handle
            self.count = handle.getValueState("count", StructType([StructField("n", LongType())]))

        def handleInputRows(self, key, rows, timerValues):
            total = self.count.get()[0] if self.count.exists() else 0
            last = 0
            for frame in rows:
                total += len(frame)
                last = max(last, int(frame["ts"].max()))
            self.count.update((total,))
            for timer in self.handle.listTimers():
                self.handle.deleteTimer(timer)
            self.handle.registerTimer(last + IDLE_MS)
            yield pd.DataFrame({"user": [key[0]], "clicks": [total]})

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            if log is not None:
                log.fired(key, expiredTimerInfo.getExpiryTimeInMs(), timerValues)
            self.count.clear()
            yield from ()

        def close(self):
            pass

    return CountWithTimers()


def count_with_timers(clicks):
    from workloads.pipelines.timer_log import TimerLog

    # the harness's log of this query's timers (docs/your-job.md); None under the batch oracle
    return _timed(clicks).groupBy("user").transformWithStateInPandas(
        _processor(TimerLog.current()), "user STRING, clicks LONG", "Update", "EventTime")
