"""Rate shapes and the open-loop schedule they give."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workloads.generator import shapes
from workloads.generator.shapes import Bounded, Burst, Constant, Ramp, Sine, Square, Steps


def _offsets(shape) -> np.ndarray:
    slices = list(shapes.schedule(shape))
    return np.concatenate(slices) if slices else np.empty(0)


def _integral(shape, duration_s: float, step_s: float = 1e-5) -> float:
    """The exact count a shape asks for: its rate integrated by a fine midpoint sum."""
    t = np.arange(0, duration_s, step_s) + step_s / 2
    return float(sum(shape.tick(x) for x in t) * step_s)


# (shape, duration_s, exact integral of its rate over the duration)
SHAPES = {
    "constant": (Constant(1000), 5.0, 5000.0),
    "ramp": (Ramp(0, 1000, 10.0), 10.0, 5000.0),
    "ramp-then-flat": (Ramp(200, 600, 2.0), 5.0, 800 + 600 * 3.0),
    "steps": (Steps(((0.0, 100.0), (0.29, 1000.0), (0.57, 50.0))), 1.0, 100 * 0.29 + 1000 * 0.28 + 50 * 0.43),
    "square": (Square(100, 1000, 0.4, 0.25), 4.0, 10 * (1000 * 0.1 + 100 * 0.3)),
    "fast-square": (Square(0, 1000, 0.1, 0.1), 1.0, 100.0),
    "sine": (Sine(1000, 800, 2.0), 6.0, 6000.0),
    "sine-half-period": (Sine(1000, 1000, 2.0), 1.0, 1000 + 1000 * 2 / math.pi),
    "burst": (Burst(100, 5000, 0.29, 0.07), 1.0, 100 * 0.93 + 5000 * 0.07),
}


class TestShapeTick:
    def test_ramp_runs_linearly_then_holds(self):
        """A ramp is from_eps at 0, halfway at over/2, and to_eps from `over` on."""
        r = Ramp(100, 300, 4.0)
        got = [r.tick(0), r.tick(2.0), r.tick(4.0), r.tick(100.0)]
        assert got == [100, 200, 300, 300], f"ramp ticks {got}"

    def test_steps_hold_each_rate_until_the_next(self):
        """Each step's rate applies from its time up to the next step's."""
        s = Steps(((0.0, 10.0), (1.0, 20.0), (3.0, 5.0)))
        got = [s.tick(t) for t in (0, 0.99, 1.0, 2.9, 3.0, 50)]
        assert got == [10, 10, 20, 20, 5, 5], f"step ticks {got}"

    def test_square_is_high_for_the_duty_share_of_each_period(self):
        """A square wave gives high_eps in the first `duty` of every period and low_eps after."""
        q = Square(1, 9, 2.0, 0.25)
        got = [q.tick(t) for t in (0.1, 0.49, 0.51, 1.9, 2.1, 2.6)]
        assert got == [9, 9, 1, 1, 9, 1], f"square ticks {got}"

    def test_burst_spikes_only_inside_its_window(self):
        """A burst gives burst_eps on [at, at + length) and eps elsewhere."""
        b = Burst(10, 500, 2.0, 1.0)
        got = [b.tick(t) for t in (1.99, 2.0, 2.99, 3.0)]
        assert got == [10, 500, 500, 10], f"burst ticks {got}"

    def test_bounded_ends_at_its_duration(self):
        """Bounded passes the shape's rate through before its duration and None from then on."""
        b = Bounded(Constant(5), 2.0)
        assert (b.tick(1.99), b.tick(2.0)) == (5, None)

    def test_describe_names_the_shape_and_its_parameters(self):
        """describe() is plain JSON data with the kind, the parameters and the duration."""
        d = shapes.describe(Bounded(Ramp(1, 2, 3.0), 4.0))
        assert d == {"shape": "ramp", "from_eps": 1, "to_eps": 2, "over_s": 3.0, "duration_s": 4.0}


    def test_a_warmup_phase_sends_its_own_rate_then_the_shape_on_the_same_clock(self):
        """WarmUp gives its rate before `for_s` and the shape's own rate after, unshifted: a
        burst at 3 s stays at 3 s. The schedule counts both phases exactly."""
        w = shapes.WarmUp(Burst(100, 1000, 3.0, 1.0), 2.0, 10)
        assert [w.tick(t) for t in (0.0, 1.99, 2.0, 3.5, 4.5)] == [10, 10, 100, 1000, 100]
        assert shapes.expected_count(Bounded(w, 5.0)) == 2 * 10 + 1 * 100 + 1 * 1000 + 1 * 100
        assert shapes.built_in(Bounded(w, 5.0)) and not shapes.built_in(shapes.WarmUp(_Countdown(), 1, 1))
        assert shapes.describe(w)["warmup"] == {"for_s": 2.0, "eps": 10}


