"""Polling with a deadline and a message, never a bare sleep that hopes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(TimeoutError):
    """A condition did not hold before its deadline."""


def wait_until(
    condition: Callable[[], T],
    timeout_s: float,
    backoff_s: float = 0.2,
    err_msg: str | Callable[[], str] = "condition not met",
    paused: Callable[[], bool] | None = None,
    most_paused_s: float = 0.0,
    paused_means: str = "paused",
) -> T:
    """Call `condition` until it returns a truthy value and return that value.

    Raises WaitTimeout with `err_msg` (a string, or a callable for a message that
    reports the state at the deadline) when `timeout_s` passes first. An exception
    raised by `condition` propagates at once: a dead process should not be waited on.
    While `paused()` is true the clock stands still, for `most_paused_s` at most; the
    message then says how long it stood, and why (`paused_means`).
    """
    deadline = last = time.monotonic()
    deadline += timeout_s
    stood = 0.0
    while True:
        result = condition()
        if result:
            return result
        now = time.monotonic()
        if paused is not None and stood < most_paused_s and paused():
            stood += now - last
            deadline += now - last
        last = now
        if now >= deadline:
            text = err_msg() if callable(err_msg) else err_msg
            stood_text = f"; it also waited {stood:.0f} s while {paused_means}" if stood else ""
            raise WaitTimeout(text + stood_text)
        time.sleep(backoff_s)
