"""Secure metrics: HTTPS, TokenReview, SubjectAccessReview, caching and budgets.

The hub is a local aiohttp app answering the two review APIs the way
kube-apiserver does for three tokens: one of a user allowed to get /metrics,
one of a user who is not, and one of nobody. The real hub is exercised in
tests/e2e/test_runtime_manager.py.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from cryptography.hazmat.primitives import serialization

from federation.contexts import clusters, kubeconfig
from federation.runtime import auth, manager
from tests.unit.clients import Unserved

pytestmark = pytest.mark.timeout(20)
in_session_loop = pytest.mark.asyncio(loop_scope="session")
"""Async fixtures run in the session's loop (pyproject); the tests using them must too."""

ALLOWED = "token-of-alice-who-may-scrape"
DENIED = "token-of-bob-who-may-not"
USERS = {ALLOWED: "alice", DENIED: "bob"}


class Hub:
    """The review APIs of a hub; counts reviews and can go down."""

    def __init__(self) -> None:
        self.reviews: list[str] = []
        self.down = False

    async def token_review(self, request: web.Request) -> web.Response:
        if self.down:
            return web.json_response({"reason": "ServiceUnavailable"}, status=503)
        body = await request.json()
        self.reviews.append("TokenReview")
        user = USERS.get(body["spec"]["token"])
        status: dict[str, Any] = {"authenticated": False, "error": "invalid bearer token"}
        if user:
            status = {"authenticated": True, "user": {
                "username": user, "uid": f"uid-{user}", "groups": ["system:authenticated"],
                "extra": {"scopes": ["a"]}}}
        return web.json_response({**body, "status": status}, status=201)

    async def access_review(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.reviews.append("SubjectAccessReview")
        spec = body["spec"]
        allowed = (spec["user"] == "alice" and spec["extra"] == {"scopes": ["a"]}
                   and spec["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"})
        return web.json_response({**body, "status": {"allowed": allowed}}, status=201)


@pytest.fixture
async def secured() -> AsyncIterator[tuple[Hub, str]]:
    """A manager serving secure metrics (self-signed) against the fake hub."""
    hub = Hub()
    app = web.Application()
    app.router.add_post("/apis/authentication.k8s.io/v1/tokenreviews", hub.token_review)
    app.router.add_post("/apis/authorization.k8s.io/v1/subjectaccessreviews",
                        hub.access_review)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    context = kubeconfig.Context(name="hub", server=f"http://127.0.0.1:{runner.addresses[0][1]}")
    cluster_set = clusters.ClusterSet([clusters.Cluster("hub", is_hub=True, context=context)])
    mgr = manager.Manager(cluster_set, manager.ManagerSettings(
        metrics_bind_address="127.0.0.1:0", metrics_secure=True,
        metrics_auth=auth.AuthSettings(review_burst=6, review_qps=0.001)))
    await mgr._serve_metrics()
    try:
        yield hub, f"https://127.0.0.1:{mgr.ports['metrics']}"
    finally:
        await mgr.close()
        await runner.cleanup()


async def scrape(url: str, token: str | None = None, path: str = "/metrics"
                 ) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as session, \
            session.get(url + path, headers=headers, ssl=False) as response:
        return response.status, await response.text()


@in_session_loop
async def test_401_without_or_with_a_bad_token_403_when_not_allowed_200_when_allowed(
        secured: tuple[Hub, str], caplog: pytest.LogCaptureFixture) -> None:
    """The four answers, and the token never appears in a log line or a response."""
    caplog.set_level(logging.DEBUG)
    _, url = secured
    assert (await scrape(url))[0] == 401
    assert (await scrape(url, "made-up-token"))[0] == 401
    status, text = await scrape(url, DENIED)
    assert status == 403 and "bob" in text and DENIED not in text
    status, text = await scrape(url, ALLOWED)
    assert status == 200 and "federation_leader" in text
    status, _ = await scrape(url, ALLOWED, "/debug/clusters")
    assert status == 403  # a different non-resource URL, not granted
    for token in (ALLOWED, DENIED, "made-up-token"):
        assert token not in caplog.text
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientError):  # plain HTTP is not served
            await session.get(url.replace("https", "http") + "/metrics")