class _Countdown:
    """A custom shape: 100 events/s until 0.5 s, then the end (no Bounded around it)."""

    def tick(self, elapsed_s: float) -> float | None:
        return 100.0 if elapsed_s < 0.5 else None


class TestSchedule:
    @pytest.mark.parametrize("name", sorted(SHAPES))
    def test_the_count_is_the_integral_of_the_rate(self, name):
        """The schedule holds the rate's integral over the duration, to within one event."""
        shape, duration, exact = SHAPES[name]
        n = len(_offsets(Bounded(shape, duration)))
        assert abs(n - exact) <= 1, f"{name}: {n} events vs integral {exact:.2f}"

    @pytest.mark.parametrize("name", sorted(SHAPES))
    def test_events_are_in_time_order_within_the_duration(self, name):
        """Send offsets never decrease and lie in [0, duration]."""
        shape, duration, _ = SHAPES[name]
        t = _offsets(Bounded(shape, duration))
        assert np.all(np.diff(t) >= 0), f"{name}: {int(np.sum(np.diff(t) < 0))} decreasing steps"
        assert t[0] >= 0 and t[-1] <= duration, f"{name}: offsets {t[0]}..{t[-1]}"

    @pytest.mark.parametrize("name", sorted(SHAPES))
    def test_expected_count_is_the_schedule_length(self, name):
        """expected_count() predicts exactly how many events the schedule gives."""
        shape, duration, _ = SHAPES[name]
        bounded = Bounded(shape, duration)
        assert shapes.expected_count(bounded) == len(_offsets(bounded)), name

    def test_the_integral_reference_agrees_with_the_closed_forms(self):
        """The numeric integral used as a cross-check matches the hand-computed counts."""
        for name, (shape, duration, exact) in SHAPES.items():
            approx = _integral(shape, duration, step_s=1e-4)
            assert approx == pytest.approx(exact, abs=1.0), f"{name}: {approx:.2f} vs {exact:.2f}"

    def test_a_constant_rate_spaces_events_evenly(self):
        """At 1000 events/s the i-th event is due at i ms."""
        error = _offsets(Bounded(Constant(1000), 2.0)) - np.arange(2000) / 1000
        assert np.abs(error).max() < 1e-9, f"max error {np.abs(error).max()} s"

    @pytest.mark.parametrize("duration_ms", [1, 5, 1005, 2999, 60_001])
    def test_a_duration_off_the_slice_grid_is_honoured_exactly(self, duration_ms):
        """A duration that is not a whole number of 10 ms slices is neither rounded up nor down."""
        bounded = Bounded(Constant(1000), duration_ms / 1000)
        t = _offsets(bounded)
        assert len(t) == duration_ms == shapes.expected_count(bounded), f"{len(t)} events in {duration_ms} ms"
        assert t[-1] < duration_ms / 1000, f"last event at {t[-1]} s"

    def test_a_custom_shape_ends_the_schedule_by_returning_none(self):
        """A shape whose tick returns None ends the schedule there, without a Bounded."""
        t = _offsets(_Countdown())
        assert len(t) == 50 and t[-1] < 0.5, f"{len(t)} events, last at {t[-1] if len(t) else None}"
        assert shapes.expected_count(_Countdown()) == 50

    def test_a_zero_rate_sends_nothing_yet_keeps_the_clock(self):
        """Slices of rate 0 give no events, and events after them are due after the gap."""
        t = _offsets(Bounded(Steps(((0.0, 0.0), (1.0, 100.0))), 2.0))
        assert len(t) == 100 and t[0] == pytest.approx(1.0), f"{len(t)} events from {t[0]}"

    def test_a_negative_rate_is_an_error(self):
        """A shape returning a negative or non-finite rate fails with the time and the value."""
        for bad in (-1.0, math.nan, math.inf):
            shape = Bounded(Steps(((0.0, 10.0), (0.5, bad))), 1.0)
            with pytest.raises(ValueError, match="0.50s"):
                list(shapes.schedule(shape))

    def test_fast_square_waves_keep_their_duty(self):
        """A square wave with edges on slice boundaries sends duty x high rate: float rounding of the
        slice times does not give the high phase an extra slice."""
        for period_ms in (20, 40, 50, 100, 200):
            square = Square(0, 1000, period_ms / 1000, 0.5 if period_ms < 50 else 0.2)
            n = len(_offsets(Bounded(square, 10 * period_ms / 1000)))
            want = 10 * period_ms * square.duty
            assert abs(n - want) <= 1, f"period {period_ms} ms: {n} events vs {want:g}"
