"""The mismatch finding: lost and unexpected rows that pair up are one row with a wrong value,
named by column and pattern (truncated, rounded, shifted, null) with counts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness import findings
from harness.check import rows
from harness.findings import mismatch
from harness.scenario.model import Pipeline

pytestmark = pytest.mark.unit


def _bids(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    extra = ["".join(rng.choice(list("abcdefghij"), int(k))) for k in rng.integers(20, 40, n)]
    return pd.DataFrame({"auction": np.arange(1000, 1000 + n), "bidder": rng.integers(0, 50, n),
                         "price": rng.integers(100, 10_000, n), "extra": extra})


def _inputs(expected: pd.DataFrame, sink: pd.DataFrame, key: list[str]) -> findings.Inputs:
    columns = {c: ("STRING" if c == "extra" else "LONG") for c in expected.columns}
    checked = rows.check(expected, sink.assign(committed_ms=1, batch_id=3), key, len(expected))
    truth = pd.DataFrame({"event_id": [0], "key": ["k"], "event_time_ms": [0], "partition": [0],
                          "offset": [0], "control": [False], "sent_ms": [0], "append_ms": [0], "amount": [0]})
    pipeline = Pipeline(kind="custom", key=tuple(key), columns=columns, oracle="x:y")
    return findings.Inputs(truth=truth, sink=sink.assign(committed_ms=1, batch_id=3), batches=[],
                           checked=checked, pipeline=pipeline)


class TestFromACase:
    def test_a_sink_cutting_text_to_16_characters_is_one_mismatch(self):
        """11,040 bids whose extra a sink cut to 16 characters: the oracle counts 11,040 lost and
        11,040 unexpected (extra is in the key); the finding pairs them on the other columns and
        says: column extra, truncated to 16 characters, in every pair."""
        expected = _bids(11_040)
        sink = expected.assign(extra=expected["extra"].str[:16])
        inputs = _inputs(expected, sink, ["auction", "bidder", "extra"])
        assert inputs.checked.counts["lost"] == 11_040 == inputs.checked.counts["unexpected"]
        found = mismatch.build(inputs)
        assert found is not None and found.cls == "mismatch"
        assert "11,040 lost and 11,040 unexpected" in found.story
        assert "column extra: truncated to 16 characters in 100 of the 100 pairs" in found.story
        assert "pair up on auction, bidder, price" in found.story
        from harness.findings import fix

        assert found.story.endswith(f"To fix: {fix.FIXES[('mismatch', None)]}."), found.story
        assert "a column type that truncates it" in found.story
        assert found.witness[0]["extra"]["actual"] == found.witness[0]["extra"]["expected"][:16]

    def test_the_finding_comes_first_among_the_case_s_findings(self):
        """findings.build puts mismatch before lost and unexpected."""
        expected = _bids(50)
        built = findings.build(_inputs(expected, expected.assign(extra=expected["extra"].str[:16]),
                                       ["auction", "extra"]))
        assert built[0].cls == "mismatch" and "mismatch" in findings.CLASSES

    def test_rows_that_do_not_pair_make_no_finding(self):
        """Lost and unexpected rows with nothing in common are no mismatch."""
        expected = _bids(20)
        other = _bids(40).iloc[20:].assign(auction=lambda f: f["auction"] + 5000, price=1, bidder=99)
        assert mismatch.build(_inputs(expected, other, ["auction", "bidder", "extra"])) is None


class TestPatterns:
    FRAME = pd.DataFrame({"user": ["a", "b", "c", "d"], "end_ms": [1000, 2000, 3000, 4000],
                          "avg": [1.2345, 2.5678, 3.14159, 4.0001], "n": [1, 2, 3, 4]})

    def _one(self, changed: pd.DataFrame) -> mismatch.Column:
        found = mismatch.analyse(self.FRAME, changed, list(self.FRAME.columns), ["user"])
        assert found is not None and len(found.columns) == 1 and found.pairs == 4
        return found.columns[0]

    def test_a_constant_difference_is_a_shift(self):
        """Every end moved by an hour: shifted by +3,600,000, named in hours."""
        col = self._one(self.FRAME.assign(end_ms=self.FRAME["end_ms"] + 3_600_000))
        assert col.patterns == {"shifted": 4} and "+1 h" in col.detail["shifted"]

    def test_fewer_decimals_is_rounding(self):
        """Averages rounded to 2 decimals: rounded, to 2 decimals."""
        col = self._one(self.FRAME.assign(avg=self.FRAME["avg"].round(2)))
        assert col.patterns == {"rounded": 4} and col.detail["rounded"] == "to 2 decimals"

    def test_a_value_gone_null(self):
        """Counts written as null: null."""
        assert self._one(self.FRAME.assign(n=None)).patterns == {"null": 4}

    def test_other_differences_are_changes(self):
        """Counts doubled: no shift, no rounding: changed."""
        assert self._one(self.FRAME.assign(n=self.FRAME["n"] * 2)).patterns == {"changed": 4}
