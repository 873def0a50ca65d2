"""Token buckets: the one rate-limiting primitive, shared by clients and work queues.

A bucket holds up to ``burst`` tokens and refills at ``rate`` per second. Taking
a token never fails: :meth:`TokenBucket.reserve` takes it now, possibly driving
the balance below zero, and says how long the caller must wait before using it
(Go's ``rate.Limiter.Reserve``). Callers that can wait use :meth:`acquire`;
the work queue uses the delay to schedule a key instead of sleeping.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` saved up."""

    def __init__(self, rate: float, burst: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a token bucket needs rate > 0 and burst >= 1")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._stamp = clock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    def reserve(self) -> float:
        """Take a token; the seconds to wait before it may be used (0 when one was saved)."""
        self._refill()
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    async def acquire(self) -> None:
        """Wait for a token."""
        delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)
