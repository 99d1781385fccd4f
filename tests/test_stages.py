"""The generator's background stages (workloads/stages.py): order, bounds and errors."""

from __future__ import annotations

import threading
import time

import pytest

from workloads.generator.stages import Drain, Feeder


class TestFeeder:
    def test_it_yields_every_item_in_order(self):
        """What the iterable gives, the consumer gets, in the same order."""
        assert list(Feeder(range(100), "t")) == list(range(100))

    def test_an_exception_in_the_thread_is_raised_to_the_consumer(self):
        """The producing thread's error reaches the consumer after the items before it."""
        def items():
            yield 1
            raise ValueError("plan broke")

        got = []
        with pytest.raises(ValueError, match="plan broke"):
            for item in Feeder(items(), "t"):
                got.append(item)
        assert got == [1]

    def test_it_runs_at_most_depth_items_ahead(self):
        """With nobody consuming, the thread stops after depth items (plus the one in hand)."""
        made = []

        def items():
            for i in range(100):
                made.append(i)
                yield i

        feeder = Feeder(items(), "t", depth=2)
        time.sleep(0.3)
        assert len(made) <= 3, f"made {len(made)} items ahead"
        feeder.stop()
        assert not feeder._thread.is_alive(), "the thread runs on after stop()"


class TestDrain:
    def test_every_item_is_done_in_order_before_close_returns(self):
        """close() waits for the items put before it."""
        done = []
        drain = Drain(lambda a, b: done.append((a, b)), "t")
        for i in range(50):
            drain.put(i, -i)
        drain.close()
        assert done == [(i, -i) for i in range(50)]

    def test_an_exception_in_fn_is_raised_in_the_putting_thread(self):
        """The first error comes back at close() (or an earlier put), once."""
        def fn(x):
            if x == 3:
                raise OSError("disk full")

        drain = Drain(fn, "t")
        with pytest.raises(OSError, match="disk full"):
            try:
                for i in range(10):
                    drain.put(i)
            finally:
                drain.close()

    def test_close_twice_is_harmless(self):
        """A second close() (a finally after a normal close) returns at once."""
        drain = Drain(lambda: None, "t")
        drain.close()
        drain.close()

    def test_it_works_beside_the_putting_thread(self):
        """fn runs in another thread than put()'s."""
        threads = set()
        drain = Drain(lambda: threads.add(threading.get_ident()), "t")
        drain.put()
        drain.close()
        assert threads and threading.get_ident() not in threads
