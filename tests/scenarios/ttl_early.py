"""A planted transformWithState processor whose state TTL is shorter than the job says, and its
correct twin (issue 49, part 2: a value expired early).

Both are streak_count's processor (workloads/pipelines/streak_count.py): each user's running
count, a value state with a TTL. The plant gives the state a quarter of the scenario's `ttl`, as
a build whose TTL was set apart from the job's setting would: a user's count expires while the
job's own rule (and the oracle's) still keeps it, and the user's next event is numbered from 1
again. The twin gives it the scenario's `ttl`, as streak_count itself does.

A scenario names one with `build = "ttl_early:build"` under `kind = "streak_count"`, which
keeps streak_count's oracle (tests/scenarios/ttl_early*.toml).
"""

from __future__ import annotations

from workloads.pipelines import streak_count

SHORTER = 4   # the plant's TTL: the scenario's divided by this


def build(events, params: dict):
    return streak_count.build(events, params, streak_count.Streak(params["ttl_ms"] // SHORTER))


def build_twin(events, params: dict):
    return streak_count.build(events, params, streak_count.Streak(params["ttl_ms"]))
