"""The in-cluster dashboard: each request authenticated by its token, then served with it.

The hub is faked twice: the control plane's own client answers TokenReviews (and must
be asked nothing else), and each user's client is made from the context the dashboard
builds for that user, recording the token of every call, so "every read and write was
the user's" is checked, not assumed.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from aiohttp import test_utils
from click.testing import CliRunner

from federation.contexts import kubeconfig
from federation.contexts.client import MERGE_PATCH, ApiError, Resource
from federation.dashboard import command, incluster, server
from federation.runtime import auth
from tests.unit.clients import Unserved
from tests.unit.dashboard.test_server import SCRIPT, _event, application, binding, member

JSON = dict[str, Any]
ADMIN = "admin-token"
VIEWER = "viewer-token"
VIEWER_NAME = "system:serviceaccount:shop:viewer"
OWN_TOKEN = "control-plane-token"


class OwnHub(Unserved):
    """The control plane's client: TokenReviews only (anything else is refused, recorded)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.users: dict[str, JSON] = {ADMIN: {"username": "admin",
                                               "groups": ["system:masters"]},
                                       VIEWER: {"username": VIEWER_NAME}}

    async def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                      body: Any = None, content_type: str = "application/json",
                      timeout: float | None = None) -> JSON:
        self.calls.append(path)
        assert path.endswith("/tokenreviews"), path
        user = self.users.get(body["spec"]["token"])
        return {"status": {"authenticated": user is not None, **({"user": user} if user
                                                                  else {})}}


class UserHub(Unserved):
    """The hub as one user: the viewer may read and nothing else in ``shop`` only."""

    HELD: dict[str, list[JSON]] = {
        "memberclusters": [member("member1")],
        "resourcebindings": [binding("web"), {**binding("vault"), "metadata": {
            "namespace": "bank", "name": "vault-deployment"}}],
        "applications": [application("web")],
    }

    def __init__(self, context: kubeconfig.Context, record: list[tuple[str, str]]) -> None:
        self.context = context
        self.token = str(context.token)
        self.record = record
        self.closed = False

    def _check(self, call: str, namespace: str | None) -> None:
        self.record.append((self.token, call))
        if self.token == VIEWER and (namespace != "shop" or call.startswith("patch")):
            raise ApiError("hub", 403, "Forbidden",
                           f'{call} is forbidden: User "{VIEWER_NAME}" cannot {SCRIPT}')

    async def list(self, resource: Resource, namespace: str | None = None,
                   **params: Any) -> JSON:
        self._check(f"list {resource.plural}", namespace)
        items = [i for i in self.HELD.get(resource.plural, [])
                 if namespace is None or i["metadata"].get("namespace") == namespace]
        return {"metadata": {"resourceVersion": "1"}, "items": items}

    async def watch(self, resource: Resource, *, namespace: str | None = None,
                    resource_version: str | None = None, timeout_seconds: int = 290,
                    inactivity_timeout: float | None = None,
                    **params: Any) -> AsyncIterator[JSON]:
        for _ in ():
            yield {}
        await asyncio.Event().wait()  # open until cancelled

    async def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                      body: Any = None, content_type: str = "application/json",
                      timeout: float | None = None) -> JSON:
        self.record.append((self.token, f"{method} {path}"))
        assert path.endswith("/selfsubjectaccessreviews")
        return {"status": {"allowed": self.token == ADMIN}}

    async def patch(self, resource: Resource, name: str, patch: Any, *,
                    namespace: str | None = None, subresource: str | None = None,
                    content_type: str = MERGE_PATCH, **params: Any) -> JSON:
        self._check(f"patch {resource.plural}", namespace)
        return {}

    async def close(self) -> None:
        self.closed = True


class Site:
    def __init__(self, client: test_utils.TestClient[Any, Any], sessions: incluster.Sessions,
                 own: OwnHub, record: list[tuple[str, str]],
                 made: list[UserHub], now: list[float]) -> None:
        self.now = now
        """The reviewer's clock (its cache's TTL)."""
        self.client = client
        self.sessions = sessions
        self.own = own
        self.record = record
        self.made = made

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.sessions.front.port}"

    async def get(self, path: str, token: str | None = None, **headers: str) -> Any:
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return await self.client.get(path, headers=headers, allow_redirects=False)

    async def post(self, path: str, token: str, form: Mapping[str, str],
                   **headers: str) -> Any:
        headers = {"Authorization": f"Bearer {token}", "Origin": f"https://{self.host}",
                   **headers}
        return await self.client.post(path, data=dict(form), headers=headers,
                                      allow_redirects=False)

    async def settled(self, token: str, path: str = "/workloads") -> str:
        """The page once the user's mirror has listed (it starts on the first request)."""
        first = await self.get(path, token)
        assert first.status in (200, 404), await first.text()  # 404: not listed yet
        for _ in range(100):  # loop turns, not time: the fake hub answers at once
            await asyncio.sleep(0)
        again = await self.get(path, token)
        assert again.status == 200
        return str(await again.text())


