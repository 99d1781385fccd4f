"""The sustainable-rate search: coarse doubling, then bisection (no services)."""

import json

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


def test_a_p99_the_measured_window_could_not_give_comes_from_the_whole_run():
    """A 10 s tumbling window closes once or twice in a quick trial: its output after the
    warm-up is too few commits to measure, and the trial was failed for a p99 of None while its
    lag fell (q8 at 1,000 events/s). The whole run's p99 stands in, said so; it holds the
    warm-up's output too, so it can only read higher. A query whose verdict failed with no row timed
    still fails."""
    from harness.run.sustain import trial_p99

    sparse = _case(p99=8315.0)
    sparse.latency_measured_ms = {"event_time": {"p99": None, "count": 0}}
    assert trial_p99(sparse) == (8315.0, "whole run")
    assert trial_verdict(sparse, 19_000) == (True, "")
    assert trial_verdict(sparse, 5000)[0] is False

    measured = _case(p99=8315.0)
    measured.latency_measured_ms = {"event_time": {"p99": 2100.0}}
    assert trial_p99(measured) == (2100.0, "measured window")

    broken = _case(p99=None, holds=False)
    broken.latency_measured_ms = {"event_time": {"p99": None}}
    assert trial_p99(broken) == (None, None)
    ok, why = trial_verdict(broken, 19_000)
    assert not ok and "p99 None" in why and "verdict failed" in why


def test_a_query_whose_rows_close_only_on_the_flush_is_judged_by_its_lag():
    """Nexmark's q15-q17 count by the day: in a 20 s trial no row closes before the harness's
    flush, so no row is timed (the oracle times a row only when the workload's own events close
    it), and every trial was failed for a p99 of None while its lag fell (runs 7593, 8b3a,
    3119: -17, -21, -14 records/s a second). With the verdict held, the p99 is unmeasurable,
    said so, and the lag decides; a lag that grows still fails the trial."""
    from harness.report.table import render_sustain
    from harness.run.sustain import UNMEASURABLE, trial_p99

    def untimed(**kw):
        case = _case(p99=None, **kw)
        case.latency_measured_ms = {"event_time": {"p99": None}}
        case.events = {"expected": 1, "delivered": 1, "lost": 0, "closed_on_flush": 1}
        return case

    daily = untimed()
    assert trial_p99(daily) == (None, UNMEASURABLE)
    assert trial_verdict(daily, 19_000) == (True, "")
    behind = untimed(keeping_up=False)
    ok, why = trial_verdict(behind, 19_000)
    assert not ok and "lag grew" in why and "p99" not in why
    text = render_sustain({"case": "q15", "rate_eps": 1000.0, "trials": [
        {"eps": 1000.0, "sustained": True, "processed_eps": 1000.0, "p99_ms": None,
         "p99_over": UNMEASURABLE, "lag_trend_records_per_s": -17.0, "why_not": None}]})
    assert "p99 unmeasurable" in text and "kept up" in text


@pytest.mark.parametrize("events, holds", [
    ({}, True),                                                     # a noop sink: unchecked, holds
    ({"expected": 5, "delivered": 0, "lost": 5}, True),             # at-most-once that wrote nothing
    ({"expected": 0, "delivered": 0, "lost": 0}, True),             # nothing expected, nothing written
    ({"expected": 3, "delivered": 3, "lost": 0}, True),             # a pipeline that times no row
    ({"expected": 3, "delivered": 2, "lost": 1, "closed_on_flush": 2}, False),
])
def test_no_row_timed_without_the_checker_s_word_that_the_flush_closed_them_still_fails(events, holds):
    """Unmeasurable only on the checker's positive word (events.closed_on_flush): a trial with
    no row timed for any other reason fails on its p99 as before."""
    from harness.run.sustain import trial_p99

    case = _case(p99=None, holds=holds)
    case.latency_measured_ms = {"event_time": {"p99": None}}
    case.events = events
    assert trial_p99(case) == (None, None)
    ok, why = trial_verdict(case, 19_000)
    assert not ok and "p99 None" in why


def test_the_checker_counts_the_rows_only_the_flush_closed():
    """rows.check leaves a row untimed when its time is past latency_until_ms (the harness's
    flush made it possible) and says how many (events.closed_on_flush)."""
    import pandas as pd

    from harness.check import rows

    expected = pd.DataFrame({"k": [1, 2, 3], "n": [1, 1, 1], "end_ms": [1000, 2000, 90_000]})
    sink = expected[["k", "n"]].assign(committed_ms=[1500, 2600, 3000])
    out = rows.check(expected, sink, ["k"], 3, time_col="end_ms", latency_until_ms=5000)
    assert out.counts["closed_on_flush"] == 1 and sorted(out.event_time_latency_ms) == [500, 600]
    none = rows.check(expected, sink, ["k"], 3, time_col="end_ms", latency_until_ms=100_000)
    assert "closed_on_flush" not in none.counts and len(none.event_time_latency_ms) == 3