@in_session_loop
async def test_answers_are_cached_and_a_hub_outage_is_503_not_cached(
        secured: tuple[Hub, str]) -> None:
    """Repeated scrapes cost no more reviews; a review the hub cannot answer is 503 and
    is asked again once the hub is back."""
    hub, url = secured
    for _ in range(3):
        assert (await scrape(url, ALLOWED))[0] == 200
    assert hub.reviews == ["TokenReview", "SubjectAccessReview"]
    hub.down = True
    assert (await scrape(url, DENIED))[0] == 503
    hub.down = False
    assert (await scrape(url, DENIED))[0] == 403


@in_session_loop
async def test_a_flood_of_made_up_tokens_is_answered_429_without_reaching_the_hub(
        secured: tuple[Hub, str]) -> None:
    """Reviews have a budget of their own: past it nothing is sent; cached users still pass."""
    hub, url = secured
    assert (await scrape(url, ALLOWED))[0] == 200  # 2 reviews of the 6
    codes = [(await scrape(url, f"made-up-{i}"))[0] for i in range(10)]
    assert codes[:4] == [401] * 4 and set(codes[4:]) == {429}
    assert len(hub.reviews) == 6
    assert (await scrape(url, ALLOWED))[0] == 200  # cached: no review needed


class Reviews(Unserved):
    """A stand-in for the review client: answers from a table, counts calls."""

    def __init__(self) -> None:
        self.calls = 0

    async def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        if path.endswith("tokenreviews"):
            return {"status": {"authenticated": True, "user": {"username": "alice"}}}
        return {"status": {"allowed": True}}


async def test_cached_answers_expire_after_the_ttl() -> None:
    """Within the TTL no review is repeated; after it, a revoked token would be seen."""
    now = [0.0]
    reviews = Reviews()
    reviewer = auth.Reviewer(reviews,
                             auth.AuthSettings(cache_ttl=30.0), clock=lambda: now[0])
    user = await reviewer.authenticate("t")
    assert user is not None and await reviewer.authorize(user, "/metrics")
    now[0] = 29.9
    assert await reviewer.authenticate("t") == user
    assert await reviewer.authorize(user, "/metrics")
    assert reviews.calls == 2
    now[0] = 30.1
    await reviewer.authenticate("t")
    await reviewer.authorize(user, "/metrics")
    assert reviews.calls == 4


def test_cache_is_bounded_and_keyed_by_a_digest() -> None:
    """A flood of distinct tokens cannot grow memory past the cache size; tokens are not
    kept (only their SHA-256)."""
    cache: auth.TTLCache[str, int] = auth.TTLCache(30.0, 3, lambda: 0.0)
    for i in range(10):
        cache.put(str(i), i)
    assert len(cache) == 3 and cache.get("9") == (True, 9) and cache.get("0") == (False, None)


async def test_cert_dir_is_used_and_verified(tmp_path: Path) -> None:
    """--metrics-cert-dir's tls.crt/tls.key serve TLS a client can verify; a missing file
    is one error naming it."""
    with pytest.raises(ValueError, match=r"tls\.crt does not exist"):
        auth.server_tls(tmp_path, "127.0.0.1")
    certificate, key = auth.self_signed("127.0.0.1")
    pem = certificate.public_bytes(serialization.Encoding.PEM)
    (tmp_path / "tls.crt").write_bytes(pem)
    (tmp_path / "tls.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    context, fingerprint = auth.server_tls(tmp_path, "127.0.0.1")
    assert len(fingerprint.split(":")) == 32

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/", hello)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context).start()
    try:
        trust = ssl.create_default_context(cadata=pem.decode())
        async with aiohttp.ClientSession() as session, session.get(
                f"https://127.0.0.1:{runner.addresses[0][1]}/", ssl=trust) as response:
            assert await response.text() == "ok"
    finally:
        await runner.cleanup()
