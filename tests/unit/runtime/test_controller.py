"""Controllers: results and exceptions mean what they mean in controller-runtime."""

from __future__ import annotations

import asyncio

import pytest

from federation.contexts import client as kube
from federation.contexts.cache import Event
from federation.runtime import controller, metrics, queue, reconcile

pytestmark = pytest.mark.timeout(30)

REQUEST = reconcile.Request("member1", "ConfigMap", "default", "x")


def event(name: str, cluster: str = "member1") -> Event:
    return Event("ADDED", cluster, kube.CONFIGMAPS,
                 {"metadata": {"name": name, "namespace": "ns"}})


def test_request_prints_as_cluster_url() -> None:
    """Requests are printed cluster://cluster/kind/namespace/name."""
    assert str(REQUEST) == "cluster://member1/ConfigMap/default/x"
    assert reconcile.group_kind(kube.DEPLOYMENTS) == "Deployment.apps"


async def test_exceptions_are_counted_and_retried_without_killing_workers() -> None:
    """A reconcile that raises is retried with backoff until it succeeds; workers survive."""
    calls = 0
    succeeded = asyncio.Event()

    async def flaky(request: reconcile.Request) -> reconcile.Result | None:
        nonlocal calls
        calls += 1
        if calls < 4:
            raise RuntimeError("boom")
        succeeded.set()
        return None

    ctl = controller.Controller("flaky", flaky, workers=2)
    ctl.metrics = metrics.Metrics()
    ctl.queue.add(REQUEST)
    runner = asyncio.create_task(ctl.run())
    await succeeded.wait()
    await asyncio.sleep(0.02)
    assert ctl.errors == 3
    assert ctl.queue.failures(REQUEST) == 0  # forgotten after success
    errors = ctl.metrics.registry.get_sample_value(
        "federation_reconcile_errors_total", {"controller": "flaky", "cluster": "member1"})
    assert errors == 3
    ctl.shutdown()
    await asyncio.wait_for(runner, 1)


async def test_requeue_after_schedules_the_request_again() -> None:
    """Result(requeue_after=s) brings the request back after s seconds."""
    seen: list[float] = []
    twice = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def again(request: reconcile.Request) -> reconcile.Result | None:
        seen.append(loop.time())
        if len(seen) < 2:
            return reconcile.Result(requeue_after=0.1)
        twice.set()
        return None

    ctl = controller.Controller("again", again, workers=1)
    ctl.queue.add(REQUEST)
    runner = asyncio.create_task(ctl.run())
    await twice.wait()
    assert seen[1] - seen[0] >= 0.09
    ctl.shutdown()
    await asyncio.wait_for(runner, 1)


async def test_watch_maps_events_to_requests_with_predicates() -> None:
    """A watch queues the object's own request, or the mapped ones, and honours its predicate."""
    ctl = controller.Controller("w", lambda r: asyncio.sleep(0, None),
                                queue_settings=queue.QueueSettings())
    own = controller.Watch(kube.CONFIGMAPS, "members")
    mapped = controller.Watch(
        kube.CONFIGMAPS, "hub", map=lambda e: [reconcile.Request("hub", "X", "", "owner")],
        predicate=lambda e: e.obj["metadata"]["name"] != "skip")
    ctl.handler(own)(event("a"))
    ctl.handler(mapped)(event("b"))
    ctl.handler(mapped)(event("skip"))
    assert len(ctl.queue) == 2
    assert await ctl.queue.get() == reconcile.Request("member1", "ConfigMap", "ns", "a")
    assert await ctl.queue.get() == reconcile.Request("hub", "X", "", "owner")
    assert own.applies_to("member1", False, True) and not own.applies_to("hub", True, False)
    assert controller.Watch(kube.CONFIGMAPS, ("member2",)).applies_to("member2", False, True)
