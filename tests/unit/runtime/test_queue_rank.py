"""Ranks within a priority (a template's schedulePriority), and the bound that keeps a rank
from starving anyone, on virtual time."""

from __future__ import annotations

import asyncio

import pytest

from federation.runtime import queue
from federation.runtime.queue import LOW_PRIORITY
from tests.unit.runtime.virtual import run

pytestmark = pytest.mark.timeout(20)

RANKS = {"low": 0, "mid": 5, "high": 1000}


def rank(key: str) -> int:
    return RANKS.get(key.split("-")[0], 0)


def test_higher_rank_first_then_first_come() -> None:
    async def main() -> list[str]:
        q: queue.WorkQueue[str] = queue.WorkQueue("t", rank=rank)
        for key in ("low-1", "mid-1", "high-1", "low-2", "high-2"):
            q.add(key)
        return [await q.get() for _ in range(5)]

    assert run(main()) == ["high-1", "high-2", "mid-1", "low-1", "low-2"]


def test_priority_still_comes_before_rank() -> None:
    """A change (default priority) of rank 0 goes before the start's backlog of any rank."""
    async def main() -> list[str]:
        q: queue.WorkQueue[str] = queue.WorkQueue("t", rank=rank)
        q.add("high-backlog", LOW_PRIORITY)
        q.add("low-change")
        return [await q.get() for _ in range(2)]

    assert run(main()) == ["low-change", "high-backlog"]


def test_a_flood_of_high_ranks_cannot_starve_a_low_one() -> None:
    """The attack: a tenant keeps high-ranked keys queued without pause (one worker, each
    reconcile 1 s, a new high key for every one handed out). The other namespace's key is
    handed out once it has waited max_wait (60 s), not never."""

    async def main() -> float:
        q: queue.WorkQueue[str] = queue.WorkQueue("t", rank=rank)
        loop = asyncio.get_running_loop()
        q.add("low-victim")
        for i in range(5):
            q.add(f"high-{i}")
        flood = 5
        while True:
            key = await q.get()
            if key == "low-victim":
                return loop.time()
            await asyncio.sleep(1.0)
            q.done(key)
            q.add(f"high-{flood}")
            flood += 1
            assert loop.time() < 3600, "starved"

    handed_out_at = run(main())
    assert 60.0 <= handed_out_at <= 61.0


def test_without_a_flood_rank_order_holds_past_max_wait() -> None:
    """Overdue keys go oldest first; a key not overdue is still ordered by rank."""
    async def main() -> list[str]:
        q: queue.WorkQueue[str] = queue.WorkQueue("t", queue.QueueSettings(max_wait=10),
                                                  rank=rank)
        q.add("low-1")
        await asyncio.sleep(11)
        q.add("high-1")
        q.add("mid-1")
        return [await q.get() for _ in range(3)]

    assert run(main()) == ["low-1", "high-1", "mid-1"]
