"""Where events land in Kafka, from a few delivery reports (workloads/anchors.py): which events
carry a report, and how every other event's offset is counted back and checked."""

from __future__ import annotations

import numpy as np

from workloads.generator.anchors import (
    ANCHOR_EVERY,
    ANCHOR_SLOT_US,
    EXACT_UP_TO_EPS,
    anchor_mask,
    locate,
    partition_rank,
)


def _block(eps: float, n: int, partitions: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Partitions and intended send times (µs) of n events scheduled at `eps`."""
    rng = np.random.default_rng(seed)
    intended = 1_000_000_000 + np.round(np.arange(n) * 1e6 / eps).astype(np.int64)
    return rng.integers(0, partitions, n).astype(np.int32), intended


class TestAnchorMask:
    def test_up_to_the_exact_rate_every_event_is_an_anchor(self):
        """A block scheduled at EXACT_UP_TO_EPS or less reports every message."""
        parts, intended = _block(EXACT_UP_TO_EPS, 5000, 4)
        assert anchor_mask(parts, intended).all()

    def test_above_it_the_last_event_of_each_partition_in_each_slot_is_an_anchor(self):
        """At 500,000 events/s: exactly the last of each (partition, millisecond) group, plus every
        ANCHOR_EVERY-th of a partition, and the block's last event of each partition."""
        parts, intended = _block(500_000, 20_000, 4)
        mask = anchor_mask(parts, intended)
        slot = intended // ANCHOR_SLOT_US
        for p in range(4):
            idx = np.flatnonzero(parts == p)
            s = slot[idx]
            closes = np.append(s[1:] != s[:-1], True)
            every = (np.arange(len(idx)) % ANCHOR_EVERY) == ANCHOR_EVERY - 1
            assert np.array_equal(mask[idx], closes | every), f"partition {p}"
            assert mask[idx[-1]], f"the last event of partition {p} is not an anchor"
        assert 0.005 < mask.mean() < 0.05, f"{mask.mean():.3%} of events are anchors"

    def test_no_segment_is_longer_than_anchor_every(self):
        """Unpaced-like schedules (everything in one slot) still get an anchor every ANCHOR_EVERY events."""
        parts = np.zeros(10_000, dtype=np.int32)
        intended = np.full(10_000, 5_000_000, dtype=np.int64)
        where = np.flatnonzero(anchor_mask(parts, intended))
        assert np.diff(np.concatenate([[-1], where])).max() == ANCHOR_EVERY


def _reports(rows: list[tuple[int, int, int]]) -> np.ndarray:
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


class TestLocate:
    def test_offsets_count_back_from_the_next_anchor(self):
        """Events 0..9 with anchors 0, 4 and 9 at offsets 100, 104, 109: offsets 100..109, each event
        with its anchor's append time."""
        seq = np.arange(10)
        anchors = _reports([(0, 100, 7), (4, 104, 8), (9, 109, 9)])
        offset, append, gaps = locate(seq, anchors, (-1, -1))
        assert offset.tolist() == list(range(100, 110))
        assert append.tolist() == [7, 8, 8, 8, 8, 9, 9, 9, 9, 9]
        assert gaps == []

    def test_it_continues_from_the_previous_blocks_anchor(self):
        """A block's first segment is checked against the last anchor of the block before."""
        offset, _, gaps = locate(np.arange(10, 15), _reports([(14, 214, 1)]), (9, 209))
        assert offset.tolist() == [210, 211, 212, 213, 214] and gaps == []

    def test_a_foreign_record_makes_its_segment_unconfirmed(self):
        """Anchors 4 and 9 are 6 offsets apart for 5 messages: events 5..9 get -1 and the gap is
        named (messages 5..9, offsets 105..110); the segment before stays confirmed."""
        seq = np.arange(10)
        anchors = _reports([(0, 100, 7), (4, 104, 8), (9, 110, 9)])
        offset, append, gaps = locate(seq, anchors, (-1, -1))
        assert offset.tolist() == [100, 101, 102, 103, 104, -1, -1, -1, -1, -1]
        assert append[5:].tolist() == [-1] * 5
        assert gaps == [(5, 9, 105, 110)]

    def test_a_lost_record_makes_its_segment_unconfirmed(self):
        """Anchors 4 and 9 only 4 offsets apart for 5 messages: one of them is missing."""
        offset, _, gaps = locate(np.arange(10), _reports([(0, 100, 7), (4, 104, 8), (9, 108, 9)]), (-1, -1))
        assert (offset[5:] == -1).all() and gaps == [(5, 9, 105, 108)]

    def test_a_failed_anchor_unconfirms_its_segment_and_the_next(self):
        """A failed anchor (offset -1) leaves its own segment and the following one unknown, since
        the next segment has no start to count from; a lone anchor after it is still exact."""
        seq = np.arange(8)
        anchors = _reports([(0, 100, 7), (3, -1, -1), (6, 106, 9), (7, 107, 9)])
        offset, _, gaps = locate(seq, anchors, (-1, -1))
        assert offset.tolist() == [100, -1, -1, -1, -1, -1, -1, 107]
        assert gaps == []

    def test_every_event_its_own_anchor_needs_no_check(self):
        """When every message reports (shared partitions), offsets are taken as reported, even
        though other producers' records sit between them."""
        seq = np.arange(4)
        anchors = _reports([(0, 10, 1), (1, 13, 2), (2, 14, 3), (3, 20, 4)])
        offset, append, gaps = locate(seq, anchors, (-1, -1))
        assert offset.tolist() == [10, 13, 14, 20] and append.tolist() == [1, 2, 3, 4] and gaps == []


class TestPartitionRank:
    def test_each_event_gets_its_place_in_its_partition(self):
        """Ranks count 0, 1, 2... separately per partition, in send order."""
        parts = np.array([2, 0, 2, 2, 1, 0, 2], dtype=np.int32)
        assert partition_rank(parts).tolist() == [0, 0, 1, 2, 0, 1, 3]
