"""Polling with a deadline."""

import pytest

from workloads.wait import WaitTimeout, wait_until


class TestWaitUntil:
    def test_returns_the_first_truthy_value(self):
        """The condition's own value comes back, so callers can wait for a result."""
        values = iter([0, None, "ready"])
        assert wait_until(lambda: next(values), 5, backoff_s=0) == "ready"

    def test_times_out_with_the_message(self):
        """A condition that never holds ends in WaitTimeout carrying err_msg."""
        with pytest.raises(WaitTimeout, match="never"):
            wait_until(lambda: False, 0.05, backoff_s=0.01, err_msg=lambda: "never")

    def test_an_exception_in_the_condition_propagates_at_once(self):
        """A dead process is reported, not waited on until the deadline."""
        def boom():
            raise RuntimeError("dead")
        with pytest.raises(RuntimeError, match="dead"):
            wait_until(boom, 60)