def test_spark_s_ceiling_leaves_out_the_warm_up_batches():
    from harness.run.ceiling import ceiling_of

    progress = [{"numInputRows": 0, "durationMs": {"triggerExecution": 9000}}]
    progress += [{"numInputRows": 1000, "durationMs": {"triggerExecution": ms}}
                 for ms in (5000, 3000, 500, 250, 250)]
    out = ceiling_of(progress, skip=2)
    assert out == {"eps": 3000.0, "batches": 3, "rows": 3000, "median_batch_ms": 250}


def test_the_ceiling_s_cores_come_from_the_processes_cpu_times():
    """A process spinning on one core reads about one core, a sleeping one about none: the
    ceiling per Spark core divides by what the processes used, not by the machine's cores."""
    import subprocess
    import sys
    import time

    from harness.run.ceiling import cores_between, cpu_seconds

    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    sleep = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.3)
        start = (time.monotonic(), cpu_seconds([spin.pid])), (time.monotonic(), cpu_seconds([sleep.pid]))
        time.sleep(1.5)
        end = (time.monotonic(), cpu_seconds([spin.pid])), (time.monotonic(), cpu_seconds([sleep.pid]))
    finally:
        spin.kill(), sleep.kill()
        spin.wait(), sleep.wait()
    spinning, sleeping = cores_between(start[0], end[0]), cores_between(start[1], end[1])
    # a busy shared machine gives the spinner less than a core (0.29 beside a sustain search on
    # two cores), so the test asks only that it reads some CPU, at most a core, and the sleeper none
    assert 0.05 < spinning <= 1.1, spinning
    assert sleeping < 0.05, sleeping
    assert cpu_seconds([spin.pid]) == 0.0     # gone: counted as nothing, not an error
    assert cores_between((5.0, 1.0), (5.0, 2.0)) is None


class TestScalingCurve:
    """--executors: the search per size, and the sizes as a curve (no services)."""

    def test_a_local_cluster_gets_n_executors_of_the_same_cores_and_memory(self):
        from harness.run.sustain import sized
        from harness.scenario.model import SparkConfig

        assert sized(SparkConfig(master="local-cluster[2,1,1024]"), 4).master == "local-cluster[4,1,1024]"
        k8s = sized(SparkConfig(master="k8s://https://api:6443"), 3)
        assert k8s.conf["spark.executor.instances"] == "3"
        own = sized(SparkConfig(master="standalone", workers=2, worker_cores=2), 2)
        assert (own.conf["spark.cores.max"], own.conf["spark.executor.cores"]) == ("4", "2")

    def test_a_size_the_master_cannot_have_is_refused_with_the_fix(self):
        from harness.errors import ScenarioError
        from harness.run.sustain import sized
        from harness.scenario.model import SparkConfig

        with pytest.raises(ScenarioError, match="room for 2 executors"):
            sized(SparkConfig(master="standalone", workers=2, worker_cores=1), 4)
        with pytest.raises(ScenarioError, match="runs no executors"):
            sized(SparkConfig(master="local[2]"), 2)

    def test_speed_up_and_efficiency_are_against_the_smallest_size(self):
        from harness.report.table import render_sustain
        from harness.run.sustain import curve

        def size(n, rate, top):
            trial = {"eps": rate, "sustained": True, "why_not": None, "processed_eps": rate,
                     "p99_ms": 1.0, "lag_trend_records_per_s": 0.0}
            return {"executors": n, "master": f"local-cluster[{n},1,1024]", "rate_eps": rate,
                    "bounds": {}, "spark_ceiling": {"eps": top}, "trials": [trial]}

        found = curve([size(1, 2000, 10000), size(2, 3000, 16000), size(4, 3000, 16000)])
        assert [s["speedup"] for s in found["scaling"]] == [1.0, 1.5, 1.5]
        assert [s["efficiency"] for s in found["scaling"]] == [1.0, 0.75, 0.375]
        assert found["rate_eps"] == 3000 and [t["executors"] for t in found["trials"]] == [1, 2, 4]
        text = render_sustain({"case": "c", **found})
        assert "speed-up (vs 1)" in text and text.splitlines()[-1].split() == [
            "4", "3,000", "1.50", "0.38", "16,000", "1.60"]


def test_spark_cores_are_the_driver_s_and_executors_cpu_over_the_measured_window():
    """Nexmark's Cores: the CPU of the processes that run the query (Spark's driver and
    executors, not Kafka nor the harness), averaged over the measured window only."""
    import pandas as pd

    from harness.metrics.flow import spark_cores

    t0 = 1_700_000_000_000
    timeline = pd.DataFrame({
        "at_ms": [t0 + 1000 * (s + 1) for s in range(6)],
        "cpu_percent:driver": [5.0, 5.0, 40.0, 60.0, 50.0, 1.0],
        "cpu_percent:executor:0": [0.0, 0.0, 80.0, 90.0, 100.0, 0.0],
        "cpu_percent:executor:1": [0.0, None, 70.0, 60.0, 80.0, 0.0],
        "cpu_percent:kafka": [90.0] * 6,
    })
    assert spark_cores(timeline, 2, 5) == pytest.approx((190 + 210 + 230) / 3 / 100, abs=1e-3)
    assert spark_cores(timeline, 10, 12) is None
    assert spark_cores(timeline.drop(columns=[c for c in timeline if c.startswith("cpu")]), 0, 6) is None


