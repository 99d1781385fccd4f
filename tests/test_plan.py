"""The event plan: determinism, ids, partitions, idle partitions, clock skew, lateness, groups, dilation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workloads.generator import plan as events
from workloads.generator import shapes, spec
from workloads.generator.plan import Planner, plan_all

START_MS = 1_700_000_000_000
COLUMNS = tuple(events.Block.__dataclass_fields__)


def _spec(eps: float = 1000, duration: str = "2s", **tables) -> spec.WorkloadSpec:
    return spec.parse({"duration": duration, "rate": {"eps": eps}, "seed": 7, **tables})


def _plan(w: spec.WorkloadSpec, start_ms: int = START_MS, share: tuple[int, int] = (0, 1)) -> events.Block:
    blocks = list(Planner(w, start_ms, share))
    return events.Block(*(np.concatenate([getattr(b, f) for b in blocks]) for f in COLUMNS))


def _identity(b: events.Block) -> np.ndarray:
    """(event_id, key, event_time_ms, partition) rows: what must be reproducible."""
    return np.stack([b.event_id, b.key, b.event_time_ms, b.partition.astype(np.int64)], axis=1)


def _unshuffled_times(w: spec.WorkloadSpec, start_ms: int) -> np.ndarray:
    """Event times without any delay: the intended send time, dilated, in whole ms."""
    offsets = np.concatenate(list(shapes.schedule(w.shape)))
    return np.floor(start_ms + offsets * 1000.0 * w.time.dilation).astype(np.int64)


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of ~1000 events, so short plans cross several block boundaries."""
    monkeypatch.setattr(events, "BLOCK_EVENTS", 1000)


DELAYED = {"delay": {"distribution": "exponential", "mean": "300ms", "late_share": 0.05}}


class TestDeterminism:
    def test_the_same_seed_and_start_give_the_same_plan(self, small_blocks):
        """Two iterations of one spec, seed and start give identical events in every column."""
        w = _spec(partitions=4, **DELAYED)
        a, b = _plan(w), _plan(w)
        for f in COLUMNS:
            assert np.array_equal(getattr(a, f), getattr(b, f)), f"column {f} differs"

    def test_a_different_seed_gives_a_different_plan(self):
        """Changing the seed changes the keys and the event times."""
        a = _plan(_spec(**DELAYED))
        b = _plan(spec.parse({"duration": "2s", "rate": {"eps": 1000}, "seed": 8, **DELAYED}))
        assert len(a) == len(b)
        same_keys = float(np.mean(a.key == b.key))
        same_times = float(np.mean(a.event_time_ms == b.event_time_ms))
        assert same_keys < 0.5 and same_times < 0.5, f"{same_keys:.0%} keys, {same_times:.0%} times equal"

    def test_the_start_shifts_times_and_nothing_else(self):
        """A later start moves every event time and send time by the difference, keys unchanged."""
        w = _spec(**DELAYED)
        a, b = _plan(w, START_MS), _plan(w, START_MS + 12_345)
        assert np.array_equal(a.key, b.key) and np.array_equal(a.late_by_design, b.late_by_design)
        shift = b.event_time_ms - a.event_time_ms
        assert np.abs(shift - 12_345).max() <= 1, f"event time shifts {shift.min()}..{shift.max()}"
        assert np.array_equal(b.intended_us - a.intended_us, np.full(len(a), 12_345_000))

    @pytest.mark.parametrize("n", [2, 3, 5])
    def test_shares_of_processes_union_to_the_single_process_plan(self, small_blocks, n):
        """Planner(share=(j, n)) for j in 0..n-1 together give exactly the single-process plan."""
        w = _spec(eps=2000, partitions=3, **DELAYED)
        whole = _plan(w)
        parts = [_plan(w, share=(j, n)) for j in range(n)]
        for j, p in enumerate(parts):
            assert np.all(p.event_id % n == j), f"share {j}/{n} holds ids of other shares"
        union = np.concatenate([_identity(p) for p in parts])
        union = union[np.argsort(union[:, 0], kind="stable")]
        assert np.array_equal(union, _identity(whole)), f"{len(union)} rows vs {len(whole)}"

    def test_plan_all_is_the_concatenation_of_the_blocks(self, small_blocks):
        """plan_all gives the same rows as iterating the planner block by block."""
        w = _spec(**DELAYED)
        assert np.array_equal(_identity(plan_all(w, START_MS)), _identity(_plan(w)))


