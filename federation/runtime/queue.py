"""The work queue: prioritised, de-duplicating, one worker per key, rate limited per key.

The concurrency model is client-go's workqueue, in one event loop, with the
priorities of controller-runtime's ``priorityqueue``:

- Every key waits with a **priority** (an int, higher first; :data:`DEFAULT_PRIORITY`
  for changes, :data:`LOW_PRIORITY` for the state found at start). Among keys of
  one priority the order is first come, first served. So after a restart with
  thousands of templates listed at low priority, a template created or changed
  now (a watch event at the default priority) is the next one handed out,
  instead of waiting behind the whole initial list.
- ``dirty`` is the set of keys that need processing (waiting or not), each with
  the highest priority asked for; ``processing`` is the set of keys a worker
  holds right now.
- :meth:`WorkQueue.add` of a key that is already waiting does nothing, except
  raise its priority if the new add asks for a higher one (events arriving in a
  burst cost one reconcile; an initial-list key that then changes is promoted).
  Adding a key a worker holds marks it dirty but does not queue it:
  :meth:`WorkQueue.done` queues it again when the worker lets go, so a key is
  never handed to two workers at once, and a change during a reconcile is never
  lost.
- Within one priority, a queue given a ``rank`` function orders keys by rank (higher
  first; propagation ranks a template by its recorded ``schedulePriority``, Karmada's
  scheduling priority), then first come, first served. The rank is read when the key is
  queued. A rank can delay keys but never stop them: a key that has waited
  ``max_wait`` seconds (:class:`QueueSettings`) is handed out before any key of its
  priority that has waited less, oldest first, whatever its rank. So a namespace that
  queues high-ranked keys without pause delays the others by at most ``max_wait`` plus
  the keys that became overdue before them, never for ever.
- :meth:`WorkQueue.add_after` keeps one timer per key, the earliest asked for,
  with the highest priority asked for.
- :meth:`WorkQueue.add_rate_limited` (after a failed reconcile) waits the larger
  of the key's own backoff, ``base_delay`` doubling per failure up to
  ``max_delay``, and the overall token bucket (``qps``/``burst``), which bounds
  the retry rate when many keys fail together. :meth:`WorkQueue.forget` (after
  a success) resets the key's backoff. Retries and requeues keep the priority
  the key was handed out with (:meth:`WorkQueue.get_with_priority`).
- With an :attr:`WorkQueue.admit` test (a sharded controller: does this replica own
  the key's shard now?) a key it refuses is **parked**, not queued, and every key
  added is remembered in :attr:`WorkQueue.known`. :meth:`WorkQueue.unpark` queues the
  parked keys admitted now, at :data:`LOW_PRIORITY` (a handover is a backlog, not news).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import heapq
import itertools
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from federation.contexts.ratelimit import TokenBucket

K = TypeVar("K", bound=Hashable)

DEFAULT_PRIORITY = 0
"""New and changed objects, explicit adds (controller-runtime's default, 0)."""
LOW_PRIORITY = -100
"""The state found at start: a first list, a handler replaying a cache, a resync
(controller-runtime's ``handler.LowPriority``)."""


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
    max_wait: float = 60.0
    """A key waiting this long is handed out before younger keys of its priority whatever
    their rank: ranks order the queue, they cannot starve it. 60 s is well above a queue
    drained normally (seconds) and below Karmada's 5 minutes in its unschedulable queue."""


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
    """Keys waiting for workers, highest priority first; see the module docstring."""

    def __init__(self, name: str, settings: QueueSettings | None = None,
                 rank: Callable[[K], int] | None = None) -> None:
        self.name = name
        self.settings = settings or QueueSettings()
        self.limiter: RateLimiter[K] = RateLimiter(self.settings)
        self.rank = rank
        """The key's rank within its priority (higher first), read when it is queued."""
        self._heap: list[tuple[int, int, int, K]] = []
        """(-priority, -rank, order, key); an entry whose (priority, order) is no longer the
        key's in :attr:`_queued` is stale (the key was promoted or handed out): skipped."""
        self._queued: dict[K, tuple[int, int]] = {}
        self._since: dict[int, dict[K, float]] = {}
        """Per priority, the keys waiting and since when, oldest first (insertion order)."""
        self._order = itertools.count()
        self._dirty: dict[K, int] = {}
        self._processing: dict[K, int] = {}
        self._timers: dict[K, tuple[float, asyncio.TimerHandle, int]] = {}
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._shutting_down = False
        self.adds = 0
        self.retries = 0
        self.admit: Callable[[K], bool] | None = None
        """When set, a key it refuses is parked instead of queued (see the module doc)."""
        self.parked: set[K] = set()
        self.known: set[K] = set()
        """Every key added since :attr:`admit` was set (the keys a replica may come to own)."""

    def __len__(self) -> int:
        """Keys waiting for a worker (the queue depth)."""
        return len(self._queued)

    @property
    def processing(self) -> int:
        return len(self._processing)

    @property
    def waiting(self) -> int:
        """Keys scheduled for later (requeue-after or backoff)."""
        return len(self._timers)

    def depth_by_priority(self) -> dict[int, int]:
        """Keys waiting for a worker, by priority."""
        return dict(collections.Counter(p for p, _ in self._queued.values()))

    def add(self, key: K, priority: int = DEFAULT_PRIORITY) -> None:
        if self._shutting_down:
            return
        if self.admit is not None:
            self.known.add(key)
            if not self.admit(key):
                self.parked.add(key)
                return
            self.parked.discard(key)
        current = self._dirty.get(key)
        if current is not None and current >= priority:
            return
        if current is None:
            self.adds += 1
        self._dirty[key] = priority
        if key in self._processing:
            return  # done() queues it, with this priority
        queued = self._queued.get(key)
        self._push(key, priority, queued[1] if queued is not None else next(self._order))

    def _push(self, key: K, priority: int, order: int) -> None:
        previous = self._queued.get(key)
        since = self._now()
        if previous is not None:  # promoted: it keeps the time it has waited
            since = self._since[previous[0]].pop(key, since)
        self._queued[key] = (priority, order)
        self._since.setdefault(priority, {})[key] = since
        rank = self.rank(key) if self.rank is not None else 0
        heapq.heappush(self._heap, (-priority, -rank, order, key))
        self._notify()

    @staticmethod
    def _now() -> float:
        try:
            return asyncio.get_running_loop().time()
        except RuntimeError:  # queued before the loop runs (a test, a start): time 0
            return 0.0

    def _notify(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def add_after(self, key: K, delay: float, priority: int = DEFAULT_PRIORITY) -> None:
        """Add ``key`` after ``delay`` seconds (at once if <= 0); keeps the earliest time
        and the highest priority."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key, priority)
            return
        loop = asyncio.get_running_loop()
        at = loop.time() + delay
        current = self._timers.get(key)
        if current is not None:
            priority = max(priority, current[2])
            if current[0] <= at:
                self._timers[key] = (current[0], current[1], priority)
                return
            current[1].cancel()
        self._timers[key] = (at, loop.call_at(at, self._fire, key), priority)

    def _fire(self, key: K) -> None:
        _, _, priority = self._timers.pop(key)
        self.add(key, priority)

    def park(self, key: K) -> None:
        """Keep ``key`` for later: it was handed out but is no longer admitted."""
        self.parked.add(key)

    def unpark(self) -> int:
        """Queue every parked key admitted now (low priority); how many there were."""
        ready = [key for key in self.parked if self.admit is None or self.admit(key)]
        for key in ready:
            self.parked.discard(key)
            self.add(key, LOW_PRIORITY)
        return len(ready)

    def add_rate_limited(self, key: K, priority: int = DEFAULT_PRIORITY) -> None:
        self.retries += 1
        self.add_after(key, self.limiter.when(key), priority)

    def forget(self, key: K) -> None:
        self.limiter.forget(key)

    def failures(self, key: K) -> int:
        return self.limiter.failures(key)

    async def get(self) -> K:
        """The next key; the caller must call :meth:`done` with it. Raises :class:`ShutDown`."""
        return (await self.get_with_priority())[0]

    async def get_with_priority(self) -> tuple[K, int]:
        """The next key (highest priority, then oldest) and the priority it waited with."""
        while not self._queued:
            if self._shutting_down:
                raise ShutDown()
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled() and self._queued:
                    self._notify()  # pass the wake-up on to another worker
                raise
        key, priority = self._next()
        del self._queued[key]
        self._since[priority].pop(key, None)
        priority = self._dirty.pop(key, priority)
        self._processing[key] = priority
        return key, priority

    def _next(self) -> tuple[K, int]:
        """The head of the heap (stale entries dropped), unless a key of its priority has
        waited ``max_wait``: then the oldest such key."""
        while True:
            negative, _, order, key = self._heap[0]
            if self._queued.get(key) == (-negative, order):
                break
            heapq.heappop(self._heap)
        waiting = self._since[-negative]
        oldest = next(iter(waiting))
        if oldest != key and self._now() - waiting[oldest] >= self.settings.max_wait:
            return oldest, -negative  # its heap entry goes stale and is dropped later
        heapq.heappop(self._heap)
        return key, -negative

    def done(self, key: K) -> None:
        self._processing.pop(key, None)
        priority = self._dirty.get(key)
        if priority is not None and not self._shutting_down:
            self._push(key, priority, next(self._order))

    def shutdown(self) -> None:
        """Stop accepting keys; workers drain nothing more and get :class:`ShutDown`."""
        self._shutting_down = True
        self._heap.clear()
        self._queued.clear()
        self._since.clear()
        for _, timer, _ in self._timers.values():
            timer.cancel()
        self._timers.clear()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
