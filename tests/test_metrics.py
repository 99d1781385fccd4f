"""Latency percentiles, throughput and consumer lag from raw records."""

import json

import numpy as np
import pandas as pd
import pytest

from harness.metrics import backpressure, latency, offered_eps, processed_eps


def _progress(batch_id, start_iso, duration_ms, rows, ends):
    return {"batchId": batch_id, "timestamp": start_iso, "batchDuration": duration_ms,
            "numInputRows": rows, "sources": [{"endOffset": json.dumps({"t": ends})}]}


def _truth(append_ms, partition=0):
    n = len(append_ms)
    return pd.DataFrame({"partition": partition, "offset": np.arange(n), "append_ms": append_ms,
                         "sent_ms": append_ms, "control": False})


class TestLatency:
    def test_percentiles_of_1_to_1000(self):
        """HdrHistogram of 3 digits: ms values below 2,048 are exact, so p50 of 1..1000 is
        500 (the value at which half the samples are at or below it)."""
        p = latency.percentiles(latency.histogram(np.arange(1, 1001, dtype=float)))
        assert p == {"p50": 500.0, "p90": 900.0, "p99": 990.0, "p999": 999.0, "max": 1000.0, "count": 1000}

    def test_large_values_keep_three_digits(self):
        """An hour's latency is kept to within 0.1%: HdrHistogram's promise."""
        p = latency.percentiles(latency.histogram(np.array([3_600_000.0] * 5 + [1.0])))
        assert abs(p["p90"] - 3_600_000) <= 3_600 and p["count"] == 6

    def test_no_samples_give_nulls(self):
        """A case with no output reports null latencies, not zeros."""
        p = latency.percentiles(latency.histogram(np.array([])))
        assert p.pop("count") == 0 and set(p.values()) == {None}

    def test_ten_million_samples_are_recorded_by_distinct_value(self):
        """Counted first with numpy: a million samples of 1,000 values is 1,000 records."""
        samples = np.tile(np.arange(1000, dtype=float), 1000)
        assert latency.histogram(samples).get_total_count() == 1_000_000

    def test_the_histogram_is_saved_in_the_standard_encoding(self, tmp_path):
        h = latency.histogram(np.array([5.0, 7.0, 7.0, 120_000.0]))
        back = latency.load(latency.save(h, tmp_path / "latency-event_time.hdr"))
        assert back.get_total_count() == 4 and back.get_value_at_percentile(50) == 7

    @pytest.mark.parametrize("seed", [1, 2, 3])
    def test_percentiles_agree_with_numpy_within_the_histograms_precision(self, seed):
        """On random latencies (lognormal, 1 ms to hours) every percentile is within 0.1%
        (3 significant digits) plus 1 ms of numpy's exact one on the same samples, and none
        is above the exact max."""
        rng = np.random.default_rng(seed)
        samples = np.rint(np.clip(rng.lognormal(mean=7.0, sigma=2.0, size=200_000), 1, 3_600_000))
        got, ordered = latency.summarise(samples), np.sort(samples)
        for name, q in latency.PERCENTILES.items():
            # the smallest sample with q% of all at or below it (numpy's inverted_cdf, but with
            # the rank rounded as HdrHistogram does: 0.999 * 200,000 is 199,800.00000000003)
            exact = float(ordered[int(np.ceil(round(q / 100 * len(samples), 6))) - 1])
            assert abs(got[name] - exact) <= exact * 1e-3 + 1, (name, got[name], exact)
            assert got[name] <= got["max"]
        assert got["max"] == samples.max() and got["count"] == len(samples)

    def test_the_timeline_has_a_row_per_second_of_output(self):
        at = np.array([10_000, 10_500, 11_200, 13_900])
        t = latency.timeline(np.array([100.0, 300.0, 50.0, 70.0]), at, start_ms=10_000)
        assert t["second"].tolist() == [0, 1, 3] and t["count"].tolist() == [2, 1, 1]
        assert t["max"].tolist() == [300.0, 50.0, 70.0] and t["p50"].tolist()[0] == 100.0


