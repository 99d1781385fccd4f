"""Latency percentiles, throughput and consumer lag from raw records."""

import json

import numpy as np
import pandas as pd

from harness.metrics import backpressure, offered_eps, percentiles, processed_eps


def _progress(batch_id, start_iso, duration_ms, rows, ends):
    return {"batchId": batch_id, "timestamp": start_iso, "batchDuration": duration_ms,
            "numInputRows": rows, "sources": [{"endOffset": json.dumps({"t": ends})}]}


def _truth(append_ms, partition=0):
    n = len(append_ms)
    return pd.DataFrame({"partition": partition, "offset": np.arange(n), "append_ms": append_ms,
                         "sent_ms": append_ms, "control": False})


class TestPercentiles:
    def test_percentiles_of_1_to_1000(self):
        """p50 of 1..1000 is 500 or 501 (the 'higher' method picks an observed sample)."""
        p = percentiles(np.arange(1, 1001, dtype=float))
        assert p["p50"] == 501 and p["p99"] == 991 and p["max"] == 1000

    def test_no_samples_give_nulls(self):
        """A case with no output reports null latencies, not zeros."""
        assert set(percentiles(np.array([])).values()) == {None}


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
