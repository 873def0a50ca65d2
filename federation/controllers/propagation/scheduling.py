"""Running the placement engine off the event loop, within a time budget.

The engine (:mod:`federation.placement`) is pure, CPU-bound Python. Called on
the event loop, one expensive placement (a hostile policy, huge replica
numbers) would stop every controller, probe and lease renewal of the process
until it returned. So the propagation controller asks a :class:`Scheduler`,
which runs each placement in its own thread and waits for it at most
``budget`` seconds:

- the loop keeps serving everything else meanwhile (Python hands the GIL back
  to the loop every few milliseconds, so a busy placement thread slows it but
  never stops it);
- past the budget the caller gets :class:`BudgetExceeded` and the template a
  ``Scheduled=False`` condition (``ScheduleTimeout``); the scheduler remembers
  the inputs that ran out (:meth:`Scheduler.timed_out`), so requeues of every
  template (a MemberCluster changed) do not run the same hopeless placement
  again; a new template or policy version tries again;
- at most ``threads`` placements run at once: a thread cannot be killed, so a
  placement past its budget keeps its slot until it returns, and runaway
  computations cannot multiply. A placement that cannot get a slot within the
  budget fails with the retryable :class:`SchedulerBusy` (backed off by the
  work queue) rather than waiting for ever.

Threads are daemons: a placement still computing never holds up the exit of
``fedctl run``. They are kept and reused (started as needed, never more than
``threads``): starting a thread per placement cost more than a small placement.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import queue
import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")

REMEMBERED = 10_000
"""Timed-out inputs kept (each a short key); the memory is cleared when full."""


class BudgetExceeded(Exception):
    """A placement ran longer than its budget (it is left to finish in its thread)."""


class SchedulerBusy(Exception):
    """Every placement thread stayed busy for a whole budget; retry later."""

    retryable = True


class Scheduler:
    """Runs functions in daemon threads, ``threads`` at a time, each awaited ``budget`` s."""

    def __init__(self, budget: float, threads: int) -> None:
        if budget <= 0 or threads < 1:
            raise ValueError("a scheduler needs a positive budget and at least one thread")
        self.budget = budget
        self.threads = threads
        self._slots: asyncio.Semaphore | None = None
        self._timed_out: dict[Hashable, str] = {}
        self.running = 0
        """Placements computing or queued now (timed-out ones included until they return)."""
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._threads = 0
        """Threads started. Kept >= :attr:`running`, so every job has an idle thread: those
        busy past their budget hold their own slots, and ``running`` counts them."""

    def timed_out(self, key: Hashable) -> str | None:
        """The message of an earlier run with the same inputs that ran out of budget."""
        return self._timed_out.get(key)

    async def run(self, func: Callable[..., T], *args: Any, key: Hashable = None) -> T:
        """``func(*args)`` in a thread; :class:`BudgetExceeded` when it takes too long."""
        slots = self._slots if self._slots is not None else self._new_slots()
        try:
            await asyncio.wait_for(slots.acquire(), self.budget)
        except TimeoutError:
            raise SchedulerBusy(f"all {self.threads} placement threads busy for "
                                f"{self.budget:g}s") from None
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()

        def finish(settle: Callable[[], None]) -> None:
            self.running -= 1
            slots.release()
            if done.done():
                return  # cancelled: the caller stopped waiting (budget, shutdown)
            settle()

        def work() -> None:
            settle: Callable[[], None]
            try:
                settle = functools.partial(done.set_result, func(*args))
            except BaseException as exc:  # handed to the waiting coroutine
                settle = functools.partial(done.set_exception, exc)
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(finish, settle)

        self.running += 1
        try:
            if self._threads < self.running:
                threading.Thread(target=self._serve, name="placement", daemon=True).start()
                self._threads += 1
        except BaseException:
            self.running -= 1
            slots.release()
            raise
        self._jobs.put(work)
        try:
            # On timeout wait_for cancels ``done``: the thread's answer is then dropped.
            return await asyncio.wait_for(done, self.budget)
        except TimeoutError:
            message = f"placement did not finish within its budget of {self.budget:g}s"
            self._remember(key, message)
            raise BudgetExceeded(message) from None

    def _serve(self) -> None:
        while True:
            self._jobs.get()()

    def _new_slots(self) -> asyncio.Semaphore:
        self._slots = asyncio.Semaphore(self.threads)
        return self._slots

    def _remember(self, key: Hashable, message: str) -> None:
        if key is None:
            return
        if len(self._timed_out) >= REMEMBERED:
            self._timed_out.clear()
        self._timed_out[key] = message
