"""An event loop on virtual time: when nothing is ready, the clock jumps to the next timer.

Timers (``call_at``, ``asyncio.sleep``) fire in order without any wall-clock wait, so
tests of delays and backoff run in microseconds and never depend on the machine's load.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def time(self) -> float:
        return self.now

    def _run_once(self) -> None:
        # Nothing ready and timers pending: jump to the earliest (selector then polls, 0 s).
        ready: Any = getattr(self, "_ready")  # noqa: B009 - the loop's own queues
        scheduled: Any = getattr(self, "_scheduled")  # noqa: B009
        if not ready and scheduled:
            self.now = max(self.now, min(h.when() for h in scheduled if not h.cancelled())
                           if any(not h.cancelled() for h in scheduled) else self.now)
        super()._run_once()  # type: ignore[misc]


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on a fresh virtual-time loop."""
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()