class TestThroughput:
    def test_offered_is_events_per_second_of_sending(self):
        """1,001 events sent over 10 s offer about 100 events/s."""
        assert offered_eps(_truth(np.linspace(0, 10_000, 1001))) == 100.1

    def test_processed_skips_batches_that_ended_before_the_load(self):
        """The warm-up batch does not dilute the processing rate."""
        progress = [_progress(0, "1970-01-01T00:00:00.000Z", 20_000, 2, {"0": 1}),
                    _progress(1, "1970-01-01T00:00:30.000Z", 1_000, 500, {"0": 501}),
                    _progress(2, "1970-01-01T00:00:31.000Z", 1_000, 500, {"0": 1001})]
        assert processed_eps(progress, since_ms=25_000) == 500.0


class TestBackpressure:
    def test_lag_counts_appended_events_no_finished_batch_had_read(self):
        """At the end of batch 0 (t=1 s), events appended by then but beyond its end offset wait."""
        truth = _truth(np.array([0, 100, 200, 300, 5_000]))
        progress = [_progress(0, "1970-01-01T00:00:00.500Z", 500, 1, {"0": 1})]
        lag = backpressure(truth, progress, "t")
        assert lag["max_lag_records"] == 3 and lag["max_lag_s"] == 0.9 and lag["recovery_s"] is None


class TestLagRecovered:
    SERIES = [(1000, 100, 0.5), (2000, 120, 0.5), (3000, 900, 2.0), (4000, 700, 3.0), (5000, 110, 0.6)]

    def test_counts_from_the_fault_until_the_lag_is_back_at_its_level_before(self):
        """Before the fault (at 2.5 s) the lag peaked at 120; it is back under that at 5 s."""
        from harness.metrics import lag_recovered_s

        assert lag_recovered_s(self.SERIES, started_ms=2500, ended_ms=3500, before_ms=1500) == 2.5

    def test_is_none_when_the_lag_never_comes_back(self):
        from harness.metrics import lag_recovered_s

        assert lag_recovered_s(self.SERIES[:4], started_ms=2500, ended_ms=3500, before_ms=1500) is None

    def test_is_none_without_a_batch_before_the_fault(self):
        from harness.metrics import lag_recovered_s

        assert lag_recovered_s(self.SERIES, started_ms=500, ended_ms=900) is None

    def test_is_none_when_the_run_is_younger_than_the_window_before(self):
        """A fault 2.5 s into the run has no 10 s of history: no level to come back to."""
        from harness.metrics import lag_recovered_s

        assert lag_recovered_s(self.SERIES, started_ms=2500, ended_ms=3500) is None

    @pytest.mark.parametrize("series, started, ended, words", [
        (SERIES[:4], 2500, 3500, "never came back to its level before the fault (120 records): 700"),
        (SERIES, 2500, 3500, "had run 1.5 s of batches when the fault came, fewer than 10 s"),
        (SERIES, 2500, 6000, "no batch ended after the fault did"),
        ([], 2500, 3500, "no batch reported its progress"),
    ], ids=["never-back", "too-early", "run-ended", "no-batches"])
    def test_a_missing_figure_comes_with_the_reason(self, series, started, ended, words):
        """Every fault gets a recovery figure, or a note that says why there is none."""
        from harness.metrics import lag_recovery

        before = 1500 if words.startswith(("never", "no batch ended")) else 10_000
        seconds, note = lag_recovery(series, started, ended, before_ms=before)
        assert seconds is None and words in note, note

    def test_a_fault_after_the_query_was_down_is_not_called_early(self):
        """Batches for 20 s, none for the 10 s before the fault (a restart): the note said
        "the run had run 22.9 s of batches ..., fewer than 10 s" in the quick bench."""
        from harness.metrics import lag_recovery

        series = [(at, 100, 0.1) for at in range(1000, 12_000, 1000)] + [(30_000, 50, 0.1)]
        seconds, note = lag_recovery(series, 23_000, 25_000)
        assert seconds is None and "no batch ended in the 10 s before the fault" in note, note

    def test_a_figure_comes_without_a_note(self):
        from harness.metrics import lag_recovery

        assert lag_recovery(self.SERIES, 2500, 3500, before_ms=1500) == (2.5, None)


