"""ClusterClient's HTTP behaviour (429 retries, 401 refresh) against a local aiohttp app.

The app is not an API server: it only answers with the statuses under test.
Everything an API server does is tested in tests/e2e on the real fleet.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from aiohttp import web

from federation.contexts import client as kube
from federation.contexts import kubeconfig

pytestmark = pytest.mark.timeout(20)


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


async def test_throttled_calls_wait_retry_after_then_succeed() -> None:
    """A 429 with Retry-After is retried after that delay; the caller sees only the success."""
    calls: list[float] = []  # one entry per call

    async def handler(request: web.Request) -> web.Response:
        calls.append(0.0)
        if len(calls) < 3:
            return web.json_response({"reason": "TooManyRequests"}, status=429,
                                     headers={"Retry-After": "0"})
        return web.json_response({"kind": "Namespace", "metadata": {"name": "x"}})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/x", handler)
    runner, url = await serve(app)
    try:
        async with kube.connect(kubeconfig.Context(name="t", server=url)) as c:
            answer = await c.get(kube.NAMESPACES, "x")
        assert answer["metadata"]["name"] == "x"
        assert len(calls) == 3
    finally:
        await runner.cleanup()


async def test_throttling_gives_up_after_max_retries() -> None:
    """Past max_retries the 429 surfaces as a retryable ApiError."""
    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"reason": "TooManyRequests", "message": "slow down"},
                                 status=429, headers={"Retry-After": "0"})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/x", handler)
    runner, url = await serve(app)
    try:
        settings = kube.ClientSettings(max_retries=2)
        async with kube.connect(kubeconfig.Context(name="t", server=url), settings) as c:
            with pytest.raises(kube.ApiError) as error:
                await c.get(kube.NAMESPACES, "x")
        assert error.value.status == 429 and error.value.retryable
    finally:
        await runner.cleanup()


async def test_401_reruns_the_exec_plugin_once_and_tokens_stay_out_of_errors(
        tmp_path: Path) -> None:
    """On 401 the exec plugin runs again and the call is retried; a second 401 surfaces
    without the token in the message."""
    counter = tmp_path / "runs"
    plugin = tmp_path / "plugin.sh"
    plugin.write_text(f"""#!/bin/sh
n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}
printf '{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",'
printf '"status":{{"token":"secret-%s"}}}}' $n
""")
    plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
    seen: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        if request.headers.get("Authorization") == "Bearer secret-2":
            return web.json_response({"metadata": {"name": "x"}})
        return web.json_response({"reason": "Unauthorized", "message": "no"}, status=401)

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/{name}", handler)
    runner, url = await serve(app)
    exec_config = {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin)}
    try:
        context = kubeconfig.Context(name="t", server=url, exec_config=exec_config)
        async with kube.connect(context) as c:
            assert (await c.get(kube.NAMESPACES, "x"))["metadata"]["name"] == "x"
            assert seen == ["Bearer secret-1", "Bearer secret-2"]
            counter.write_text("5")
            c.credentials.invalidate()
            with pytest.raises(kube.ApiError) as error:
                await c.get(kube.NAMESPACES, "y")
        assert error.value.status == 401
        assert "secret" not in str(error.value)
        assert json.loads(json.dumps(seen))[-2:] == ["Bearer secret-6", "Bearer secret-7"]
    finally:
        await runner.cleanup()


async def test_watches_never_take_the_connections_other_calls_need() -> None:
    """More watches open than ``pool_size`` allows, and a get still answers at once: a
    watch holds its connection for its life, so watches have a pool of their own (with
    one shared pool, the hub's informers outnumbering it made every other call time out
    in CI)."""
    import asyncio

    release = asyncio.Event()

    async def watch(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b'{"type": "BOOKMARK", "object": {"metadata": {}}}\n')
        await release.wait()
        return response

    async def namespaces(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch"):
            return await watch(request)
        return web.json_response({"kind": "Namespace", "metadata": {"name": "x"}})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces", namespaces)
    app.router.add_get("/api/v1/namespaces/x", namespaces)
    runner, url = await serve(app)
    try:
        settings = kube.ClientSettings(pool_size=2)
        async with kube.connect(kubeconfig.Context(name="t", server=url), settings) as c:
            async def follow() -> None:
                async for _ in c.watch(kube.NAMESPACES):
                    pass

            watches = [asyncio.create_task(follow()) for _ in range(5)]
            await asyncio.sleep(0)
            try:
                answer = await asyncio.wait_for(c.get(kube.NAMESPACES, "x"), timeout=5)
            finally:
                release.set()
            assert answer["metadata"]["name"] == "x"
            await asyncio.gather(*watches)
    finally:
        await runner.cleanup()


async def test_a_list_given_longer_still_fails_when_the_server_goes_silent() -> None:
    """A list allowed a longer bound than the client's own (the watch-cache first list)
    completes while its answer keeps coming, however long it takes in all, and fails
    after the client's own bound when the server sends nothing: a frozen member costs a
    long list no more than a short call."""
    import asyncio
    import contextlib
    import time

    release = asyncio.Event()

    async def trickle(request: web.Request) -> web.StreamResponse:
        if request.query.get("frozen"):
            await release.wait()  # sends nothing: the client gives up long before
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        for part in (b'{"kind": "NamespaceList", ', b'"metadata": {"resourceVersion": "7"}, ',
                     b'"items": []}'):
            await asyncio.sleep(0.25)  # each part within the 0.4 s bound, all after it
            with contextlib.suppress(ConnectionError):  # a client that gave up
                await response.write(part)
        return response

    app = web.Application()
    app.router.add_get("/api/v1/namespaces", trickle)
    runner, url = await serve(app)
    try:
        settings = kube.ClientSettings(request_timeout=0.4)
        async with kube.connect(kubeconfig.Context(name="t", server=url), settings) as c:
            answer = await c.list(kube.NAMESPACES, request_timeout=20)
            assert answer["metadata"]["resourceVersion"] == "7"
            with pytest.raises(kube.ClusterUnavailable):
                await c.list(kube.NAMESPACES, limit=500)  # the client's own bound
            started = time.monotonic()
            with pytest.raises(kube.ClusterUnavailable):
                await c.list(kube.NAMESPACES, request_timeout=20, frozen="1")
            assert time.monotonic() - started < 5
    finally:
        release.set()
        await runner.cleanup()


async def test_disable_compression_asks_for_plain_answers() -> None:
    """A context with kubectl's ``disable-compression`` asks for ``identity``; others take
    what aiohttp offers (gzip), as client-go does."""
    seen: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Accept-Encoding", ""))
        return web.json_response({"kind": "Namespace", "metadata": {"name": "x"}})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/x", handler)
    runner, url = await serve(app)
    try:
        for plain in (True, False):
            context = kubeconfig.Context(name="t", server=url, disable_compression=plain)
            async with kube.connect(context) as c:
                await c.get(kube.NAMESPACES, "x")
        assert seen[0] == "identity" and "gzip" in seen[1]
    finally:
        await runner.cleanup()
