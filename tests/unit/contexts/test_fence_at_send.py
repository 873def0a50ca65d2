"""The write permit is checked when the request is sent, not when it was asked for.

Finding 20 of issue 20: a leader frozen (SIGSTOP) past its lease got two writes out on
resume, because they had passed the fence and were then waiting for a pooled connection.
These tests recreate that window deterministically against a local aiohttp app that
records what reaches it: the lease lapses (a fake clock, moved by the test) while a write
waits for a connection, for the rate limiter, or between getting its connection and
writing its body, and the write must never reach the server.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from federation.contexts import client as kube
from federation.contexts import kubeconfig, ratelimit

# Async fixtures run in the session's loop (pyproject); the tests must share it.
pytestmark = [pytest.mark.timeout(20), pytest.mark.asyncio(loop_scope="session")]

DEADLINE = 110.0


class Clock:
    """The monotonic clock the fence reads; the test moves it (a freeze is an assignment)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.read = asyncio.Event()

    def __call__(self) -> float:
        self.read.set()
        return self.now


class Server:
    """Answers every call with an object, records (method, path); GET /hold waits for
    :attr:`release` so that it holds its connection; :attr:`throttle` writes are
    answered 429 (Retry-After 0) after calling it, once."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.throttle: Callable[[], None] | None = None
        self.holding = asyncio.Event()
        self.release = asyncio.Event()
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append((request.method, request.path))
        if request.path.endswith("/hold"):
            self.holding.set()
            await self.release.wait()
        if self.throttle is not None and request.method != "GET":
            self.throttle()
            self.throttle = None
            return web.json_response({}, status=429, headers={"Retry-After": "0"})
        return web.json_response({"metadata": {"name": "x", "namespace": "ns"}})

    def writes(self) -> list[tuple[str, str]]:
        return [(m, p) for m, p in self.seen if m != "GET"]


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    recorder = Server()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", recorder.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    recorder.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield recorder
    finally:
        recorder.release.set()
        await runner.cleanup()


def fenced(url: str, clock: Clock, settings: kube.ClientSettings | None = None
           ) -> kube.ClusterClient:
    client = kube.ClusterClient(kubeconfig.Context(name="hub", server=url), settings)
    fence = kube.Fence(clock)
    fence.extend(DEADLINE)
    client.fence = fence
    return client


def body() -> dict[str, object]:
    return {"metadata": {"name": "x", "namespace": "ns"}, "data": {}}


async def settle() -> None:
    """Let every task run until it waits on something only the test can give."""
    for _ in range(50):
        await asyncio.sleep(0)


@pytest.mark.parametrize("verb", ["create", "delete"])
async def test_a_write_that_waited_for_a_pooled_connection_past_the_lease_is_not_sent(
        server: Server, verb: str) -> None:
    """The attack of finding 20: the only pooled connection is busy, a write passes the
    fence and queues for it, the leader is frozen past its renew deadline, and on resume
    the connection frees up. The write must be refused (NotLeader), never sent: with a
    body (create) and without one (delete)."""
    clock = Clock()
    client = fenced(server.url, clock, kube.ClientSettings(pool_size=1))
    try:
        holder = asyncio.create_task(client.request("GET", "/api/v1/hold"))
        await server.holding.wait()
        clock.read.clear()
        write = asyncio.create_task(client.create(kube.CONFIGMAPS, body()) if verb == "create"
                                    else client.delete(kube.CONFIGMAPS, "x", "ns"))
        await clock.read.wait()  # it consulted the fence (still valid) ...
        await settle()           # ... and now waits for the one connection
        assert not write.done()
        clock.now = DEADLINE + 15.0  # frozen past the lease; SIGCONT
        server.release.set()
        await holder
        with pytest.raises(kube.NotLeader, match=r"not sent.*15\.0s late"):
            await write
        assert server.writes() == [], "a write was sent after the lease had lapsed"
        await client.get(kube.CONFIGMAPS, "x", "ns")  # the pool is still usable for reads
    finally:
        await client.close()


async def test_a_write_that_waited_for_the_rate_limiter_past_the_lease_is_not_sent(
        server: Server) -> None:
    """The same with the client-side rate limiter as the wait."""
    clock = Clock()
    client = fenced(server.url, clock)
    granted = asyncio.Event()

    class Held(ratelimit.TokenBucket):
        async def acquire(self) -> None:
            await granted.wait()

    client.bucket = Held(1.0, 1)
    try:
        write = asyncio.create_task(client.replace(kube.CONFIGMAPS, body()))
        await settle()
        clock.now = DEADLINE + 0.1
        granted.set()
        with pytest.raises(kube.NotLeader):
            await write
        assert server.writes() == []
    finally:
        await client.close()


async def test_the_body_is_not_written_when_the_lease_lapses_after_the_connection_is_taken(
        server: Server) -> None:
    """aiohttp writes a request's headers and body in a task of their own, after the
    connection is taken: anything on the loop may run in between (a stalled callback, a
    resumed process's backlog). A lapse there refuses the write too; the server sees
    nothing (the headers go out with the body, so neither is sent)."""
    clock = Clock()
    trace = aiohttp.TraceConfig()

    async def lapse(session: aiohttp.ClientSession, context: types.SimpleNamespace,
                    params: aiohttp.TraceRequestHeadersSentParams) -> None:
        if params.method != "GET":
            clock.now = DEADLINE + 0.5

    trace.on_request_headers_sent.append(lapse)
    client = kube.ClusterClient(kubeconfig.Context(name="hub", server=server.url),
                                trace_configs=[trace])
    fence = kube.Fence(clock)
    fence.extend(DEADLINE)
    client.fence = fence
    try:
        for write in (client.create(kube.CONFIGMAPS, body()),
                      client.patch(kube.CONFIGMAPS, "x", {"data": {}}, namespace="ns")):
            clock.now = 100.0
            with pytest.raises(kube.NotLeader, match=r"0\.5s late"):
                await write
        assert server.writes() == []
        await client.get(kube.CONFIGMAPS, "x", "ns")
        assert server.seen == [("GET", "/api/v1/namespaces/ns/configmaps/x")]
    finally:
        await client.close()


async def test_writes_within_the_lease_are_sent_once_through_every_check(
        server: Server) -> None:
    """The checks refuse nothing valid: each verb reaches the server once."""
    clock = Clock()
    client = fenced(server.url, clock, kube.ClientSettings(pool_size=1))
    try:
        await client.create(kube.CONFIGMAPS, body())
        await client.replace(kube.CONFIGMAPS, body())
        await client.patch(kube.CONFIGMAPS, "x", {"data": {}}, namespace="ns")
        await client.apply(kube.CONFIGMAPS, body(), "federation")
        await client.delete(kube.CONFIGMAPS, "x", "ns")
        assert [m for m, _ in server.writes()] == ["POST", "PUT", "PATCH", "PATCH", "DELETE"]
    finally:
        await client.close()


class Owner:
    """A second kind of ownership (as shard ownership would be): only namespace ``mine``."""

    def check(self, cluster: str, method: str, path: str) -> None:
        if "/namespaces/mine/" not in path:
            raise kube.WriteRefused(cluster, f"{method} {path} refused, not sent: not ours")


async def test_a_second_permit_is_consulted_beside_leadership(server: Server) -> None:
    """Permits compose: a write passes only when every one of them allows it."""
    clock = Clock()
    client = fenced(server.url, clock)
    assert client.fence is not None
    client.fence = kube.AllOf(client.fence, Owner())
    try:
        mine = {"metadata": {"name": "x", "namespace": "mine"}}
        await client.create(kube.CONFIGMAPS, mine)
        with pytest.raises(kube.WriteRefused, match="not ours") as refused:
            await client.create(kube.CONFIGMAPS, body())
        assert not refused.value.retryable
        clock.now = DEADLINE
        with pytest.raises(kube.NotLeader):
            await client.create(kube.CONFIGMAPS, mine)
        assert server.writes() == [("POST", "/api/v1/namespaces/mine/configmaps")]
    finally:
        await client.close()


async def test_a_throttled_write_is_not_sent_again_once_the_lease_lapsed(
        server: Server) -> None:
    """A write answered 429 (Retry-After) is retried by the client; the lease lapses
    while the throttled answer is on its way. The retry must be refused, not sent: the
    server sees the one attempt it throttled."""
    clock = Clock()
    client = fenced(server.url, clock)

    def lapse() -> None:
        clock.now = DEADLINE + 2.0  # while the throttled answer travels

    server.throttle = lapse
    try:
        with pytest.raises(kube.NotLeader, match=r"not sent.*2\.0s late"):
            await client.create(kube.CONFIGMAPS, body())
        assert server.writes() == [("POST", "/api/v1/namespaces/ns/configmaps")]
    finally:
        await client.close()


@pytest.mark.parametrize("verb", ["create", "delete"])
async def test_a_pause_between_the_last_check_and_the_socket_is_reported(
        server: Server, verb: str, caplog: pytest.LogCaptureFixture) -> None:
    """The window no client can close: the process is paused after the last clock
    reading allowed the write and before its bytes reach the socket, and resumes past
    the lease. The write goes out (it was past every check); the client says so, naming
    the write, so a late write is never silent: with a body (the pause as the body is
    written) and without one (as the headers are)."""
    clock = Clock()
    trace = aiohttp.TraceConfig()

    async def pause(session: aiohttp.ClientSession, context: types.SimpleNamespace,
                    params: Any) -> None:
        if params.method != "GET":
            clock.now = DEADLINE + 10.0

    (trace.on_request_chunk_sent if verb == "create" else
     trace.on_request_headers_sent).append(pause)
    client = kube.ClusterClient(kubeconfig.Context(name="hub", server=server.url),
                                trace_configs=[trace])
    fence = kube.Fence(clock)
    fence.extend(DEADLINE)
    client.fence = fence
    try:
        with caplog.at_level("WARNING", logger="federation.client"):
            if verb == "create":
                await client.create(kube.CONFIGMAPS, body())
            else:
                await client.delete(kube.CONFIGMAPS, "x", "ns")
            await settle()
        method, path = (("POST", "/api/v1/namespaces/ns/configmaps") if verb == "create"
                        else ("DELETE", "/api/v1/namespaces/ns/configmaps/x"))
        assert server.writes() == [(method, path)]
        late = [r.getMessage() for r in caplog.records if kube.SENT_LATE in r.getMessage()]
        assert late == [f"hub: {method} {path} {kube.SENT_LATE} (the process was paused "
                        "after its last check, before or after the socket write; "
                        "docs/runtime.md, 'Leader election')"]
    finally:
        await client.close()


async def test_writes_sent_within_the_lease_report_nothing_late(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    """The second look after the socket is silent for writes sent in time."""
    clock = Clock()
    client = fenced(server.url, clock)
    try:
        with caplog.at_level("WARNING", logger="federation.client"):
            await client.create(kube.CONFIGMAPS, body())
            await client.delete(kube.CONFIGMAPS, "x", "ns")
            await settle()
        assert not [r for r in caplog.records if kube.SENT_LATE in r.getMessage()]
        assert len(server.writes()) == 2
    finally:
        await client.close()