def own_context() -> kubeconfig.Context:
    return kubeconfig.Context(
        name="in-cluster", server="https://10.0.0.1:443", user_name="federation",
        ca_data=b"CA", token=OWN_TOKEN, token_file=Path("/var/run/token"),
        client_cert_data=b"CERT", client_key_data=b"KEY", username="u", password="p",
        exec_config={"command": "get-token"})


@contextlib.asynccontextmanager
async def site(hosts: tuple[str, ...] = ()) -> AsyncIterator[Site]:
    own = OwnHub()
    record: list[tuple[str, str]] = []
    made: list[UserHub] = []

    def connect(context: kubeconfig.Context) -> UserHub:
        made.append(UserHub(context, record))
        return made[-1]

    port = test_utils.unused_port()
    now = [0.0]
    sessions = incluster.Sessions(own_context(), incluster.Front(port, hosts),
                                  auth.Reviewer(own, clock=lambda: now[0]), connect=connect)
    app = incluster.app(sessions)
    test_server = test_utils.TestServer(app, host="127.0.0.1", port=port)
    client = test_utils.TestClient(test_server)
    await client.start_server()
    try:
        yield Site(client, sessions, own, record, made, now)
    finally:
        await sessions.close()
        await client.close()
        await test_server.close()


async def test_without_a_token_only_the_sign_in_page_is_served() -> None:
    async with site() as s:
        for path in ("/", "/workloads", "/application/shop/web", "/stream?page=/"):
            response = await s.get(path)
            assert response.status == 401, path
            body = await response.text()
            assert 'name="token"' in body and "member1" not in body
            assert "Content-Security-Policy" in response.headers
        assert (await s.get("/static/dashboard.css")).status == 200
        assert s.made == [] and s.own.calls == []  # nothing read, no review needed


async def test_a_token_the_hub_refuses_gets_nothing() -> None:
    async with site() as s:
        response = await s.get("/", "forged")
        assert response.status == 401
        assert "the hub did not accept this token" in await response.text()
        cookie = await s.client.get("/", headers={"Cookie": f"{incluster.TOKEN_COOKIE}=forged"})
        assert cookie.status == 401 and 'fedctl-dashboard-token=""' in \
            cookie.headers["Set-Cookie"]
        assert s.made == [] and s.record == []


async def test_a_one_namespace_user_sees_that_namespace_only_read_with_their_token() -> None:
    async with site() as s:
        body = await s.settled(VIEWER)
        assert "web" in body and "vault" not in body and "bank" not in body
        assert "namespace shop only" in body
        assert f"as {VIEWER_NAME}" in body
        fleet = await s.get("/", VIEWER)
        assert "member1" not in await fleet.text()  # MemberClusters: forbidden to a viewer
        # every call to the hub for the viewer bore the viewer's token; ours only reviewed
        assert {token for token, _ in s.record} == {VIEWER}
        assert all(path.endswith("/tokenreviews") for path in s.own.calls)
        [made] = s.made
        assert made.context.token == VIEWER and made.context.namespace == "shop"
        admin = await s.settled(ADMIN)
        assert "vault" in admin and "web" in admin  # another user, another view


async def test_a_revoked_token_s_open_stream_ends() -> None:
    """A page left open does not keep showing the hub to a token the hub stopped accepting."""
    async with site() as s:
        await s.settled(ADMIN, "/")
        stream = await s.get("/stream?page=/", ADMIN)
        assert "member1" in await _event(stream)
        del s.own.users[ADMIN]
        s.now[0] += auth.AuthSettings().cache_ttl + 1
        [session] = s.sessions.sessions.values()
        await session.dashboard.mirror._bump()
        assert await asyncio.wait_for(stream.content.read(), 5) == b""  # ended, nothing sent
        assert (await s.get("/", ADMIN)).status == 401


async def test_the_user_context_carries_none_of_our_credentials() -> None:
    user = auth.User(VIEWER_NAME)
    context = incluster.user_context(own_context(), user, VIEWER)
    assert context.token == VIEWER
    assert (context.token_file, context.client_cert_data, context.client_key_data,
            context.username, context.password, context.exec_config) == \
        (None, None, None, None, None, None)
    assert (context.server, context.ca_data) == ("https://10.0.0.1:443", b"CA")
    assert OWN_TOKEN not in repr(context) and "CERT" not in repr(context)


