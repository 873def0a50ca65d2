"""The work queue: de-duplicating, one worker per key, rate limited per key and overall.

The concurrency model is client-go's workqueue, in one event loop:

- ``queue`` is the FIFO of keys waiting for a worker; ``dirty`` is the set of
  keys that need processing (waiting or not); ``processing`` is the set of keys
  a worker holds right now.
- :meth:`WorkQueue.add` of a key that is already dirty does nothing (events
  arriving in a burst cost one reconcile). Adding a key a worker holds marks it
  dirty but does not queue it: :meth:`WorkQueue.done` queues it again when the
  worker lets go, so a key is never handed to two workers at once, and a change
  during a reconcile is never lost.
- :meth:`WorkQueue.add_after` keeps one timer per key, the earliest asked for.
- :meth:`WorkQueue.add_rate_limited` (after a failed reconcile) waits the larger
  of the key's own backoff, ``base_delay`` doubling per failure up to
  ``max_delay``, and the overall token bucket (``qps``/``burst``), which bounds
  the retry rate when many keys fail together. :meth:`WorkQueue.forget` (after
  a success) resets the key's backoff.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
from collections.abc import Hashable
from typing import Generic, TypeVar

from federation.contexts.ratelimit import TokenBucket

K = TypeVar("K", bound=Hashable)


@dataclasses.dataclass(frozen=True)
class QueueSettings:
    """Retry pacing of one controller's queue."""

    base_delay: float = 0.005
    """First retry after 5 ms (controller-runtime's default): a conflict caused by a
    stale cache is usually gone by the time the informer delivers the newer object."""
    max_delay: float = 1000.0
    """Backoff stops doubling at 1000 s (~17 min, controller-runtime's default): a
    key failing for hours is still retried a few times an hour, not never."""
    qps: float = 10.0
    """Overall retries per second (controller-runtime's bucket): when a member goes
    away and a thousand keys fail at once, retries trickle instead of stampeding."""
    burst: int = 100
    """Retries allowed at once above ``qps`` (controller-runtime's default)."""


class ShutDown(Exception):
    """The queue was shut down and is empty."""


class RateLimiter(Generic[K]):
    """Per-key exponential backoff combined (max) with an overall token bucket."""

    def __init__(self, settings: QueueSettings) -> None:
        self.settings = settings
        self.bucket = TokenBucket(settings.qps, settings.burst)
        self._failures: dict[K, int] = {}

    def when(self, key: K) -> float:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        own = min(self.settings.base_delay * 2.0 ** min(failures, 64), self.settings.max_delay)
        return max(own, self.bucket.reserve())

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)


class WorkQueue(Generic[K]):
    """Keys waiting for workers; see the module docstring for the rules."""

    def __init__(self, name: str, settings: QueueSettings | None = None) -> None:
        self.name = name
        self.limiter: RateLimiter[K] = RateLimiter(settings or QueueSettings())
        self._queue: collections.deque[K] = collections.deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._timers: dict[K, tuple[float, asyncio.TimerHandle]] = {}
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._shutting_down = False
        self.adds = 0
        self.retries = 0

    def __len__(self) -> int:
        """Keys waiting for a worker (the queue depth)."""
        return len(self._queue)

    @property
    def processing(self) -> int:
        return len(self._processing)

    @property
    def waiting(self) -> int:
        """Keys scheduled for later (requeue-after or backoff)."""
        return len(self._timers)

    def add(self, key: K) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self.adds += 1
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._notify()

    def _notify(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def add_after(self, key: K, delay: float) -> None:
        """Add ``key`` after ``delay`` seconds (at once if <= 0); keeps the earliest time."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        at = loop.time() + delay
        current = self._timers.get(key)
        if current is not None:
            if current[0] <= at:
                return
            current[1].cancel()
        self._timers[key] = (at, loop.call_at(at, self._fire, key))

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def add_rate_limited(self, key: K) -> None:
        self.retries += 1
        self.add_after(key, self.limiter.when(key))

    def forget(self, key: K) -> None:
        self.limiter.forget(key)

    def failures(self, key: K) -> int:
        return self.limiter.failures(key)

    async def get(self) -> K:
        """The next key; the caller must call :meth:`done` with it. Raises :class:`ShutDown`."""
        while not self._queue:
            if self._shutting_down:
                raise ShutDown()
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled() and self._queue:
                    self._notify()  # pass the wake-up on to another worker
                raise
        key = self._queue.popleft()
        self._processing.add(key)
        self._dirty.discard(key)
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty and not self._shutting_down:
            self._queue.append(key)
            self._notify()

    def shutdown(self) -> None:
        """Stop accepting keys; workers drain nothing more and get :class:`ShutDown`."""
        self._shutting_down = True
        self._queue.clear()
        for _, timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
