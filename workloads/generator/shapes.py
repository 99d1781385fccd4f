"""Rate shapes: the target send rate over time, and the open-loop schedule they give.

A shape is any object with one method, `tick(elapsed_s)`, returning the target rate in
events per second at `elapsed_s` seconds into the run, or None to end the run (the idea
of Locust's `LoadTestShape.tick`, so the same shapes can drive Locust). The built-in
shapes run forever; `Bounded` ends one after a duration.

`schedule()` turns a shape into intended send times: the i-th event is due when the
integral of the rate reaches i, evaluated in fixed slices of `SLICE_S`, so the schedule
is a pure function of the shape, never of how fast the machine sends. Each slice takes
the rate at its midpoint: that integrates a ramp exactly, and keeps every sample half a
slice away from the edges that durations in whole slices put on it (a square wave's
flank, a burst's end, the run's end), where float rounding of `k * SLICE_S` would
otherwise decide which side of the edge a whole slice falls on. A `Bounded` shape's last
slice ends at its duration, so any duration in milliseconds is honoured exactly.

Past a workload's duration (a harness run whose faults have not all landed goes on, up to
its `max_duration`) every shape goes on as its own `tick()` says: `constant` and `steps`
hold their (last) rate, a `ramp` holds `to_eps`, a `burst` is back at its base rate, a
`square` and a `sine` go on with their period, and a custom shape is asked on (None ends the
workload there). `schedule(shape, start_s=..., end_s=...)` is that continuation: the same
rule, its slices counted from `start_s`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Protocol, runtime_checkable

import numpy as np

SLICE_S = 0.01  # the shape is sampled every 10 ms; within a slice the rate is constant


@runtime_checkable
class RateShape(Protocol):
    def tick(self, elapsed_s: float) -> float | None:
        """Target events/s at `elapsed_s`, or None when the run ends."""


class _Shape:
    kind = ""

    def describe(self) -> dict:
        return {"shape": self.kind, **asdict(self)}  # type: ignore[call-overload]  # every shape is a dataclass


@dataclass(frozen=True)
class Constant(_Shape):
    eps: float
    kind = "constant"

    def tick(self, elapsed_s: float) -> float:
        return self.eps


@dataclass(frozen=True)
class Ramp(_Shape):
    """Linear from `from_eps` to `to_eps` over `over_s` seconds, then `to_eps`."""

    from_eps: float
    to_eps: float
    over_s: float
    kind = "ramp"

    def tick(self, elapsed_s: float) -> float:
        f = min(elapsed_s / self.over_s, 1.0) if self.over_s > 0 else 1.0
        return self.from_eps + (self.to_eps - self.from_eps) * f


@dataclass(frozen=True)
class Steps(_Shape):
    """`steps` is ((at_s, eps), ...) sorted by at_s, the first at 0: each rate holds until the next."""

    steps: tuple[tuple[float, float], ...]
    kind = "steps"

    def tick(self, elapsed_s: float) -> float:
        rate = self.steps[0][1]
        for at_s, eps in self.steps:
            if elapsed_s < at_s:
                break
            rate = eps
        return rate


@dataclass(frozen=True)
class Square(_Shape):
    """`high_eps` for the first `duty` of every period, `low_eps` for the rest."""

    low_eps: float
    high_eps: float
    period_s: float
    duty: float = 0.5
    kind = "square"

    def tick(self, elapsed_s: float) -> float:
        phase = (elapsed_s % self.period_s) / self.period_s
        return self.high_eps if phase < self.duty else self.low_eps


@dataclass(frozen=True)
class Sine(_Shape):
    """mean_eps + amplitude_eps * sin(2 pi t / period_s); amplitude <= mean keeps it >= 0."""

    mean_eps: float
    amplitude_eps: float
    period_s: float
    kind = "sine"

    def tick(self, elapsed_s: float) -> float:
        return self.mean_eps + self.amplitude_eps * math.sin(2 * math.pi * elapsed_s / self.period_s)


@dataclass(frozen=True)
class Burst(_Shape):
    """`eps` throughout, except `burst_eps` for `length_s` seconds from `at_s` (a spike)."""

    eps: float
    burst_eps: float
    at_s: float
    length_s: float
    kind = "burst"

    def tick(self, elapsed_s: float) -> float:
        return self.burst_eps if self.at_s <= elapsed_s < self.at_s + self.length_s else self.eps


@dataclass(frozen=True)
class Bounded:
    """`shape` until `duration_s`, then the end."""

    shape: RateShape
    duration_s: float

    def tick(self, elapsed_s: float) -> float | None:
        if elapsed_s >= self.duration_s:
            return None
        return self.shape.tick(elapsed_s)


@dataclass(frozen=True)
class WarmUp:
    """`eps` for the first `for_s` seconds, then `shape` (on the same clock: a burst at 20 s is
    still at 20 s). The warm-up phase of a run: the JVMs compile and the caches fill at a rate
    the cold pipeline keeps up with, so no backlog from it reaches the measured window."""

    shape: RateShape
    for_s: float
    eps: float

    def tick(self, elapsed_s: float) -> float | None:
        return self.eps if elapsed_s < self.for_s else self.shape.tick(elapsed_s)


BUILT_IN = {cls.kind: cls for cls in (Constant, Ramp, Steps, Square, Sine, Burst)}


def built_in(shape: RateShape) -> bool:
    """Whether the shape is one of ours all through (so its event count is known in advance)."""
    if isinstance(shape, WarmUp | Bounded):
        return built_in(shape.shape)
    return isinstance(shape, tuple(BUILT_IN.values()))


def describe(shape: RateShape) -> dict:
    """A JSON-able description of a shape, for reports."""
    if isinstance(shape, Bounded):
        return {**describe(shape.shape), "duration_s": shape.duration_s}
    if isinstance(shape, WarmUp):
        return {**describe(shape.shape), "warmup": {"for_s": shape.for_s, "eps": shape.eps}}
    if isinstance(shape, _Shape):
        return shape.describe()
    return {"shape": "custom", "class": f"{type(shape).__module__}:{type(shape).__qualname__}"}


def _rates(shape: RateShape, slice_s: float, start_s: float = 0.0,
           end_s: float | None = None) -> Iterator[tuple[int, float, float]]:
    """(k, rate, width) of each slice k from `start_s` until the shape ends (or `end_s`), the
    rate sampled at the slice's midpoint; slice k starts at start_s + k * slice_s.

    Slices are `slice_s` wide, except that a Bounded shape's last slice stops at its duration
    (so a duration that is not a whole number of slices is neither rounded up nor down), and
    the last before `end_s` at `end_s`.
    """
    end = shape.duration_s if isinstance(shape, Bounded) else math.inf
    end = end if end_s is None else min(end, end_s)
    k = 0
    while True:
        t_k = start_s + k * slice_s
        width = min(slice_s, end - t_k)
        if width <= slice_s * 1e-9:   # the end, give or take the rounding of k * slice_s
            return
        rate = shape.tick(t_k + width / 2)
        if rate is None:
            return
        rate = float(rate)
        if not math.isfinite(rate) or rate < 0:
            raise ValueError(f"rate shape {describe(shape)} gave {rate!r} events/s at {t_k:.2f}s: "
                             "a rate must be a finite number >= 0")
        yield k, rate, width
        k += 1


def schedule(shape: RateShape, slice_s: float = SLICE_S, start_s: float = 0.0,
             end_s: float | None = None) -> Iterator[np.ndarray]:
    """Intended send offsets in seconds from the start, one array per slice (possibly empty).

    Event m (0-based) is due at the moment the cumulative count C(t) = integral of the
    rate reaches m; within a slice of constant rate r starting at t_k with count C_k it is
    t_k + (m - C_k) / r. Ends when the shape returns None (or at `end_s`). `start_s`: the
    schedule from there on, counted afresh (a workload's continuation past its duration).
    """
    done = 0.0   # C(t_k): events due before this slice, fractional
    for k, rate, width in _rates(shape, slice_s, start_s, end_s):
        end = done + rate * width
        first, last = _ceil(done), _ceil(end)   # events first .. last-1 fall in this slice
        if last > first:
            m = np.arange(first, last, dtype=np.float64)
            # clip: rounding must not move an event out of its slice (times never go back)
            t_k = start_s + k * slice_s
            yield np.clip(t_k + (m - done) / rate, t_k, start_s + (k + 1) * slice_s)
        else:
            yield np.empty(0)
        done = end


def expected_count(shape: RateShape, slice_s: float = SLICE_S) -> int:
    """How many events `schedule(shape)` gives (the shape must end), without building them."""
    done = 0.0
    for _, rate, width in _rates(shape, slice_s):
        done += rate * width
    return _ceil(done)


def _ceil(count: float) -> int:
    """ceil(count), with a count within 1e-9 of a whole number taken as that number: summing
    rate * width slice by slice leaves float noise, which must not add an event at the end."""
    return math.ceil(count - 1e-9)
