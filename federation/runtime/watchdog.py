"""The event-loop watchdog: how late the loop wakes a task that does nothing but sleep.

Every reconcile, watch, probe, lease renewal and ``/healthz`` of the control plane shares
one event loop. A callback that computes for 8 s (a tenant's file parsed on the loop, a
huge list decoded) stalls all of them for those 8 s, and none of them can say so: each
only sees that it was late. The watchdog sleeps ``interval`` again and again and measures
how much later than asked it woke. That delay is time the loop spent elsewhere, or time
the process did not run at all (SIGSTOP, a paused VM, starved of CPU).

Every wake is observed in ``federation_event_loop_lag_seconds``; a lag above
``threshold`` is counted in ``federation_event_loop_stalls_total`` and logged, one line
with its size. The watchdog never acts on a lag: leadership is protected by the write
fence, which reads the clock itself (see :mod:`federation.runtime.leader`); this is for
the operator.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable

from federation.runtime import metrics

log = logging.getLogger("federation.watchdog")


@dataclasses.dataclass(frozen=True)
class WatchdogSettings:
    """How often the watchdog wakes and what lag it reports."""

    interval: float = 0.5
    """Seconds it sleeps each time: two wakes a second cost nothing measurable, and a
    stall is measured (and logged) at most half a second after it ends."""
    threshold: float = 1.0
    """Lag in seconds counted as a stall and logged. Below it a busy loop is only slow;
    at 1 s a probe's answer, a watch's bookmark or a lease renewal is late enough to
    matter (the renew deadline is 10 s), and an operator should see it."""

    def __post_init__(self) -> None:
        if not self.interval > 0 or not self.threshold > 0:
            raise ValueError(f"watchdog interval ({self.interval}) and threshold "
                             f"({self.threshold}) must be > 0")


class LoopWatchdog:
    """Measures the loop's lag into ``metrics``; ``clock`` and ``sleep`` are the loop's own
    (tests pass a virtual loop's)."""

    def __init__(self, metrics_: metrics.Metrics,
                 settings: WatchdogSettings | None = None, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.metrics = metrics_
        self.settings = settings or WatchdogSettings()
        self.clock = clock
        self.sleep = sleep

    async def run(self) -> None:
        """Measure until cancelled."""
        while True:
            await self.tick()

    async def tick(self) -> float:
        """Sleep once; the lag (seconds late, never negative), observed and reported."""
        due = self.clock() + self.settings.interval
        await self.sleep(self.settings.interval)
        lag = max(self.clock() - due, 0.0)
        self.metrics.loop_lag.observe(lag)
        if lag > self.settings.threshold:
            self.metrics.loop_stalls.inc()
            log.warning("event loop lagged %.1fs: nothing else ran meanwhile (a long "
                        "callback on the loop, or the process was stopped)", lag)
        return lag
