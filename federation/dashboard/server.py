"""The dashboard's HTTP server: pages, their live stream, the Application actions.

Who may use it, and how (docs/dashboard.md, "Safeguards"):

- it listens on 127.0.0.1 unless told otherwise;
- every request must carry the session cookie, set by the one-time link the command
  printed (``/?token=...``): another local user, or a page in the browser guessing the
  port, gets nothing, not even a read with the user's identity;
- the ``Host`` header must name the address served (a DNS-rebinding page cannot pass
  its own name);
- an action is a POST bearing the page's CSRF token and an ``Origin`` equal to the
  dashboard's own;
- every answer has a CSP allowing only the dashboard's own script and style (none inline),
  no framing, no referrer;
- reads and writes go to the hub with the user's own client: the hub decides, and a
  refusal is shown with its reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import hmac
import logging
import secrets
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

from federation.commands import plan_live
from federation.contexts import client as kube
from federation.contexts import kubeconfig
from federation.controllers import applications as app_controller
from federation.dashboard import apps, pages
from federation.dashboard.html import Html, el, join
from federation.dashboard.mirror import Mirror, event_time
from federation.hub import api
from federation.placement import loader

log = logging.getLogger(__name__)
JSON = dict[str, Any]
STATIC = Path(__file__).resolve().parent / "static"
COOKIE = "fedctl-dashboard-{port}"
"""Per port: browsers share cookies across the ports of one host, and two dashboards (two
users, two hubs) must not overwrite each other's session."""
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # same-origin, not no-referrer: with no-referrer Chromium sends `Origin: null` on a
    # form POST, and the Origin check refuses every action
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
}
PERMISSION_TTL = 10.0
"""Seconds an access review's answer is reused (the page re-renders on every change)."""
COALESCE = 0.25
"""Seconds the live stream waits after a change for the rest of a burst."""
KEEPALIVE = 15.0
WILDCARDS = ("0.0.0.0", "::")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Review = Callable[[str, str], Awaitable[apps.Permission]]
WhatIf = Callable[[str, str, str], Awaitable[Html]]


EMPTY = Html("")


@dataclasses.dataclass(frozen=True)
class Page:
    """A page: its title, the part the live stream replaces, and what stays around it
    (the events' filter above, the what-if below)."""

    title: str
    live: Html
    before: Html = EMPTY
    after: Html = EMPTY


