"""``fedctl dashboard --in-cluster``: one dashboard for many users, each acting as themselves.

Served from the control plane's Deployment (``config/dashboard``), behind Kubernetes
authentication as secure metrics are (:mod:`federation.runtime.auth`):

1. Every request bears the user's token: ``Authorization: Bearer`` (an authenticating
   proxy, ``curl``), or the cookie the login page sets (HttpOnly, Secure, SameSite=Strict)
   from a token the user pasted, as the Kubernetes Dashboard does.
2. A ``TokenReview`` on the hub, made with this process's own identity (its only use of
   it), says whose token it is. No token, or one the hub refuses: 401, the login page.
3. Everything else is done **with the user's token**: the user's pages are a
   :class:`~federation.dashboard.server.Dashboard` of their own whose client carries the
   user's token and none of ours (:func:`user_context`), so every list, watch, access
   review, what-if read and action is the user's, and RBAC is exactly theirs. We forward
   the token rather than impersonate: impersonation would need ``impersonate`` rights for
   the control plane's ServiceAccount (anyone who took that pod would be anyone), while
   forwarding needs no right we did not hold (TokenReview, for metrics already).

What stays from the local dashboard: the Host check (against ``--public-host`` names, when
given), the Origin check and CSRF token (derived from the user's token: stateless, so any
replica checks it) on every POST, the CSP and security headers, escaped output. The
dashboard never serves a page read with anyone's identity but the requester's.

Sessions (one per token: its client and its watches) end when unused for
:data:`IDLE` seconds; at most :data:`MAX_SESSIONS` at once (then 503).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import hmac
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from aiohttp import web
from aiohttp.typedefs import Middleware

from federation.contexts import client as kube
from federation.contexts import kubeconfig
from federation.dashboard import server
from federation.dashboard.html import Html, el
from federation.dashboard.mirror import Mirror
from federation.runtime import auth

TOKEN_COOKIE = "fedctl-dashboard-token"
IDLE = 600.0
"""Seconds a session (the user's client and watches) outlives its last request or stream."""
MAX_SESSIONS = 64
"""Users served at once by one replica; each holds a watch per hub resource it shows."""
SWEEP = 60.0
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
USERS_DASHBOARD = web.RequestKey("dashboard", server.Dashboard)
"""Where the guard leaves the requester's own dashboard for the route handlers."""


class UserClient(kube.ObjectClient, Protocol):
    async def close(self) -> None: ...


Connect = Callable[[kubeconfig.Context], UserClient]


def user_context(own: kubeconfig.Context, user: auth.User, token: str) -> kubeconfig.Context:
    """The hub as ``user``: our server, CA and TLS settings, the user's token, and none of
    our credentials (built field by field, so a credential field added later is not
    copied by accident)."""
    namespace = "default"
    if user.name.startswith(SERVICE_ACCOUNT_PREFIX):
        namespace = user.name[len(SERVICE_ACCOUNT_PREFIX):].split(":")[0] or namespace
    return kubeconfig.Context(
        name=own.name, server=own.server, cluster_name=own.cluster_name, user_name=user.name,
        namespace=namespace, ca_data=own.ca_data,
        insecure_skip_tls_verify=own.insecure_skip_tls_verify,
        tls_server_name=own.tls_server_name, token=token)


@dataclasses.dataclass(frozen=True)
class Front:
    """What the in-cluster dashboard serves: its port and the names it is reached by."""

    port: int
    hosts: tuple[str, ...] = ()
    """``--public-host`` names (``host`` or ``host:port``); none: any Host (the browser
    sends a site's cookie to that site only, so a rebinding page has no token to use)."""

    def accepts(self, host: str) -> bool:
        if not self.hosts:
            return True
        return host in self.hosts or host.rpartition(":")[0] in self.hosts


@dataclasses.dataclass
class Session:
    dashboard: server.Dashboard
    client: UserClient
    task: asyncio.Task[None]
    used: float
    open: int = 0


def csrf_of(token: str) -> str:
    return hmac.new(token.encode(), b"csrf", hashlib.sha256).hexdigest()


class Sessions:
    """Each user's dashboard, by the SHA-256 of their token (never the token itself)."""

    def __init__(self, own: kubeconfig.Context, front: Front, reviewer: auth.Reviewer,
                 namespaces: Sequence[str] = (), *, connect: Connect = kube.ClusterClient,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.own = own
        self.reviewer = reviewer
        self.front = front
        self.namespaces = tuple(namespaces)
        self.connect = connect
        self.clock = clock
        self.sessions: dict[str, Session] = {}

    async def get(self, token: str, user: auth.User) -> Session | None:
        """The user's session (made on first use), or None when :data:`MAX_SESSIONS` are
        in use."""
        key = hashlib.sha256(token.encode()).hexdigest()
        found = self.sessions.get(key)
        if found is not None:
            found.used = self.clock()
            return found
        await self.sweep()
        if key in self.sessions:  # made by a request of the same user while we swept
            return self.sessions[key]
        if len(self.sessions) >= MAX_SESSIONS:
            return None
        context = user_context(self.own, user, token)
        client = self.connect(context)
        mirror = Mirror(client, self.namespaces, context.namespace)
        settings = server.Settings(context, "", self.front.port, token=token)
        dashboard = server.Dashboard(settings, client, mirror,
                                     still_valid=lambda: self._accepted(token))
        task = asyncio.create_task(mirror.run(), name=f"dashboard mirror of {user.name}")
        self.sessions[key] = Session(dashboard, client, task, self.clock())
        return self.sessions[key]

    async def _accepted(self, token: str) -> bool:
        """Whether the hub still accepts ``token`` (the review is cached for its TTL, so a
        revoked token's open streams end within that and :data:`server.KEEPALIVE`)."""
        try:
            return await self.reviewer.authenticate(token) is not None
        except (auth.OverBudget, auth.ReviewUnavailable):
            return True  # not known to be revoked: the hub's own checks still apply

    async def sweep(self) -> None:
        now = self.clock()
        for key, session in list(self.sessions.items()):
            if session.open == 0 and now - session.used > IDLE:
                del self.sessions[key]
                await _close(session)

    async def run(self) -> None:
        """Sweep idle sessions until cancelled, then close them all."""
        try:
            while True:
                await asyncio.sleep(SWEEP)
                await self.sweep()
        finally:
            await self.close()

    async def close(self) -> None:
        """End every session: its watches and its client."""
        for session in list(self.sessions.values()):
            await _close(session)
        self.sessions.clear()


async def _close(session: Session) -> None:
    session.task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await session.task
    await session.client.close()


def guard(sessions: Sessions) -> Middleware:
    """Host, token (TokenReview), Origin and CSRF checks; the user's dashboard for the rest."""

    @web.middleware
    async def middleware(request: web.Request, handler: server.Handler) -> web.StreamResponse:
        try:
            response = await _checked(sessions, request, handler)
        except web.HTTPException as exc:
            exc.headers.update(server.SECURITY_HEADERS)
            raise
        if not response.prepared:
            response.headers.update(server.SECURITY_HEADERS)
        return response

    return middleware


async def _checked(sessions: Sessions, request: web.Request, handler: server.Handler
                   ) -> web.StreamResponse:
    reviewer = sessions.reviewer
    host = request.headers.get("Host", "")
    if not sessions.front.accepts(host):
        return _text(421, "unexpected Host header")
    if request.method not in ("GET", "HEAD") and \
            request.headers.get("Origin") != f"https://{host}":
        return _text(403, "cross-origin request refused (Origin)")
    if request.path == "/login":
        return await _login(reviewer, request)
    if request.path.startswith("/static/"):  # the login page's style sheet: no token yet
        return server.static_file(request.path.removeprefix("/static/"))
    token = _bearer(request.headers.get("Authorization", "")) or \
        request.cookies.get(TOKEN_COOKIE, "")
    if not token:
        return login_page(401, "")
    try:
        user = await reviewer.authenticate(token)
    except auth.OverBudget:
        return _text(429, "too many logins in flight; retry later")
    except auth.ReviewUnavailable:
        return _text(503, "cannot check your token now (the hub did not answer); retry later")
    if user is None:
        refused = login_page(401, "the hub did not accept this token")
        refused.del_cookie(TOKEN_COOKIE, path="/")
        return refused
    if request.method not in ("GET", "HEAD"):
        form = await request.post()
        if not hmac.compare_digest(str(form.get("csrf", "")).encode(), csrf_of(token).encode()):
            return _text(403, "missing or wrong CSRF token: reload the page")
    session = await sessions.get(token, user)
    if session is None:
        return _text(503, "too many dashboard sessions; retry later")
    request[USERS_DASHBOARD] = session.dashboard
    session.open += 1
    try:
        return await handler(request)
    finally:
        session.open -= 1
        session.used = sessions.clock()


async def _login(reviewer: auth.Reviewer, request: web.Request) -> web.Response:
    """GET: the form. POST: the token checked (TokenReview), kept in the cookie."""
    if request.method != "POST":
        return login_page(200, "")
    form = await request.post()
    token = str(form.get("token", "")).strip()
    try:
        user = await reviewer.authenticate(token) if token else None
    except (auth.OverBudget, auth.ReviewUnavailable):
        return login_page(503, "cannot check the token now; retry later")
    if user is None:
        return login_page(401, "the hub did not accept this token")
    found = web.Response(status=303, headers={"Location": "/"})
    found.set_cookie(TOKEN_COOKIE, token, httponly=True, secure=True, samesite="Strict",
                     path="/")
    return found


def login_page(status: int, said: str) -> web.Response:
    """The token form (no script; a POST to this origin only, as the CSP says)."""
    form = el("form", el("label", "Your Kubernetes token for the hub", for_="token"),
              el("input", id="token", name="token", type="password", autocomplete="off",
                 required=True),
              el("button", "Sign in", type="submit"), method="post", action="/login",
              class_="inline")
    main = el("main", el("h1", "fedctl dashboard: sign in"),
              el("p", said, role="alert", class_="outcome") if said else "",
              el("p", "Every page is read, and every action taken, with this token: you see "
                      "what it may see. It is kept in a cookie this site alone can read."),
              form, id="content")
    head = el("head", el("meta", charset="utf-8"), el("title", "Sign in · fedctl dashboard"),
              el("link", rel="stylesheet", href="/static/dashboard.css"))
    document = Html("<!doctype html>" + el("html", head, el("body", main), lang="en"))
    return web.Response(status=status, text=document, content_type="text/html",
                        charset="utf-8",
                        headers={"WWW-Authenticate": 'Bearer realm="federation"'}
                        if status == 401 else None)


def _bearer(header: str) -> str:
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _text(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message + "\n", content_type="text/plain")


def app(sessions: Sessions) -> web.Application:
    served = web.Application(middlewares=[guard(sessions)],
                             client_max_size=64 * 1024)
    served.add_routes([web.get("/login", _unreachable), web.post("/login", _unreachable),
                       *server.routes(_users_dashboard)])
    return served


def _users_dashboard(request: web.Request) -> server.Dashboard:
    return request[USERS_DASHBOARD]


async def _unreachable(request: web.Request) -> web.Response:
    raise AssertionError("/login is answered by the guard")  # pragma: no cover
