"""The priority queue: changes before the state found at start, on virtual time.

Each test runs on :class:`~tests.unit.runtime.virtual.VirtualTimeLoop`: delays and
backoff elapse without any wall-clock wait.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from federation.contexts import cache
from federation.contexts import client as kube
from federation.runtime import controller, queue, reconcile
from federation.runtime.queue import DEFAULT_PRIORITY, LOW_PRIORITY
from tests.unit.clients import Unserved
from tests.unit.runtime.virtual import run

pytestmark = pytest.mark.timeout(20)


def keys(count: int) -> list[str]:
    return [f"old-{i:04d}" for i in range(count)]


def test_a_new_item_goes_before_a_thousand_from_the_initial_list() -> None:
    """1,000 keys from a first list are waiting; one new key is the next handed out,
    and the old ones follow in the order they came."""

    async def main() -> tuple[list[str], int]:
        q: queue.WorkQueue[str] = queue.WorkQueue("t")
        for key in keys(1000):
            q.add(key, LOW_PRIORITY)
        q.add("new")
        first, priority = await q.get_with_priority()
        q.done(first)
        rest = [await q.get() for _ in range(1000)]
        assert len(q) == 0
        return [first, *rest], priority

    order, priority = run(main())
    assert order[0] == "new" and priority == DEFAULT_PRIORITY
    assert order[1:] == keys(1000)


def test_a_waiting_low_key_added_again_at_high_priority_is_promoted_not_duplicated() -> None:
    """De-duplication holds across priorities: the key is queued once, now high."""

    async def main() -> list[str]:
        q: queue.WorkQueue[str] = queue.WorkQueue("t")
        for key in keys(3):
            q.add(key, LOW_PRIORITY)
        q.add("old-0002")
        q.add("old-0002", LOW_PRIORITY)  # a lower add never demotes
        assert len(q) == 3 and q.adds == 3
        assert q.depth_by_priority() == {LOW_PRIORITY: 2, DEFAULT_PRIORITY: 1}
        return [await q.get() for _ in range(3)]

    assert run(main()) == ["old-0002", "old-0000", "old-0001"]


def test_a_key_changed_while_held_comes_back_with_the_higher_priority() -> None:
    """Added at high priority while a worker holds it (low): after done() it is queued
    once, ahead of the low backlog."""

    async def main() -> list[str]:
        q: queue.WorkQueue[str] = queue.WorkQueue("t")
        for key in keys(3):
            q.add(key, LOW_PRIORITY)
        held = await q.get()
        q.add(held)
        q.add(held, LOW_PRIORITY)
        assert len(q) == 2
        q.done(held)
        return [await q.get() for _ in range(3)]

    assert run(main()) == ["old-0000", "old-0001", "old-0002"]


def test_add_after_keeps_the_earliest_time_and_the_highest_priority() -> None:
    """A key due in 5 s at high priority (asked later for 9 s at low) is handed out at
    5 s, before 1,000 low keys still waiting."""

    async def main() -> tuple[str, float]:
        loop = asyncio.get_running_loop()
        q: queue.WorkQueue[str] = queue.WorkQueue("t")
        q.add_after("soon", 5.0)
        q.add_after("soon", 9.0, LOW_PRIORITY)
        assert q.waiting == 1
        for key in keys(1000):
            q.add(key, LOW_PRIORITY)
        held = await q.get()  # one low key in hand; the rest wait
        assert held == "old-0000"
        q.done(held)
        await asyncio.sleep(5.0)
        return await q.get(), loop.time()

    key, at = run(main())
    assert key == "soon" and at == 5.0


def test_backoff_on_virtual_time() -> None:
    """Retries of a failing key wait 5 ms, 10 ms, 20 ms (doubling) in virtual time."""

    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        q: queue.WorkQueue[str] = queue.WorkQueue("t")
        times = []
        q.add("k", LOW_PRIORITY)
        for _ in range(3):
            key, priority = await q.get_with_priority()
            times.append(loop.time())
            assert priority == LOW_PRIORITY  # retries keep the priority
            q.done(key)
            q.add_rate_limited(key, priority)
        return times

    assert run(main()) == pytest.approx([0.0, 0.005, 0.015])


def test_controller_reconciles_a_watch_event_before_the_initial_list() -> None:
    """An informer's first list of 1,000 objects, then one object created: the
    controller's single worker reconciles the new one first; a failed initial-list
    request is retried at low priority, after the new one too."""

    async def main() -> list[str]:
        seen: list[str] = []
        finished = asyncio.Event()

        async def reconcile_func(request: reconcile.Request) -> reconcile.Result | None:
            seen.append(request.name)
            if len(seen) == 1002:
                finished.set()
            if request.name == "old-0000" and seen.count("old-0000") == 1:
                raise RuntimeError("first attempt fails")
            return None

        ctl = controller.Controller("t", reconcile_func, workers=1)
        watch = ctl.watch(kube.CONFIGMAPS, clusters="all").watches[0]
        informer = cache.Informer(_NoClient(), kube.CONFIGMAPS,
                                  cluster="member1")
        informer.add_handler(ctl.handler(watch))
        await informer._replace([_config_map(k) for k in keys(1000)])  # the first list
        informer.lists += 1
        informer._apply({"type": "ADDED", "object": _config_map("new")})
        assert ctl.queue.depth_by_priority() == {LOW_PRIORITY: 1000, DEFAULT_PRIORITY: 1}
        task = asyncio.get_running_loop().create_task(ctl.run())
        await finished.wait()
        ctl.shutdown()
        await task
        return seen

    seen = run(main())
    assert seen[0] == "new"
    assert seen[1] == "old-0000" and seen.count("old-0000") == 2
    assert sorted(seen[1:]) == sorted([*keys(1000), "old-0000"])


async def nothing(request: reconcile.Request) -> reconcile.Result | None:
    return None


def test_a_handler_added_late_gets_the_cache_at_low_priority() -> None:
    """A controller attached to a running informer is replayed its objects as initial."""
    ctl = controller.Controller("t", nothing, workers=1)
    watch = ctl.watch(kube.CONFIGMAPS, clusters="all").watches[0]
    informer = cache.Informer(_NoClient(), kube.CONFIGMAPS,
                              cluster="member1")
    informer.store.put(_config_map("a"))
    informer.add_handler(ctl.handler(watch))
    assert ctl.queue.depth_by_priority() == {LOW_PRIORITY: 1}


def test_a_relist_is_not_initial() -> None:
    """Differences found by a relist (after a 410) are changes: default priority."""
    events: list[cache.Event] = []
    informer = cache.Informer(_NoClient(), kube.CONFIGMAPS,
                              cluster="member1")
    informer.add_handler(events.append)
    asyncio.run(informer._replace([_config_map("a")]))
    informer.lists += 1
    asyncio.run(informer._replace([_config_map("a"), _config_map("b")]))
    assert [(e.obj["metadata"]["name"], e.initial) for e in events] == [("a", True),
                                                                          ("b", False)]


class _NoClient(Unserved):
    name = "member1"


def _config_map(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": "1"}}


