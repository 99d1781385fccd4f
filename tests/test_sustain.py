"""The sustainable-rate search: coarse doubling, then bisection (no services)."""

import pytest

from harness.results.model import CaseResult, Verdict
from harness.run.sustain import Bounds, next_rate, trial_verdict

pytestmark = pytest.mark.unit


def _search(ceiling: float, bounds: Bounds) -> list[float]:
    """The rates tried against a system that keeps up with anything up to `ceiling`."""
    passed, failed, tried, bisections = [], [], [], 0
    while (eps := next_rate(passed, failed, bisections, bounds)) is not None:
        bisections += 1 if failed else 0
        tried.append(eps)
        (passed if eps <= ceiling else failed).append(eps)
    return tried


def test_doubles_then_bisects_towards_the_ceiling():
    tried = _search(3000, Bounds(min_eps=500, max_eps=32_000, steps=3))
    assert tried == [500, 1000, 2000, 4000, 3000, 3500, 3250]


def test_stops_at_the_top_of_the_range_when_everything_passes():
    assert _search(1e9, Bounds(min_eps=1000, max_eps=5000))[-1] == 5000


def test_nothing_sustained_when_the_first_trial_fails():
    assert _search(10, Bounds(min_eps=500)) == [500]


def _case(holds=True, keeping_up=True, p99=100.0):
    return CaseResult(name="c", guarantee="exactly-once", pipeline="tumbling_count", sink="postgres",
                      events={},
                      verdict=Verdict("exactly-once", "x", holds, "x"), throughput_eps={},
                      latency_ms={"event_time": {"p99": p99}},
                      backpressure={"keeping_up": keeping_up, "lag_trend_records_per_s": 40.0})


@pytest.mark.parametrize("case, ok, words", [
    (_case(), True, ""),
    (_case(keeping_up=False), False, "lag grew 40.0"),
    (_case(p99=9000.0), False, "p99 9000.0 ms over 5000 ms"),
    (_case(holds=False), False, "verdict failed"),
])
def test_a_trial_passes_when_the_lag_is_flat_and_p99_under_the_bound(case, ok, words):
    passed, why = trial_verdict(case, 5000)
    assert passed is ok and words in why


def test_spark_s_ceiling_leaves_out_the_warm_up_batches():
    from harness.run.ceiling import ceiling_of

    progress = [{"numInputRows": 0, "durationMs": {"triggerExecution": 9000}}]
    progress += [{"numInputRows": 1000, "durationMs": {"triggerExecution": ms}}
                 for ms in (5000, 3000, 500, 250, 250)]
    out = ceiling_of(progress, skip=2)
    assert out == {"eps": 3000.0, "batches": 3, "rows": 3000, "median_batch_ms": 250}