class TestIds:
    def test_ids_are_dense_and_count_the_schedule(self, small_blocks):
        """Event ids are 0..n-1 in send order across blocks, n = expected_count of the shape."""
        w = _spec(eps=1500, duration="3s")
        p = _plan(w)
        n = shapes.expected_count(w.shape)
        assert n == 4500 and np.array_equal(p.event_id, np.arange(n)), f"{len(p)} events, expected {n}"

    def test_send_times_follow_the_schedule(self):
        """Intended send times are non-decreasing and span the duration from the start."""
        p = _plan(_spec())
        assert np.all(np.diff(p.intended_us) >= 0)
        assert p.intended_us[0] == START_MS * 1000 and p.intended_us[-1] < (START_MS + 2000) * 1000

    def test_partition_is_the_key_rank_mod_partitions(self):
        """The planner, not Kafka, chooses the partition: rank mod partitions."""
        p = _plan(_spec(partitions=7))
        assert np.array_equal(p.partition, p.key % 7)

    def test_idle_partitions_lose_their_window_and_ids_stay_dense(self, small_blocks):
        """An idle partition sends nothing in its window; ids stay 0..n-1 over the events that remain."""
        idle = {"time": {"idle": [{"partition": 1, "from": "1s", "for": "1.5s"}]}}
        busy = _plan(_spec(duration="4s", partitions=3))
        quiet = _plan(_spec(duration="4s", partitions=3, **idle))
        assert np.array_equal(quiet.event_id, np.arange(len(quiet))), "ids have gaps"
        t_s = (quiet.intended_us - START_MS * 1000) / 1e6
        window = (t_s >= 1.0) & (t_s < 2.5)
        on_1 = quiet.partition == 1
        assert not np.any(on_1 & window), f"{int(np.sum(on_1 & window))} events on the idle partition"
        assert np.any(on_1 & ~window) and np.any(~on_1 & window), "the pause spread beyond its window"
        busy_t = (busy.intended_us - START_MS * 1000) / 1e6
        removed = int(np.sum((busy.partition == 1) & (busy_t >= 1.0) & (busy_t < 2.5)))
        assert len(busy) - len(quiet) == removed, f"{len(busy)} - {len(quiet)} != {removed} removed"
        kept = ~((busy.partition == 1) & (busy_t >= 1.0) & (busy_t < 2.5))
        assert np.array_equal(busy.key[kept], quiet.key), "idleness changed the other events' keys"

    def test_event_fields_stay_in_their_ranges(self):
        """user < users, item < items, amount in 1..100 and type an index of EVENT_TYPES."""
        w = _spec(payload={"users": 50, "items": 7})
        p = _plan(w)
        assert 0 <= p.user.min() and p.user.max() < 50, f"users {p.user.min()}..{p.user.max()}"
        assert 0 <= p.item.min() and p.item.max() < 7, f"items {p.item.min()}..{p.item.max()}"
        assert p.amount.min() == 1 and p.amount.max() == 100, f"amounts {p.amount.min()}..{p.amount.max()}"
        assert set(np.unique(p.event_type)) == set(range(len(events.EVENT_TYPES)))

    def test_event_types_follow_their_weights(self):
        """Each event type's share lies within 4 binomial standard deviations of its weight."""
        p = _plan(_spec(eps=5000, duration="4s"))
        n = len(p)
        for i, weight in enumerate(events.EVENT_TYPE_WEIGHTS):
            share = float(np.mean(p.event_type == i))
            bound = 4 * math.sqrt(weight * (1 - weight) / n)
            assert abs(share - weight) < bound, f"{events.EVENT_TYPES[i]}: {share:.4f} vs {weight} (n={n})"


class TestClockSkew:
    def test_skew_shifts_each_partition_by_exactly_its_skew(self):
        """With the same seed, skewed event times minus unskewed ones equal the partition's skew."""
        skew = ["0s", "2s", "-1.5s"]
        plain = _plan(_spec(partitions=3, **DELAYED))
        skewed = _plan(_spec(partitions=3, time={"clock_skew": skew}, **DELAYED))
        assert np.array_equal(plain.key, skewed.key)
        shift = skewed.event_time_ms - plain.event_time_ms
        want = np.array([0, 2000, -1500])[skewed.partition]
        assert np.array_equal(shift, want), f"shifts {np.unique(shift)} vs skews {skew}"

    def test_one_duration_skews_every_partition(self):
        """clock_skew as a single string applies to all partitions."""
        plain = _plan(_spec(partitions=3))
        skewed = _plan(_spec(partitions=3, time={"clock_skew": "250ms"}))
        assert np.all(skewed.event_time_ms - plain.event_time_ms == 250)


