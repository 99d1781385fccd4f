"""A finding's witness table in its story's units (harness/findings/evidence.py): windows in
seconds from the first event sent, batches named as the story names them, copies as text."""

import pytest

from harness.findings import evidence
from harness.results.model import Finding

pytestmark = pytest.mark.unit

WINDOW = {"key": "k00", "window": [1_795_806_006_000, 1_795_806_008_000], "window_s": [6.0, 8.0],
          "row": "key=k00 window=[1795806006000,1795806008000)",
          "expected": {"count": 89, "sum_amount": 4325},
          "written_by": [{"batch_id": 9, "committed_s": 11.2}, {"batch_id": 9, "committed_s": 29.63}],
          "read_by_batches": [3, 4, 5, 8]}


def _one(record: dict) -> dict[str, str]:
    headings, (row,) = evidence.table(Finding("duplicated", 1, witness=[record]))
    return dict(zip(headings, row, strict=True))


class TestTable:
    def test_a_window_is_in_seconds_and_its_epoch_row_text_is_left_out(self):
        """[6.0 s, 8.0 s), not epoch ms; the row's text, which repeats them in epoch ms, has no column."""
        cells = _one(WINDOW)
        assert cells["window"] == "[6.0 s, 8.0 s)" and "row" not in cells

    def test_a_window_begun_before_the_first_event_is_not_negative(self):
        """A window from -0.7 s reads as begun before the first event."""
        assert _one({**WINDOW, "window_s": [-0.7, 1.3]})["window"] == "[0.7 s before the first event, 1.3 s)"

    def test_copies_and_readers_are_told_as_the_story_tells_them(self):
        """written_by as "batch 9 at 11.2 s and 29.6 s", read_by_batches as "batches 3-5 and 8"."""
        cells = _one(WINDOW)
        assert cells["written by"] == "batch 9 at 11.2 s and 29.6 s"
        assert cells["read by"] == "batches 3-5 and 8"
        assert cells["expected"] == "count 89, sum amount 4,325"

    def test_a_later_query_s_batch_and_a_sink_s_own_id_are_named_apart(self):
        """Batch 2 of query 1 (the checker's id 1,000,002); an id of the sink's own is not a batch."""
        cells = _one({"event_id": 7, "read_by_batch": 1_000_002,
                      "written_by": [{"batch_id": 1_795_547_429_255_918, "committed_s": 12.3},
                                     {"committed_s": 66.0}]})
        assert cells["read by"] == "batch 2 of query 1" and cells["event"] == "7"
        assert cells["written by"] == "sink id 1795547429255918 at 12.3 s; at 66.0 s"

    def test_an_older_summary_s_window_says_its_unit(self):
        """Without window_s (a summary written before it): epoch ms, said so."""
        record = {k: v for k, v in WINDOW.items() if k != "window_s"}
        assert _one(record)["window"] == "[1,795,806,006,000, 1,795,806,008,000) epoch ms"

    def test_no_witness_no_table(self):
        assert evidence.table(Finding("lost", 3)) == ([], [])