class TestBatchTime:
    def test_phases_and_state_operators_of_the_batches_with_input(self):
        """Idle batches are left out; each phase's median, p90 and max; the batches that
        overran the trigger; each state operator's commit time and largest state."""
        from harness.metrics.batches import breakdown

        def batch(rows, trigger, add, state):
            return {"numInputRows": rows, "durationMs": {"triggerExecution": trigger, "addBatch": add},
                    "stateOperators": [{"operatorName": "stateStoreSave", "commitTimeMs": 10,
                                        "numRowsTotal": state}]}

        progress = [batch(0, 5, 1, 0), batch(100, 900, 700, 10), batch(100, 1500, 1300, 30),
                    batch(100, 1100, 900, 20)]
        out = breakdown(progress, trigger_ms=1000)
        assert out["batches"] == 3 and out["over_trigger"] == 2
        assert out["phases_ms"]["addBatch"] == {"median": 900.0, "p90": 1300.0, "max": 1300.0}
        assert out["phases_ms"]["walCommit"]["median"] is None
        assert out["state_operators"] == [{"name": "stateStoreSave",
                                           "allUpdatesTimeMs": {"median": None, "p90": None, "max": None},
                                           "allRemovalsTimeMs": {"median": None, "p90": None, "max": None},
                                           "commitTimeMs": {"median": 10.0, "p90": 10.0, "max": 10.0},
                                           "numRowsTotal_max": 30, "memoryUsedBytes_max": None}]

    def test_input_rate_against_processing_rate(self):
        """Spark's inputRowsPerSecond and processedRowsPerSecond of the busy batches, and in
        how many the query processed slower than rows came in."""
        from harness.metrics.batches import breakdown

        progress = [{"numInputRows": n, "inputRowsPerSecond": i, "processedRowsPerSecond": r,
                     "durationMs": {}} for n, i, r in [(0, 0.0, 0.0), (10, 100.0, 300.0),
                                                       (10, 200.0, 150.0), (10, 300.0, 250.0)]]
        rates = breakdown(progress)["rows_per_s"]
        assert rates["input"]["median"] == 200.0 and rates["processed"]["median"] == 250.0
        assert rates["slower_than_input"] == 2


