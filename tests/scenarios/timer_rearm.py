"""A planted transformWithState processor that registers its timers again on recovery, and its
correct twin (issue 49, part 2: a timer fired twice).

Both are failed_logins' processor (workloads/pipelines/failed_logins.py) with one habit more:
they keep every timer they register in a list state (`armed`) and, on the first batch after
their query started again on the checkpoint (the driver was killed and a new one started), they
register each timer of that list again, key by key as keys get input. Spark keeps the timers
with the state, so this is never needed; a processor ported from an engine whose timers do not
survive a restart does it anyway.

  build        the plant: `armed` is never pruned, so it still holds the timers that already
               fired, and registering them again makes Spark fire them again (their time is
               below the watermark: in that very batch)
  build_twin   the twin: handleExpiredTimer prunes `armed` of each timer that fires, so only
               timers still pending are registered again, which Spark takes as the same timers

Neither changes the output: a timer fired again forgets failures that were forgotten already.
A scenario names one with `build = "timer_rearm:build"` under `kind = "failed_logins"`, which
keeps failed_logins' oracle (tests/scenarios/timer_rearm*.toml).
"""

from __future__ import annotations

from workloads.pipelines import failed_logins
from workloads.pipelines.timer_log import TimerLog


def build(events, params: dict):
    return failed_logins.build(events, params, Rearming(params, prune=False))


def build_twin(events, params: dict):
    return failed_logins.build(events, params, Rearming(params, prune=True))


class Rearming(failed_logins.FailedLogins):
    def __init__(self, params: dict, prune: bool):
        super().__init__(params["attempts"], params["within_ms"], TimerLog.opened(params))
        self.prune = prune
        # 0 on the query's first start; n after n restarts of the driver on the same checkpoint
        self.generation = self.log.generation if self.log is not None else 0

    def init(self, handle) -> None:
        super().init(handle)
        self.armed = handle.getListState("armed", "timer_ms LONG")
        self.rearmed = handle.getValueState("rearmed", "generation LONG")

    def register(self, expiry_ms: int) -> None:
        super().register(expiry_ms)
        self.armed.appendValue((expiry_ms,))

    def handleInputRows(self, key, rows, timerValues):
        if self.generation and (not self.rearmed.exists() or self.rearmed.get()[0] < self.generation):
            for (timer_ms,) in list(self.armed.get()) if self.armed.exists() else []:
                self.handle.registerTimer(timer_ms)     # on recovery: every timer it ever set
            self.rearmed.update((self.generation,))
        yield from super().handleInputRows(key, rows, timerValues)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        if self.prune and self.armed.exists():
            expiry = expiredTimerInfo.getExpiryTimeInMs()
            kept = [(t,) for (t,) in self.armed.get() if t > expiry]
            self.armed.put(kept) if kept else self.armed.clear()
        return super().handleExpiredTimer(key, timerValues, expiredTimerInfo)