async def test_an_action_the_hub_refuses_is_shown_refused() -> None:
    async with site() as s:
        await s.settled(VIEWER, "/application/shop/web")
        response = await s.post("/application/shop/web/approve", VIEWER,
                                {"csrf": incluster.csrf_of(VIEWER)})
        assert response.status == 403
        body = await response.text()
        assert "approve refused by the hub: hub: 403 Forbidden" in body
        assert SCRIPT not in body
        assert (VIEWER, "patch applications") in s.record
        allowed = await s.post("/application/shop/web/approve", ADMIN,
                               {"csrf": incluster.csrf_of(ADMIN)})
        assert allowed.status == 303
        assert (ADMIN, "patch applications") in s.record


async def test_a_post_without_origin_or_csrf_writes_nothing() -> None:
    async with site() as s:
        path = "/application/shop/web/approve"
        attempts: list[tuple[dict[str, str], dict[str, str]]] = [
            ({"Origin": ""}, {"csrf": incluster.csrf_of(ADMIN)}),
            ({"Origin": "https://evil.example"}, {"csrf": incluster.csrf_of(ADMIN)}),
            ({"Origin": f"http://{s.host}"}, {"csrf": incluster.csrf_of(ADMIN)}),
            ({}, {}),
            ({}, {"csrf": incluster.csrf_of(VIEWER)}),  # another user's token's CSRF
        ]
        for headers, form in attempts:
            response = await s.post(path, ADMIN, form, **headers)
            assert response.status == 403, (headers, form)
        assert not [call for _, call in s.record if call.startswith("patch")]


async def test_sign_in_keeps_the_token_in_a_strict_cookie() -> None:
    async with site() as s:
        origin = {"Origin": f"https://{s.host}"}
        bad = await s.client.post("/login", data={"token": "forged"}, headers=origin,
                                  allow_redirects=False)
        assert bad.status == 401 and "Set-Cookie" not in bad.headers
        cross = await s.client.post("/login", data={"token": ADMIN},
                                    headers={"Origin": "https://evil.example"},
                                    allow_redirects=False)
        assert cross.status == 403 and "Set-Cookie" not in cross.headers
        good = await s.client.post("/login", data={"token": ADMIN}, headers=origin,
                                   allow_redirects=False)
        assert good.status == 303 and good.headers["Location"] == "/"
        cookie = good.headers["Set-Cookie"]
        for flag in ("HttpOnly", "Secure", "SameSite=Strict"):
            assert flag in cookie
        page = await s.client.get("/workloads",
                                  headers={"Cookie": f"{incluster.TOKEN_COOKIE}={ADMIN}"})
        assert page.status == 200


async def test_a_host_not_served_is_refused() -> None:
    async with site(hosts=("dash.example.com",)) as s:
        rebound = await s.get("/", ADMIN, Host="evil.example")
        assert rebound.status == 421
        named = await s.get("/", ADMIN, Host="dash.example.com")
        assert named.status == 200


async def test_idle_sessions_end_and_their_watches_close() -> None:
    now = [0.0]
    own = own_context()
    made: list[UserHub] = []

    def connect(context: kubeconfig.Context) -> UserHub:
        made.append(UserHub(context, []))
        return made[-1]

    sessions = incluster.Sessions(own, incluster.Front(1), auth.Reviewer(OwnHub()),
                                  connect=connect, clock=lambda: now[0])
    await sessions.get(VIEWER, auth.User(VIEWER_NAME))
    now[0] = incluster.IDLE + 1
    await sessions.sweep()
    assert sessions.sessions == {} and made[0].closed


async def test_at_most_max_sessions_at_once() -> None:
    made: list[UserHub] = []

    def connect(context: kubeconfig.Context) -> UserHub:
        made.append(UserHub(context, []))
        return made[-1]

    sessions = incluster.Sessions(own_context(), incluster.Front(1), auth.Reviewer(OwnHub()),
                                  connect=connect)
    try:
        for i in range(incluster.MAX_SESSIONS):
            assert await sessions.get(f"token-{i}", auth.User(f"u{i}")) is not None
        assert await sessions.get("one-more", auth.User("late")) is None
    finally:
        await sessions.close()


def test_the_csrf_token_is_the_one_the_pages_carry() -> None:
    settings = server.Settings(own_context(), "", 1, token=VIEWER)
    assert settings.csrf == incluster.csrf_of(VIEWER)
    assert re.fullmatch(r"[0-9a-f]{64}", settings.csrf)


def test_tls_and_host_options_are_refused_without_in_cluster(tmp_path: Path) -> None:
    """Not accepted and ignored: the local dashboard has no TLS and checks its own Host."""
    for extra in (["--cert-dir", str(tmp_path)], ["--public-host", "dash.example.com"]):
        result = CliRunner().invoke(command.dashboard, extra)
        assert result.exit_code == 2
        assert "--cert-dir and --public-host are for --in-cluster" in result.output