class Settings:
    """What one dashboard serves, and the secrets of its session."""

    def __init__(self, context: kubeconfig.Context, host: str, port: int,
                 token: str | None = None) -> None:
        self.context = context
        self.host = host
        self.port = port
        self.token = token or secrets.token_urlsafe(32)
        self.csrf = hmac.new(self.token.encode(), b"csrf", hashlib.sha256).hexdigest()

    @property
    def origin(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def cookie(self) -> str:
        return COOKIE.format(port=self.port)

    def accepts(self, host: str) -> bool:
        """Whether a request's Host header names the address served (localhost's names for
        loopback). Served on a wildcard address, the names it is reached by are unknown: any
        is taken, and the session cookie (bound to the name in the link) still guards."""
        if self.host in WILDCARDS:
            return host.endswith(f":{self.port}")
        names = {self.host, f"[{self.host}]"}
        if self.host in ("127.0.0.1", "::1", "localhost"):
            names |= {"127.0.0.1", "localhost", "[::1]"}
        return host in {f"{name}:{self.port}" for name in names}

    def link(self) -> str:
        return f"{self.origin}/?token={self.token}"


def _refuse(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message + "\n", content_type="text/plain")


def guard(settings: Settings) -> Middleware:
    """The middleware: Host, session, CSRF and Origin checks, then the security headers."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await _checked(settings, request, handler)
        except web.HTTPException as exc:  # a 404 or a redirect is an answer too
            exc.headers.update(SECURITY_HEADERS)
            raise
        if not response.prepared:  # a stream sent its headers already (its own set)
            response.headers.update(SECURITY_HEADERS)
        return response

    return middleware


async def _checked(settings: Settings, request: web.Request, handler: Handler
                   ) -> web.StreamResponse:
    host = request.headers.get("Host", "")
    if not settings.accepts(host):
        return _refuse(421, "unexpected Host header: open the address fedctl dashboard printed")
    offered = request.query.get("token")
    if offered is not None and request.method == "GET":
        if not hmac.compare_digest(offered.encode(), settings.token.encode()):
            return _refuse(401, "wrong token: open the link fedctl dashboard printed")
        kept = {k: v for k, v in request.query.items() if k != "token"}
        target = request.path + ("?" + urllib.parse.urlencode(kept) if kept else "")
        found = web.Response(status=303, headers={"Location": target})
        found.set_cookie(settings.cookie, settings.token, httponly=True, samesite="Strict",
                         path="/")
        return found
    cookie = request.cookies.get(settings.cookie, "")
    if not hmac.compare_digest(cookie.encode(), settings.token.encode()):
        return _refuse(401, "no session: open the link fedctl dashboard printed")
    if request.method not in ("GET", "HEAD"):
        if request.headers.get("Origin") != f"http://{host}":
            return _refuse(403, "cross-origin request refused (Origin)")
        form = await request.post()
        if not hmac.compare_digest(str(form.get("csrf", "")).encode(), settings.csrf.encode()):
            return _refuse(403, "missing or wrong CSRF token: reload the page")
    return await handler(request)


class Dashboard:
    """The pages over one mirror, with the user's client for reviews, actions and what-if."""

    def __init__(self, settings: Settings, client: kube.ObjectClient, mirror: Mirror, *,
                 what_if: WhatIf | None = None, clock: Callable[[], float] | None = None,
                 still_valid: Callable[[], Awaitable[bool]] | None = None) -> None:
        self.settings = settings
        self.client = client
        self.mirror = mirror
        self.what_if = what_if or self._what_if
        self.still_valid = still_valid
        """Asked before each push of a live stream (at least every :data:`KEEPALIVE`): the
        in-cluster dashboard ends the stream of a token the hub no longer accepts."""
        self.clock = clock or asyncio.get_running_loop().time
        self._permissions: dict[tuple[str, str], tuple[float, apps.Permission]] = {}

    def app(self) -> web.Application:
        server = web.Application(middlewares=[guard(self.settings)], client_max_size=64 * 1024)
        server.add_routes(routes(lambda request: self))
        return server

    # -- pages ---------------------------------------------------------------------------

    async def render(self, path: str, query: Any) -> Page:
        """The page at ``path``."""
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
        found = self.mirror.notes
        if parts == [""]:
            return Page("Fleet", pages.fleet(self.mirror.items("members"), self._bindings(),
                                             found))
        if parts == ["workloads"]:
            return Page("Workloads", pages.workloads(pages.workloads_of(self._bindings()),
                                                     found))
        if parts == ["applications"]:
            return Page("Applications", apps.applications(self.mirror.items("applications"),
                                                          found))
        if parts == ["rollouts"]:
            return Page("Configuration rollouts", pages.rollouts(
                self.mirror.items("rollouts"), found))
        if parts == ["events"]:
            chosen = pages.EventFilter(str(query.get("q", "")), str(query.get("type", "")),
                                       str(query.get("namespace", "")))
            return Page("Events", pages.events(self._events(), chosen, found),
                        before=pages.event_form(chosen))
        if len(parts) == 3 and parts[0] == "workload":
            return await self._workload(parts[1], parts[2], query.get("fail"))
        if len(parts) == 3 and parts[0] == "application":
            return await self._application(parts[1], parts[2], str(query.get("done", "")))
        raise web.HTTPNotFound(text="no such page\n")

    async def page(self, request: web.Request) -> web.Response:
        found = await self.render(request.rel_url.raw_path, request.query)
        document = pages.layout(found.title, request.path,
                                join([found.before, pages.live(found.live), found.after]),
                                self.settings.csrf, self._identity())
        return web.Response(text=document, content_type="text/html", charset="utf-8")

    def _identity(self) -> str:
        context = self.settings.context
        return f"{context.user_name or 'user'} on {context.name}"

    def _bindings(self) -> list[JSON]:
        return self.mirror.items("bindings") + self.mirror.items("clusterbindings")

    def _events(self) -> list[JSON]:
        return sorted(self.mirror.items("events"), key=event_time, reverse=True)

    async def _workload(self, namespace: str, name: str, fail: str | None) -> Page:
        source = "bindings" if namespace != "_" else "clusterbindings"
        binding = self.mirror.objects[source].get(("" if namespace == "_" else namespace,
                                                   name))
        if binding is None:
            raise web.HTTPNotFound(text="no such workload (or not visible to you)\n")
        item = pages.workloads_of([binding])[0]
        ref = item.record.resource if item.record else None
        events = [e for e in self._events()
                  if ref is not None and _about(e, ref.kind, ref.namespace or "", ref.name)]
        members = [pages._name(m) for m in self.mirror.items("members")]
        chosen = fail if fail in members else None
        answer = await self.what_if(namespace, name, chosen) if chosen else None
        title = f"{ref.kind} {ref.namespace + '/' if ref.namespace else ''}{ref.name}" \
            if ref else name
        return Page(title, pages.workload(item, events),
                    after=pages.what_if(members, chosen, answer))

    async def _what_if(self, namespace: str, name: str, failed: str) -> Html:
        """The placement ``fedctl plan --live --fail`` computes, for this one template."""
        try:
            state = await plan_live.read(self.settings.context)
            planned = plan_live.what_if(state, [failed])
        except (kube.ClientError, loader.LoadError, ValueError, OSError) as exc:
            return el("p", f"what-if unavailable: {exc}", class_="note")
        binding = self.mirror.objects["bindings"].get((namespace, name)) or \
            self.mirror.objects["clusterbindings"].get(("", name)) or {}
        item = pages.workloads_of([binding])[0] if binding else None
        ref = item.record.resource if item and item.record else None
        for entry in planned:
            res = entry.resource
            if ref and (res.kind, res.namespace or "", res.name) == \
                    (ref.kind, ref.namespace or "", ref.name):
                decision = entry.decision
                lines = list(decision.explanation) + ([decision.error] if decision.error
                                                      else [])
                return pages.what_if_answer(failed, dict(decision.clusters),
                                            item.wanted() if item else {}, lines)
        return el("p", "no policy places this template now", class_="note")

    async def _application(self, namespace: str, name: str, done: str) -> Page:
        item = self.mirror.objects["applications"].get((namespace, name))
        if item is None:
            raise web.HTTPNotFound(text="no such Application (or not visible to you)\n")
        permission = await self.permission(namespace, name)
        said = f"{done} requested" if done in apps.ACTIONS else ""
        return Page(f"Application {namespace}/{name}", apps.application(
            item, permission, self.settings.csrf, said))

    # -- permissions and actions ------------------------------------------------------------

    async def permission(self, namespace: str, name: str) -> apps.Permission:
        """May the user patch this Application? A SelfSubjectAccessReview, as the user."""
        key = (namespace, name)
        cached = self._permissions.get(key)
        if cached and self.clock() - cached[0] < PERMISSION_TTL:
            return cached[1]
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                  "spec": {"resourceAttributes": {
                      "group": api.APPLICATIONS.group, "resource": api.APPLICATIONS.plural,
                      "verb": "patch", "namespace": namespace, "name": name}}}
        try:
            answer = await self.client.request(
                "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=review)
            status = answer.get("status") or {}
            found = apps.Permission(bool(status.get("allowed")), "" if status.get("allowed")
                                    else "the hub says you may not patch this Application"
                                    + (f": {status.get('reason')}" if status.get("reason")
                                       else " (RBAC)"))
        except kube.ClientError as exc:
            found = apps.Permission(False, f"access review failed: {exc}")
        self._permissions[key] = (self.clock(), found)
        return found

    async def act(self, request: web.Request) -> web.StreamResponse:
        namespace = request.match_info["namespace"]
        name = request.match_info["name"]
        action = request.match_info["action"]
        if action not in apps.ACTIONS:
            raise web.HTTPNotFound(text="no such action\n")
        key, value = _annotation(action)
        try:
            await self.client.patch(api.APPLICATIONS, name,
                                    {"metadata": {"annotations": {key: value}}},
                                    namespace=namespace)
        except kube.ClientError as exc:
            self._permissions.pop((namespace, name), None)
            return await self._refused(request, namespace, name, action, exc)
        raise web.HTTPSeeOther(pages.href("application", namespace, name, done=action))

    async def _refused(self, request: web.Request, namespace: str, name: str, action: str,
                       exc: kube.ClientError) -> web.Response:
        """The page again, saying the hub refused (status 403 when it did)."""
        item = self.mirror.objects["applications"].get((namespace, name)) or \
            {"metadata": {"namespace": namespace, "name": name}}
        why = str(exc)
        body = apps.application(item, await self.permission(namespace, name),
                                self.settings.csrf, f"{action} refused by the hub: {why}")
        document = pages.layout(f"Application {namespace}/{name}", request.path,
                                pages.live(body), self.settings.csrf, self._identity(),
                                live_page=pages.href("application", namespace, name))
        status = exc.status if isinstance(exc, kube.ApiError) and exc.status < 500 else 502
        return web.Response(status=status, text=document, content_type="text/html",
                            charset="utf-8")

    # -- live stream and static files -----------------------------------------------------

    async def stream(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: the page's live part again each time it changes."""
        target = urllib.parse.urlsplit(request.query.get("page", "/"))
        if target.scheme or target.netloc:
            raise web.HTTPBadRequest(text="page: a path of this dashboard\n")
        # the what-if is not part of the live content: never recomputed on a change
        query = {k: v for k, v in urllib.parse.parse_qsl(target.query) if k != "fail"}
        await self.render(target.path or "/", query)  # 404 before the stream starts
        response = web.StreamResponse(headers={**SECURITY_HEADERS,
                                               "Content-Type": "text/event-stream"})
        await response.prepare(request)
        seen, last = -1, ""
        with contextlib.suppress(ConnectionResetError, asyncio.CancelledError):
            async for version in self._versions(seen):
                if self.still_valid is not None and not await self.still_valid():
                    break
                seen = version
                try:
                    live = (await self.render(target.path or "/", query)).live
                except web.HTTPNotFound:
                    live = el("p", "this object is gone (or no longer visible to you)",
                              class_="note")
                if live != last:
                    last = live
                    data = "".join(f"data: {line}\n" for line in live.split("\n"))
                    await response.write(f"{data}\n".encode())
                else:
                    await response.write(b": unchanged\n\n")
        return response

    async def _versions(self, seen: int) -> AsyncIterator[int]:
        while True:
            try:
                version = await asyncio.wait_for(self.mirror.wait(seen), KEEPALIVE)
            except TimeoutError:
                yield seen
                continue
            await asyncio.sleep(COALESCE)
            seen = max(version, self.mirror.version)
            yield seen

    async def no_icon(self, request: web.Request) -> web.Response:
        return web.Response(status=204)

    async def static(self, request: web.Request) -> web.StreamResponse:
        return static_file(request.match_info["file"])


def static_file(name: str) -> web.Response:
    """The dashboard's script or style sheet (the same for everyone, nothing of the hub)."""
    types = {"dashboard.js": "text/javascript", "dashboard.css": "text/css"}
    if name not in types:
        raise web.HTTPNotFound()
    return web.Response(body=(STATIC / name).read_bytes(), content_type=types[name],
                        charset="utf-8")


def routes(pick: Callable[[web.Request], Dashboard]) -> list[web.RouteDef]:
    """The dashboard's routes, each served by the :class:`Dashboard` ``pick`` gives for the
    request: the one dashboard of ``fedctl dashboard``, or the user's own in-cluster."""

    def by(method: str) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            served: web.StreamResponse = await getattr(pick(request), method)(request)
            return served
        return handler

    return [
        web.get("/", by("page")), web.get("/workloads", by("page")),
        web.get("/workload/{namespace}/{name}", by("page")),
        web.get("/applications", by("page")),
        web.get("/application/{namespace}/{name}", by("page")),
        web.post("/application/{namespace}/{name}/{action}", by("act")),
        web.get("/rollouts", by("page")), web.get("/events", by("page")),
        web.get("/stream", by("stream")),
        web.get("/static/{file}", by("static")),
        web.get("/favicon.ico", by("no_icon")),
    ]


def _about(event: JSON, kind: str, namespace: str, name: str) -> bool:
    obj = event.get("involvedObject") or {}
    return obj.get("kind") == kind and obj.get("name") == name and \
        str(obj.get("namespace") or "") == namespace


def _annotation(action: str) -> tuple[str, str]:
    """The request annotation ``fedctl app`` writes for ``action`` (approve is a resume)."""
    nonce = uuid.uuid4().hex[:8]
    if action == "rollback":
        return app_controller.ROLLBACK, f"0@{nonce}"
    return app_controller.RESUME, nonce
