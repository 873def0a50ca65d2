"""The write fence at the client layer: a lapsed fence means the write is never sent.

The server is a local aiohttp app that records what reaches it; time is a fake
clock, so "after the lease lapsed" is an assignment, not a wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from federation.contexts import client as kube
from federation.contexts import kubeconfig
from federation.runtime import controller, reconcile

# Async fixtures run in the session's loop (pyproject); the tests must share it.
pytestmark = [pytest.mark.timeout(20), pytest.mark.asyncio(loop_scope="session")]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[tuple[str, str]]]]:
    """An app answering every call with {} and recording (method, User-Agent)."""
    seen: list[tuple[str, str]] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append((request.method, request.headers.get("User-Agent", "")))
        return web.json_response({"metadata": {"name": "x", "namespace": "ns"}})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", seen
    finally:
        await runner.cleanup()


def body() -> dict[str, object]:
    return {"metadata": {"name": "x", "namespace": "ns"}, "data": {}}


async def test_writes_pass_while_valid_and_are_refused_unsent_once_lapsed(
        server: tuple[str, list[tuple[str, str]]]) -> None:
    """Every write verb checks the fence right before sending; reads never do."""
    url, seen = server
    clock = Clock()
    fence = kube.Fence(clock)
    fence.extend(clock.now + 10)
    async with kube.connect(kubeconfig.Context(name="hub", server=url)) as client:
        client.fence = fence
        await client.create(kube.CONFIGMAPS, body())
        await client.patch(kube.CONFIGMAPS, "x", {"data": {}}, namespace="ns")
        assert [m for m, _ in seen] == ["POST", "PATCH"]

        clock.now += 10.5  # frozen past the renew deadline, or renewals failed
        calls = [client.create(kube.CONFIGMAPS, body()),
                 client.replace(kube.CONFIGMAPS, body()),
                 client.patch(kube.CONFIGMAPS, "x", {"data": {}}, namespace="ns"),
                 client.apply(kube.CONFIGMAPS, body(), "federation"),
                 client.delete(kube.CONFIGMAPS, "x", "ns")]
        for call in calls:
            with pytest.raises(kube.NotLeader) as refused:
                await call
            assert not refused.value.retryable
            assert "not sent" in str(refused.value) and "0.5s late" in str(refused.value)
        assert len(seen) == 2, "a refused write reached the server"
        await client.get(kube.CONFIGMAPS, "x", "ns")  # reads are not fenced
        assert len(seen) == 3


async def test_a_new_fence_is_closed_and_a_revoked_one_never_reopens(
        server: tuple[str, list[tuple[str, str]]]) -> None:
    """Before election nothing is written; after a loss, extending changes nothing."""
    url, seen = server
    clock = Clock()
    fence = kube.Fence(clock)
    async with kube.connect(kubeconfig.Context(name="m1", server=url)) as client:
        client.fence = fence
        with pytest.raises(kube.NotLeader, match="not elected"):
            await client.create(kube.CONFIGMAPS, body())
        fence.extend(clock.now + 10)
        fence.revoke("leadership lost: the lease is held by 'rival'")
        fence.extend(clock.now + 10)
        with pytest.raises(kube.NotLeader, match="rival"):
            await client.delete(kube.CONFIGMAPS, "x", "ns")
    assert seen == []


async def test_every_request_names_the_process_in_its_user_agent(
        server: tuple[str, list[tuple[str, str]]]) -> None:
    """The audit log attributes writes by User-Agent: fedctl/<version> (<identity>)."""
    url, seen = server
    async with kube.connect(kubeconfig.Context(name="hub", server=url)) as client:
        await client.get(kube.CONFIGMAPS, "x", "ns")
        client.user_agent = kube.user_agent("host_42_abcd")
        await client.create(kube.CONFIGMAPS, body())
    assert seen[0][1].startswith("fedctl/") and "(" not in seen[0][1]
    assert seen[1][1].startswith("fedctl/") and seen[1][1].endswith(" (host_42_abcd)")


async def test_a_fenced_reconcile_is_not_retried() -> None:
    """A write refused by the fence ends the reconcile: no backoff loop on a lost leader."""
    calls = 0
    called = asyncio.Event()
    refused = kube.NotLeader("hub", "PATCH /x refused, not sent")

    async def writes(request: reconcile.Request) -> reconcile.Result | None:
        nonlocal calls
        calls += 1
        called.set()
        raise refused

    ctl = controller.Controller("fenced", writes, workers=1)
    request = reconcile.Request("hub", "ConfigMap", "ns", "x")
    ctl.queue.add(request)
    runner = asyncio.create_task(ctl.run())
    await called.wait()
    for _ in range(20):
        await asyncio.sleep(0)
    assert ctl.queue.failures(request) == 0 and len(ctl.queue) == 0
    assert controller.fenced(refused) and not controller.fenced(RuntimeError())
    ctl.shutdown()
    await asyncio.wait_for(runner, 1)
    assert calls == 1