class TestFlow:
    """Four throughputs and the lag per second, on a hand-made run: 10 events a second for
    10 s into one partition, read by batches that end every second, the last 5 s slowly."""

    START = 1_700_000_000_000

    def _run(self, keep_up: bool):
        from datetime import UTC, datetime

        n = 100
        sent = self.START + np.arange(n) * 100
        truth = pd.DataFrame({"partition": 0, "offset": np.arange(n), "sent_ms": sent, "append_ms": sent + 5,
                              "control": False})
        progress, read = [], 0
        for second in range(1, 11):
            end = self.START + second * 1000 + 500
            appended = int(((sent + 5) <= end).sum())
            new_read = appended if keep_up or second <= 5 else read + 5      # half the rate
            stamp = datetime.fromtimestamp((end - 100) / 1000, UTC).isoformat().replace("+00:00", "Z")
            progress.append({"timestamp": stamp, "batchDuration": 100, "numInputRows": new_read - read,
                             "sources": [{"endOffset": json.dumps({"t": {"0": new_read}}),
                                          "numInputRows": new_read - read}]})
            read = new_read
        return truth, progress

    def test_a_query_that_keeps_up(self):
        from harness.metrics import flow

        truth, progress = self._run(keep_up=True)
        rates, lag = flow.timeline(truth, progress, "t", truth["append_ms"].to_numpy() + 600, self.START)
        assert rates["offered"].tolist()[:10] == [10] * 10
        assert rates["processed"].sum() == 100 and rates["delivered"].sum() == 100
        out = flow.measured(rates, lag, truth, self.START, from_s=2)
        assert out["eps"]["offered"] == 10.0 and out["keeping_up"] is True
        assert flow.counts_agree(truth, progress) == {"harness_records": 100, "spark_input_rows": 100,
                                                      "agree": True}

    def test_a_query_that_falls_behind(self):
        """From second 5 it reads 5 of every 10: the lag grows 5 records a second."""
        from harness.metrics import flow

        truth, progress = self._run(keep_up=False)
        rates, lag = flow.timeline(truth, progress, "t", np.array([]), self.START)
        out = flow.measured(rates, lag, truth, self.START, from_s=5)
        assert out["keeping_up"] is False and out["lag_trend_records_per_s"] == pytest.approx(5, abs=1)
        last = lag[lag["second"] == 9].iloc[0]
        assert last["lag_records"] == 25 and last["lag_s"] > 2
        assert flow.counts_agree(truth, progress)["agree"] is False

    def test_a_trigger_that_realigns_is_no_trend_at_the_batches_ends(self):
        """100 events/s for 20 s; batches of 0.7 s, back to back until 8 s, then on a 1 s
        trigger starting at .35 of each second (as a query that stopped catching up). Each
        batch reads all that was there: it keeps up. By the second, the lag steps from about
        1 s of records to 1.65 s as the phase moves, a slope over 2% of the rate; at the
        batches' ends it is 0.7 s of records throughout."""
        from datetime import UTC, datetime

        from harness import metrics
        from harness.metrics import flow

        sent = self.START + np.arange(2000) * 10
        truth = pd.DataFrame({"partition": 0, "offset": np.arange(2000), "sent_ms": sent, "append_ms": sent,
                              "control": False})
        starts = [1000 + k * 700 for k in range(10)] + [8350 + k * 1000 for k in range(12)]
        progress, read = [], 0
        for start in starts:
            at = self.START + start
            now = int((sent <= at).sum())
            stamp = datetime.fromtimestamp(at / 1000, UTC).isoformat().replace("+00:00", "Z")
            source = {"endOffset": json.dumps({"t": {"0": now}}), "numInputRows": now - read}
            progress.append({"timestamp": stamp, "batchDuration": 700, "numInputRows": now - read,
                             "sources": [source]})
            read = now
        rates, lag = flow.timeline(truth, progress, "t", np.array([]), self.START)
        by_second = flow.measured(rates, lag, truth, self.START, from_s=2)
        assert by_second["keeping_up"] is False and by_second["lag_trend_sampled_at"] == "seconds"
        out = flow.measured(rates, lag, truth, self.START, from_s=2,
                            at_batch_ends=metrics.lag_series(truth, progress, "t"))
        assert out["keeping_up"] is True and out["lag_trend_sampled_at"] == "batch ends"
        assert abs(out["lag_trend_records_per_s"]) < 1, out

    def test_a_query_falling_behind_falls_behind_at_its_batches_ends_too(self):
        from harness import metrics
        from harness.metrics import flow

        truth, progress = self._run(keep_up=False)
        rates, lag = flow.timeline(truth, progress, "t", np.array([]), self.START)
        out = flow.measured(rates, lag, truth, self.START, from_s=5,
                            at_batch_ends=metrics.lag_series(truth, progress, "t"))
        assert out["keeping_up"] is False and out["lag_trend_sampled_at"] == "batch ends"
        assert out["lag_trend_records_per_s"] == pytest.approx(5, abs=1)

    def test_a_window_row_delivers_its_count_of_events(self):
        from harness.metrics import flow

        truth, progress = self._run(keep_up=True)
        at = np.array([self.START + 2_500, self.START + 7_500])
        rates, _ = flow.timeline(truth, progress, "t", at, self.START, delivered_weights=np.array([50, 50]))
        assert rates["delivered"].tolist()[:8] == [0, 0, 50, 0, 0, 0, 0, 50]

    def test_the_case_timeline_has_one_row_per_second_on_the_harness_clock(self):
        """timeline.parquet: throughputs, the lag summed over partitions, latency p50/p99."""
        from harness.metrics import flow

        truth, progress = self._run(keep_up=False)
        rates, lag = flow.timeline(truth, progress, "t", np.array([]), self.START)
        lat = {"event_time": latency.timeline(np.array([100.0, 300.0]), np.array([self.START + 100,
                                                                                 self.START + 900]),
                                              self.START)}
        out = flow.per_second(rates, lag, lat, self.START)
        assert out["at_ms"].tolist()[:2] == [self.START + 1000, self.START + 2000]
        assert out.loc[9, "lag_records"] == 25 and out.loc[0, "event_time_p99_ms"] == 300.0
        assert {"offered", "ingested", "processed", "delivered", "lag_s", "event_time_p50_ms"} <= set(out)

    def test_the_timeline_carries_each_components_resources_of_the_second(self):
        """resources.parquet joined in: a sample belongs to the second its interval ends in;
        samples from before the first event (the driver's start) stay out of the timeline."""
        from harness.metrics import flow

        truth, progress = self._run(keep_up=True)
        rates, lag = flow.timeline(truth, progress, "t", np.array([]), self.START)
        at = [self.START - 500, self.START + 1000, self.START + 1000, self.START + 1990]
        used = pd.DataFrame({"at_ms": at,
                             "component": ["driver", "driver", "executor:0", "driver"],
                             "cpu_percent": [150.0, 40.0, 90.0, 60.0], "rss_bytes": [1, 700, 300, 800],
                             "processes": [2, 2, 1, 2]})
        out = flow.per_second(rates, lag, {}, self.START, used)
        assert out.loc[0, "cpu_percent:driver"] == 40.0 and out.loc[0, "cpu_percent:executor:0"] == 90.0
        assert out.loc[1, "cpu_percent:driver"] == 60.0 and out.loc[1, "rss_bytes:driver"] == 800
        assert out["second"].min() == 0 and len(out) == len(rates)