class TestLateness:
    def test_the_late_share_matches_late_share(self):
        """The fraction late_by_design lies within 4 binomial standard deviations of late_share."""
        p_late = 0.1
        p = _plan(_spec(eps=5000, duration="10s", delay={"late_share": p_late}))
        n = len(p)
        share = float(p.late_by_design.mean())
        bound = 4 * math.sqrt(p_late * (1 - p_late) / n)
        assert abs(share - p_late) < bound, f"late share {share:.4f} vs {p_late} (4 sigma {bound:.4f}, n={n})"

    def test_late_events_happen_at_least_late_by_before_their_send(self):
        """A late event's time, minus its partition's skew, is at least late_by before its send time."""
        w = _spec(partitions=2, time={"clock_skew": ["0s", "3s"]},
                  delay={"distribution": "exponential", "mean": "200ms", "late_share": 0.2, "late_by": "30s"})
        p = _plan(w)
        skew = np.array([0, 3000])[p.partition]
        lead_us = p.intended_us - (p.event_time_ms - skew) * 1000
        late = p.late_by_design
        assert late.sum() > 100, f"only {late.sum()} late events"
        assert lead_us[late].min() >= 30_000_000, f"a late event only {lead_us[late].min()} us early"
        assert lead_us[~late].min() >= 0, f"an on-time event from the future by {-lead_us[~late].min()} us"
        assert lead_us[~late].max() < 30_000_000 * 0.5, "on-time events as late as the late ones"

    def test_late_by_is_added_exactly_and_only_to_the_late_events(self):
        """Versus the same seed without late share, late events are exactly late_by earlier, others equal."""
        delay = {"distribution": "exponential", "mean": "200ms", "late_by": "45s"}
        on_time = _plan(_spec(delay=delay))
        mixed = _plan(_spec(delay={**delay, "late_share": 0.3}))
        late = mixed.late_by_design
        assert not on_time.late_by_design.any() and late.sum() > 300, f"{late.sum()} late events"
        shift = on_time.event_time_ms - mixed.event_time_ms
        assert np.all(shift[late] == 45_000), f"late shifts {np.unique(shift[late])}"
        assert np.all(shift[~late] == 0), f"on-time shifts {np.unique(shift[~late])}"

    def test_plan_delays_are_the_drawn_delays(self):
        """Send time minus event time averages the exponential mean (plus the 0.5 ms of flooring)."""
        p = _plan(_spec(eps=5000, duration="4s", delay={"distribution": "exponential", "mean": "300ms"}))
        delay_ms = p.intended_us / 1000 - p.event_time_ms
        n = len(p)
        bound = 4 * 300 / math.sqrt(n) + 0.5
        assert abs(delay_ms.mean() - 300.5) < bound, f"mean delay {delay_ms.mean():.1f} ms (n={n})"


class TestGroups:
    @pytest.mark.parametrize("group", [2, 7, 64])
    def test_event_times_are_permuted_within_each_group_only(self, small_blocks, group):
        """Each run of group_size events holds exactly its un-shuffled times, and groups never overlap."""
        w = _spec(eps=1500, duration="3s", delay={"distribution": "groups", "group_size": group})
        p = _plan(w)
        plain = _unshuffled_times(w, START_MS)
        assert len(p) == len(plain) == 4500
        full = len(p) // group * group
        got = p.event_time_ms[:full].reshape(-1, group)
        want = plain[:full].reshape(-1, group)
        assert np.array_equal(np.sort(got, axis=1), want), "a group holds times of another group"
        assert np.all(got.max(axis=1)[:-1] <= got.min(axis=1)[1:]), "disorder crosses a group boundary"
        assert np.array_equal(np.sort(p.event_time_ms[full:]), plain[full:]), "the last partial group"
        disordered = int(np.sum(np.diff(p.event_time_ms) < 0))
        assert disordered > len(p) / group / 4, f"only {disordered} inversions: nothing was shuffled"


class TestDilation:
    @pytest.mark.parametrize("dilation", [0.5, 60.0])
    def test_event_time_runs_dilation_times_faster(self, dilation):
        """Without delay, event time since the start is `dilation` times the send offset (to 1 ms)."""
        p = _plan(_spec(time={"dilation": dilation}))
        send_ms = (p.intended_us - START_MS * 1000) / 1000
        event_ms = p.event_time_ms - START_MS
        error = event_ms - dilation * send_ms
        assert error.min() > -1.001 and error.max() < 0.001, f"error {error.min():.3f}..{error.max():.3f} ms"
        span = event_ms[-1] / send_ms[-1]
        assert span == pytest.approx(dilation, rel=1e-3), f"event time ran {span:.4f}x send time"


