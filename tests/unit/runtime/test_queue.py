"""The work queue: de-duplication, one worker per key, backoff, requeue-after, shutdown."""

from __future__ import annotations

import asyncio

import pytest

from federation.runtime import queue

pytestmark = pytest.mark.timeout(30)


async def test_adding_a_waiting_key_twice_queues_it_once() -> None:
    """Keys already waiting are not queued again."""
    q: queue.WorkQueue[str] = queue.WorkQueue("t")
    for _ in range(3):
        q.add("a")
    q.add("b")
    assert len(q) == 2
    assert await q.get() == "a"
    assert await q.get() == "b"


async def test_a_key_being_processed_is_not_handed_out_again_until_done() -> None:
    """A key added while a worker holds it waits for done(), then comes back once."""
    q: queue.WorkQueue[str] = queue.WorkQueue("t")
    q.add("a")
    key = await q.get()
    q.add("a")
    q.add("a")
    assert len(q) == 0
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(q.get(), 0.05)
    q.done(key)
    assert len(q) == 1
    assert await q.get() == "a"


async def test_concurrent_workers_never_share_a_key() -> None:
    """With many workers and a burst of adds, a key is held by at most one worker at a time."""
    q: queue.WorkQueue[int] = queue.WorkQueue("t")
    holding: set[int] = set()
    overlaps = 0
    processed = 0

    async def worker() -> None:
        nonlocal overlaps, processed
        while True:
            key = await q.get()
            if key in holding:
                overlaps += 1
            holding.add(key)
            await asyncio.sleep(0.001)
            holding.discard(key)
            processed += 1
            q.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(8)]
    for round_ in range(20):
        for key in range(5):
            q.add(key)
        await asyncio.sleep(0.0005 * (round_ % 3))
    await asyncio.sleep(0.1)
    for task in workers:
        task.cancel()
    assert overlaps == 0
    assert 5 <= processed < 100  # bursts were merged


async def test_rate_limited_retries_back_off_exponentially_and_forget_resets() -> None:
    """Per-key delay doubles from 5 ms; forget() starts it over."""
    limiter: queue.RateLimiter[str] = queue.RateLimiter(queue.QueueSettings())
    delays = [limiter.when("k") for _ in range(5)]
    assert delays == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08])
    assert limiter.failures("k") == 5
    limiter.forget("k")
    assert limiter.when("k") == pytest.approx(0.005)


def test_backoff_is_capped_at_max_delay() -> None:
    """The per-key delay stops at 1000 s."""
    limiter: queue.RateLimiter[str] = queue.RateLimiter(queue.QueueSettings())
    assert max(limiter.when("k") for _ in range(40)) == pytest.approx(1000.0)


def test_overall_bucket_limits_retries_of_many_keys() -> None:
    """Past the burst, retries of different keys are spaced by the overall qps."""
    limiter: queue.RateLimiter[int] = queue.RateLimiter(queue.QueueSettings(qps=10, burst=3))
    delays = [limiter.when(key) for key in range(6)]
    assert delays[:3] == [0.005, 0.005, 0.005]
    assert delays[3] == pytest.approx(0.1, abs=0.01)
    assert delays[5] == pytest.approx(0.3, abs=0.01)


async def test_add_after_keeps_the_earliest_time() -> None:
    """A later add_after never delays a scheduled key; an earlier one advances it."""
    q: queue.WorkQueue[str] = queue.WorkQueue("t")
    q.add_after("a", 0.3)
    q.add_after("a", 5.0)
    q.add_after("a", 0.05)
    assert q.waiting == 1
    assert await asyncio.wait_for(q.get(), 0.2) == "a"
    assert q.waiting == 0


async def test_shutdown_releases_waiting_workers() -> None:
    """Workers blocked in get() raise ShutDown when the queue shuts down."""
    q: queue.WorkQueue[str] = queue.WorkQueue("t")
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0.01)
    q.shutdown()
    with pytest.raises(queue.ShutDown):
        await getter
    q.add("a")
    assert len(q) == 0