class TestBatchesTable:
    def test_one_row_per_batch_with_its_phases(self):
        from harness.metrics.batches import table

        progress = [{"timestamp": "2026-11-23T10:00:00.000Z", "batchDuration": 700, "batchId": 3,
                     "runId": "r", "numInputRows": 12,
                     "durationMs": {"triggerExecution": 700, "addBatch": 500},
                     "eventTime": {"watermark": "2026-11-23T09:59:50.000Z"}}]
        row = table(progress).iloc[0]
        assert row["batch_id"] == 3 and row["addBatch_ms"] == 500 and row["input_rows"] == 12
        from datetime import UTC, datetime

        assert row["at_ms"] == datetime(2026, 11, 23, 10, tzinfo=UTC).timestamp() * 1000 + 700


class TestMeasuredLatency:
    def test_the_warm_up_s_output_is_left_out_of_the_measured_percentiles(self, tmp_path):
        from harness.check.result import CheckResult

        at = np.array([1_000, 2_000, 20_000, 21_000])
        checked = CheckResult({}, np.array([9000.0, 8000.0, 100.0, 200.0]), np.array([]),
                              event_time_at_ms=at)
        everything, measured, _ = latency.record(tmp_path, checked, start_ms=0, measured_from_ms=10_000)
        assert everything["event_time"]["max"] == 9000.0 and everything["event_time"]["count"] == 4
        assert measured["event_time"]["max"] == 200.0 and measured["event_time"]["count"] == 2
        assert (tmp_path / "latency-event_time.hdr").exists()


class TestBurstDrain:
    """How long after a burst's end the lag is back at its level before the burst."""

    START = 1_700_000_000_000

    def _series(self):
        # a batch end every second: lag 10 before the burst at 20 s, up to 500, back to 10 at 27 s
        lag = {s: 10 for s in range(0, 40)}
        lag.update({20: 200, 21: 400, 22: 500, 23: 400, 24: 300, 25: 200, 26: 50})
        return [(self.START + s * 1000.0, n, 0.0) for s, n in sorted(lag.items())]

    def test_drain_counts_from_the_bursts_end(self):
        from harness.run.collect import _burst_drain
        from workloads.generator import shapes

        out = _burst_drain(shapes.Burst(100, 2000, 20.0, 3.0), self.START, self._series())
        assert out == {"at_s": 20.0, "length_s": 3.0, "drained_s": 4.0}
        warm = shapes.WarmUp(shapes.Burst(100, 2000, 20.0, 3.0), 10.0, 50)
        assert _burst_drain(warm, self.START, self._series())["drained_s"] == 4.0

    def test_other_shapes_have_no_burst(self):
        from harness.run.collect import _burst_drain
        from workloads.generator import shapes

        assert _burst_drain(shapes.Constant(100), self.START, self._series()) is None
