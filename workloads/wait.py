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
) -> T:
    """Call `condition` until it returns a truthy value and return that value.

    Raises WaitTimeout with `err_msg` (a string, or a callable for a message that
    reports the state at the deadline) when `timeout_s` passes first. An exception
    raised by `condition` propagates at once: a dead process should not be waited on.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise WaitTimeout(err_msg() if callable(err_msg) else err_msg)
        time.sleep(backoff_s)