def test_a_trial_s_busy_rate_is_its_rows_per_second_of_batch_time_after_the_first_four(tmp_path):
    """The ceiling on the stack (busy_ceiling) is read off each trial's own batches: rows
    over the time its batches ran, the first four (the JVM's warm-up) and empty ones left out."""
    from types import SimpleNamespace

    from harness.results.rundir import RunDir
    from harness.run.sustain import _busy_eps

    run_dir = RunDir(tmp_path)
    progress = run_dir.case("q0-8000eps").progress
    progress.parent.mkdir(parents=True)
    batches = [(2, 6000)] * 4 + [(0, 300), (8000, 400), (8000, 600), (16000, 1000)]
    stamp = "2026-11-26T00:00:00Z"
    progress.write_text("".join(json.dumps({"batchId": i, "numInputRows": n, "timestamp": stamp,
                                            "durationMs": {"triggerExecution": ms}}) + "\n"
                                for i, (n, ms) in enumerate(batches)))
    assert _busy_eps(run_dir, SimpleNamespace(name="q0-8000eps")) == pytest.approx(32000 / 2.0)
    assert _busy_eps(run_dir, SimpleNamespace(name="absent")) is None


def test_the_ceiling_s_batches_are_at_least_the_sustained_rate_s():
    """A ceiling on smaller batches than the sustained trial's pays more fixed cost a row and
    can come out under the rate it is the ceiling of (q5: 27,294 against 36,000 sustained)."""
    from types import SimpleNamespace

    from harness.run.ceiling import ROWS_PER_BATCH, batch_for

    every_second = SimpleNamespace(trigger="processing-time", trigger_ms=1000)
    assert batch_for(36_000, every_second) == 36_000
    assert batch_for(48_000, SimpleNamespace(trigger="processing-time", trigger_ms=2000)) == 96_000
    assert batch_for(8_000, every_second) == ROWS_PER_BATCH     # never under the default
    assert batch_for(None, every_second) == ROWS_PER_BATCH      # nothing sustained
    assert batch_for(36_000, SimpleNamespace(trigger="available-now", trigger_ms=1000)) == ROWS_PER_BATCH


def test_the_default_p99_bound_makes_room_for_a_workload_s_late_events():
    """Without --p99 the bound is the watermark's delay plus 5 s, and the declared lateness
    when at least 1% of events come that late (their event time is that old at any rate)."""
    from harness.run.sustain import default_p99_ms
    from workloads.generator.spec import DelaySpec

    assert default_p99_ms(4000, DelaySpec()) == 9000
    assert default_p99_ms(4000, DelaySpec(late_share=0.01, late_by_ms=10_000)) == 19_000
    assert default_p99_ms(4000, DelaySpec(late_share=0.001, late_by_ms=10_000)) == 9000


def test_an_interrupted_search_keeps_the_trials_it_finished(monkeypatch, tmp_path):
    """Ctrl-C in a search's second trial: the first trial's line stays in the list the
    sustain section of summary.json holds (it was lost before: `trials` was empty though the
    trial's case was kept; an interrupted `sustain --case q16` at 2,000 events/s)."""
    from harness.run import sustain
    from harness.scenario import load
    from tests.helpers import REPO

    scenario = load(REPO / "tests" / "scenarios" / "delta_quick.toml")
    finished = _case()
    finished.latency_measured_ms = {"event_time": {"p99": 900.0}}
    outcomes = iter([finished, KeyboardInterrupt()])

    def run_case(_case):
        outcome = next(outcomes)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    class Progress:
        def step(self, _text):
            pass

    monkeypatch.setattr(sustain, "run_case", run_case)
    monkeypatch.setattr(sustain.Case, "create", staticmethod(lambda *a, **k: None))
    monkeypatch.setattr(sustain, "_busy_eps", lambda run_dir, case: None)
    monkeypatch.setattr(sustain, "_spark_cores", lambda run_dir, case: None)
    cases, trials = [], []
    with pytest.raises(KeyboardInterrupt):
        sustain.search(scenario, scenario.cases[0], None, tmp_path, "r", Progress(), None,
                       Bounds(min_eps=1000, max_eps=4000), cases, trials=trials)
    assert cases == [finished]
    assert [(t["eps"], t["sustained"], t["p99_over"]) for t in trials] == [(1000, True, "measured window")]

    # the same under --executors: the trial tagged with its size
    outcomes = iter([finished, KeyboardInterrupt()])
    trials = []
    with pytest.raises(KeyboardInterrupt):
        sustain.scale(scenario, scenario.cases[0], None, tmp_path, "r", Progress(), None,
                      Bounds(min_eps=1000, max_eps=4000), [], [1, 2], trials=trials)
    assert [(t["executors"], t["eps"]) for t in trials] == [(1, 1000)]
