"""The cyclic garbage collector and a control plane whose caches hold the whole fleet.

CPython's collector scans every tracked container of a generation when it collects it,
and it collects the oldest generation each time the containers that survived into it
since the last full pass reach a quarter of those it held then. The caches are most of
the heap: at 10,000 templates on 3 members, about 50,000 cached objects and 600,000
containers (dicts and lists of their JSON), and one full pass over them takes 2 s or
more on this 2-core machine, all of it on the event loop (the watchdog logged stalls of
1 to 5 s every 15-20 s during a burst at that size, growing with the fleet: at twice the
size a pass would approach the 10 s renew deadline). At a cold start the first lists grow
the heap geometrically, so full passes come one after another while the caches fill.

Cached objects are plain JSON: they make no reference cycles, so the collector can never
free one; reference counting frees each when the cache replaces it. So :class:`Heap`:

- **holds** the collector while the caches first list (the start's full passes would
  scan what is being listed, for nothing; a start is bounded by the cache sync timeout);
- then **settles**: ``gc.freeze()`` moves every tracked object, the cached fleet with it,
  out of the collector's sight (frozen objects are still freed by reference counting when
  dropped). No pass first: at 10,000 templates it took 1.7-1.9 s of the start and freed
  0-64 objects; what cyclic garbage the start left is freed at the first unfreezing pass;
- **keeps** it so: every ``refreeze_interval`` a pass over what was made since (objects
  the watches brought in, replacing frozen ones) and a freeze again; every
  ``unfreeze_every``-th time it unfreezes first, so a cycle that was alive at a freeze and
  became garbage later is freed too (one full pass, the old cost, once an hour by default);
- and **paces** it: once settled, a young pass comes every 20,000 new containers instead of
  CPython's 700 (:attr:`HeapSettings.thresholds`). What a busy control plane allocates is
  mostly watch events' JSON bound for a cache: at 700, passes that could free nothing
  promoted it and scanned it again in the older generations.

:class:`CollectionTimer` times each pass in CPU (``federation_gc_cpu_seconds_total``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

log = logging.getLogger("federation.heap")


class Collector(Protocol):
    """What :class:`Heap` uses of the :mod:`gc` module (a fake one in tests)."""

    def disable(self) -> None: ...

    def enable(self) -> None: ...

    def collect(self) -> int: ...

    def freeze(self) -> None: ...

    def unfreeze(self) -> None: ...

    def get_freeze_count(self) -> int: ...

    def set_threshold(self, threshold0: int, threshold1: int = ...,
                      threshold2: int = ..., /) -> None: ...


@dataclasses.dataclass(frozen=True)
class HeapSettings:
    refreeze_interval: float = 600.0
    """Seconds between passes over what was made since the last freeze: long enough that a
    pass is over few objects when the fleet is quiet, short enough that a busy fleet's
    churn (objects replaced by watch events) never makes a pass as long as the old ones."""
    thresholds: tuple[int, int, int] = (20_000, 20, 10)
    """The collector's generation thresholds once settled (CPython's are 700, 10, 10): a
    young pass every 20,000 new containers, not 700. A watch event's JSON is hundreds of
    containers that live on in a cache, so at 700 most of them were promoted by passes that
    could free nothing and scanned again in the older generations: a burst of 500 templates
    spent 1.10 ms of the control plane's CPU per template in the collector, 0.30 at
    (10,000, 10, 10), 0.15-0.23 at these (docs/runtime.md, "The garbage collector")."""
    unfreeze_every: int = 6
    """Every so many passes (an hour at the default interval), the frozen objects are
    scanned too: a reference cycle alive at a freeze and dropped later is freed then."""


class CollectionTimer:
    """Times every collection (automatic or not) in CPU, by generation, through
    :data:`gc.callbacks`: the collector's cost is otherwise invisible, spread over whatever
    allocation set it off (profiles show it inside unrelated functions)."""

    def __init__(self, observe: Callable[[int, float], None],
                 clock: Callable[[], float] = time.process_time) -> None:
        self.observe = observe
        """Told (generation, CPU seconds) after each collection."""
        self.clock = clock
        self._started: float | None = None

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = self.clock()
        elif self._started is not None:
            self.observe(info.get("generation", 2), self.clock() - self._started)
            self._started = None

    def install(self) -> None:
        if self not in gc.callbacks:
            gc.callbacks.append(self)

    def remove(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)


class Heap:
    """Holds, settles and keeps the collector (see the module doc)."""

    def __init__(self, settings: HeapSettings | None = None, collector: Collector = gc,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 clock: Callable[[], float] = time.process_time) -> None:
        self.settings = settings or HeapSettings()
        self.collector = collector
        self.sleep = sleep
        self.clock = clock
        """Measures a pass in CPU time (what it cost this process), for the log."""
        self.passes = 0
        self.held = False

    def hold(self) -> None:
        """No automatic collection until :meth:`settle` (the caches' first lists)."""
        self.collector.disable()
        self.held = True

    def settle(self) -> None:
        """Freeze everything (no pass); automatic collection on again (if :meth:`hold`
        turned it off), paced by :attr:`HeapSettings.thresholds`."""
        self._pass(full=False, collect=False)
        self.collector.set_threshold(*self.settings.thresholds)
        if self.held:
            self.collector.enable()
            self.held = False

    async def keep(self) -> None:
        """Pass and freeze every ``refreeze_interval``, until cancelled."""
        while True:
            await self.sleep(self.settings.refreeze_interval)
            full = (self.passes + 1) % max(self.settings.unfreeze_every, 1) == 0
            self._pass(full)

    def _pass(self, full: bool, collect: bool = True) -> None:
        started = self.clock()
        if full:
            self.collector.unfreeze()
        freed = self.collector.collect() if collect else 0
        self.collector.freeze()
        self.passes += 1
        log.log(logging.INFO if self.passes == 1 else logging.DEBUG,
                "heap: %d objects frozen (%s, %d freed, %.2f s CPU)",
                self.collector.get_freeze_count(),
                "full pass" if full else "new objects' pass" if collect else "no pass",
                freed, self.clock() - started)