class TestDuplicates:
    """workload.duplicates: a share of events re-sent later, as a producer retry would."""

    def test_copies_repeat_their_event_later_and_leave_the_originals_unchanged(self, small_blocks):
        plain = _plan(_spec(duration="3s"))
        w = _spec(duration="3s", duplicates={"share": 0.1, "after": "250ms"})
        got = _plan(w)
        is_copy = ~_first_seen(got.event_id)
        originals = np.flatnonzero(~is_copy)
        assert np.array_equal(_identity(got)[originals], _identity(plain))
        assert np.array_equal(got.intended_us[originals], plain.intended_us)
        copies = np.flatnonzero(is_copy)
        assert 0.07 < len(copies) / len(plain) < 0.13
        by_id = dict(zip(plain.event_id, plain.intended_us, strict=True))
        assert all(got.intended_us[i] - by_id[got.event_id[i]] == 250_000 for i in copies)
        assert np.all(np.diff(got.intended_us) >= 0), "send order, across block boundaries too"

    def test_every_generator_process_sends_the_copies_of_its_own_events(self):
        w = _spec(duration="2s", duplicates={"share": 0.2})
        whole = _plan(w)
        parts = [_plan(w, share=(j, 3)) for j in range(3)]
        assert sum(len(p) for p in parts) == len(whole)
        assert all(np.all(p.event_id % 3 == j) for j, p in enumerate(parts))


def _first_seen(ids: np.ndarray) -> np.ndarray:
    """True where an id appears for the first time."""
    _, first = np.unique(ids, return_index=True)
    out = np.zeros(len(ids), bool)
    out[first] = True
    return out


class TestPastTheDuration:
    """A planner with a horizon plans on past the duration (a harness run whose faults are pending)."""

    def _blocks(self, w: spec.WorkloadSpec, horizon_s: float) -> tuple[Planner, list[events.Block]]:
        planner = Planner(w, START_MS, horizon_s=horizon_s)
        return planner, list(planner)

    def test_the_duration_s_events_are_those_of_the_plan_without_a_horizon(self, small_blocks):
        """The blocks before the duration are the plan's own, event for event in every column,
        and none of them is past the duration."""
        w = _spec(partitions=3, **DELAYED)
        planner, blocks = self._blocks(w, 5.0)
        before = [b for b in blocks if not planner.extends(b)]
        plain = _plan(w)
        joined = events.concat(before)
        for f in COLUMNS:
            assert np.array_equal(getattr(joined, f), getattr(plain, f)), f"column {f} differs"

    def test_it_plans_on_to_the_horizon_in_blocks_of_a_second_with_fresh_ids(self, small_blocks):
        """Past the 2 s duration, up to 5 s: at 200 events/s, three blocks of 200 events, each
        within one second of the schedule, ids going on from the duration's."""
        w = _spec(eps=200)
        planner, blocks = self._blocks(w, 5.0)
        past = [b for b in blocks if planner.extends(b)]
        assert [len(b) for b in past] == [200, 200, 200]
        for k, b in enumerate(past):
            offsets_s = (b.intended_us - START_MS * 1000) / 1e6
            assert 2 + k <= offsets_s.min() and offsets_s.max() < 3 + k, (k, offsets_s.min(), offsets_s.max())
        ids = np.concatenate([b.event_id for b in blocks])
        assert np.array_equal(ids, np.arange(400 + 600)) and planner.first_extension_id == 400

    @pytest.mark.parametrize("rate, past_eps", [
        ({"shape": "ramp", "from_eps": 100, "to_eps": 300}, 300),   # holds to_eps
        ({"shape": "steps", "steps": [["0s", 100], ["1s", 50]]}, 50),   # holds the last step
        ({"shape": "burst", "eps": 100, "burst_eps": 400, "at": "1s", "length": "500ms"}, 100),
    ])
    def test_each_shape_goes_on_as_its_rule_says(self, rate, past_eps):
        """Past the duration a ramp holds its end rate, steps their last, a burst its base rate."""
        planner, blocks = self._blocks(spec.parse({"duration": "2s", "rate": rate}), 4.0)
        assert sum(len(b) for b in blocks if planner.extends(b)) == 2 * past_eps

    def test_without_a_horizon_nothing_is_past_the_duration(self):
        """The default planner ends at the duration, as ever."""
        planner, blocks = self._blocks(_spec(), 2.0)
        assert not any(planner.extends(b) for b in blocks) and planner.first_extension_id is None


class TestMaxDuration:
    def test_a_max_duration_under_the_duration_is_refused_naming_both(self):
        """max_duration caps how long the workload may go on after its duration."""
        with pytest.raises(spec.SpecError, match=r"max_duration.*shorter than workload.duration \(20s\)"):
            spec.parse({"duration": "20s", "max_duration": "10s", "rate": {"eps": 1}})

    def test_the_cap_is_three_durations_unless_given(self):
        """The default follows the duration (a replaced duration too); a given one is kept."""
        from dataclasses import replace

        w = _spec(duration="10s")
        assert w.cap_s == 30 and replace(w, duration_s=20).cap_s == 60
        assert spec.parse({"duration": "10s", "max_duration": "15s", "rate": {"eps": 1}}).cap_s == 15
