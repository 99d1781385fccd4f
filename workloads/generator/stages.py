"""Background stages around the sending thread: a Feeder runs ahead of it, a Drain behind it.

Each stage is one daemon thread joined to the sender by a small bounded queue, so memory
stays bounded and a slow stage shows as the sender waiting, never as a growing backlog.
An exception in a stage is raised again in the sending thread, at its next hand-over.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator

_END = object()
POLL_S = 0.2   # how often a blocked hand-over looks whether the other side has stopped


class Feeder:
    """Iterates `items` in a thread, `depth` items ahead of the consumer."""

    def __init__(self, items: Iterable, name: str, depth: int = 2):
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(items,), name=name, daemon=True)
        self._thread.start()

    def _run(self, items: Iterable) -> None:
        try:
            for item in items:
                if not self._put(item):
                    return
            self._put(_END)
        except BaseException as exc:  # handed to the consumer, which raises it
            self._put(exc)

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> Iterator:
        while (item := self._queue.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            yield item

    def stop(self, timeout_s: float = 10.0) -> None:
        """End the thread without producing more: it finishes the item in hand, at most POLL_S
        later it sees the stop, and this waits for that."""
        self._stop.set()
        self._thread.join(timeout_s)


class Drain:
    """Applies `fn` to every item put, in a thread, at most `depth` items behind."""

    def __init__(self, fn: Callable, name: str, depth: int = 4):
        self._fn = fn
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (item := self._queue.get()) is not _END:
            if self._error is None:
                try:
                    self._fn(*item)
                except BaseException as exc:  # raised in the sender at its next put() or close()
                    self._error = exc

    def put(self, *item) -> None:
        self._raise()
        self._queue.put(item)

    def close(self) -> None:
        """Wait until every item is done; raise the first exception `fn` raised. Idempotent."""
        if not self._closed:
            self._closed = True
            self._queue.put(_END)
            self._thread.join()
        self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error
