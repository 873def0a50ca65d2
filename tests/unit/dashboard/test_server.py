"""The dashboard's server against a fake hub: each safeguard is attacked here.

The pages are served by aiohttp's test server on 127.0.0.1; the hub is a fake client
recording every write, so "nothing was written" is checked, not assumed.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

from aiohttp import test_utils

from federation.contexts import kubeconfig
from federation.contexts.client import MERGE_PATCH, ApiError, Resource
from federation.controllers import applications as app_controller
from federation.dashboard import server
from federation.dashboard.html import Html, el
from federation.dashboard.mirror import Mirror
from tests.unit.clients import Unserved

JSON = dict[str, Any]
SCRIPT = "<script>alert(1)</script>"


class FakeHub(Unserved):
    """Answers access reviews with ``allowed`` and records patches (or refuses them)."""

    def __init__(self, allowed: bool = True, refuse: ApiError | None = None) -> None:
        self.allowed = allowed
        self.refuse = refuse
        self.patches: list[tuple[str, str | None, Any]] = []
        self.reviews: list[JSON] = []

    async def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                      body: Any = None, content_type: str = "application/json",
                      timeout: float | None = None) -> JSON:
        assert path.endswith("/selfsubjectaccessreviews")
        self.reviews.append(body)
        return {"status": {"allowed": self.allowed,
                           "reason": "" if self.allowed else "no RoleBinding grants it"}}

    async def patch(self, resource: Resource, name: str, patch: Any, *,
                    namespace: str | None = None, subresource: str | None = None,
                    content_type: str = MERGE_PATCH, **params: Any) -> JSON:
        if self.refuse is not None:
            raise self.refuse
        self.patches.append((name, namespace, patch))
        return {}


def context() -> kubeconfig.Context:
    return kubeconfig.Context(name="hub", server="https://127.0.0.1:1", user_name="alice")


def member(name: str, ready: str = "True") -> JSON:
    return {"metadata": {"name": name}, "spec": {"region": "eu", "zone": "eu-1",
                                                  "provider": "gcp"},
            "status": {"conditions": [{"type": "Ready", "status": ready},
                                      {"type": "Reachable", "status": ready}],
                       "resourceSummary": {"allocatable": {"cpu": "12", "memory": "48Gi",
                                                           "pods": "330"},
                                           "allocated": {"cpu": "3", "memory": "2Gi",
                                                         "pods": "6"}}}}


def application(name: str, step_type: str = "approve") -> JSON:
    return {"metadata": {"namespace": "shop", "name": name},
            "status": {"status": "workflowSuspending", "latestRevision": {"name": f"{name}-v1"},
                       "workflow": {"phase": "suspended", "steps": [
                           {"name": "deploy-eu", "type": "deploy", "phase": "succeeded",
                            "clusters": ["member1"]},
                           {"name": f"gate {SCRIPT}", "type": step_type,
                            "phase": "suspended", "message": SCRIPT}]}}}


def binding(name: str) -> JSON:
    return {"metadata": {"namespace": "shop", "name": f"{name}-deployment"},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment",
                                  "namespace": "shop", "name": name},
                     "templateDeleted": False, "pendingCleanup": [],
                     "clusters": [{"name": "member1", "replicas": 4},
                                  {"name": "member2", "replicas": 2}],
                     "policy": f"PropagationPolicy shop/{SCRIPT}",
                     "replicas": 6, "summary": "member1:4 member2:2",
                     "explanation": [f"why {SCRIPT}"]},
            "status": {"conditions": [], "aggregatedStatus": [
                {"cluster": "member1", "applied": True, "health": "Healthy",
                 "status": {"readyReplicas": 3}}]}}


class Served:
    def __init__(self, hub: FakeHub, client: test_utils.TestClient[Any, Any],
                 dashboard: server.Dashboard) -> None:
        self.hub = hub
        self.client = client
        self.dashboard = dashboard

    @property
    def settings(self) -> server.Settings:
        return self.dashboard.settings

    def origin(self) -> dict[str, str]:
        return {"Origin": self.settings.origin}


async def served(hub: FakeHub) -> tuple[test_utils.TestServer, Served]:
    mirror = Mirror(hub)
    mirror.objects["members"] = {("", n): member(n) for n in ("member1", "member2", SCRIPT)}
    mirror.objects["applications"] = {("shop", SCRIPT): application(SCRIPT),
                                      ("shop", "web"): application("web")}
    mirror.objects["bindings"] = {("shop", "web-deployment"): binding("web"),
                                  ("shop", f"{SCRIPT}-deployment"): binding(SCRIPT)}
    port = test_utils.unused_port()
    settings = server.Settings(context(), "127.0.0.1", port)

    async def what_if(namespace: str, name: str, failed: str) -> Html:
        return el("p", f"what-if {namespace}/{name} without {failed}", id="whatif-result")

    dashboard = server.Dashboard(settings, hub, mirror, what_if=what_if)
    test_server = test_utils.TestServer(dashboard.app(), host="127.0.0.1", port=port)
    client = test_utils.TestClient(test_server)
    await client.start_server()
    await client.get(f"/?token={settings.token}", allow_redirects=False)
    return test_server, Served(hub, client, dashboard)


@contextlib.asynccontextmanager
async def serving(hub: FakeHub | None = None) -> AsyncIterator[Served]:
    test_server, found = await served(hub or FakeHub())
    try:
        yield found
    finally:
        await found.client.close()
        await test_server.close()


async def page(site: Served, path: str) -> str:
    response = await site.client.get(path)
    assert response.status == 200, await response.text()
    return await response.text()


async def test_a_tenant_named_script_is_text_on_every_page() -> None:
    async with serving() as site:
        escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
        quoted = "%3Cscript%3Ealert%281%29%3C%2Fscript%3E"
        for path in ("/", "/workloads", "/applications", f"/application/shop/{quoted}",
                     f"/workload/shop/{quoted}-deployment", "/workload/shop/web-deployment"):
            body = await page(site, path)
            assert SCRIPT not in body, path
            assert escaped in body, path
            # the only script element is the dashboard's own file
            assert re.findall(r"<script[^>]*>", body) == \
                ['<script src="/static/dashboard.js" defer>'], path


async def test_every_answer_has_the_security_headers() -> None:
    async with serving() as site:
        for path in ("/", "/static/dashboard.js", "/nowhere"):
            response = await site.client.get(path)
            csp = response.headers["Content-Security-Policy"]
            assert "script-src 'self'" in csp and "unsafe-inline" not in csp
            assert "frame-ancestors 'none'" in csp
            assert response.headers["X-Content-Type-Options"] == "nosniff"
            assert response.headers["X-Frame-Options"] == "DENY"
            assert response.headers["Referrer-Policy"] == "same-origin"


async def test_without_the_session_link_nothing_is_served() -> None:
    """Another local user (or a page guessing the port) has no cookie: no read as the user."""
    async with serving() as site:
        site.client.session.cookie_jar.clear()
        for path in ("/", "/applications", "/stream?page=/", "/static/dashboard.js"):
            response = await site.client.get(path)
            assert response.status == 401, path
            assert "member1" not in await response.text()
        wrong = await site.client.get("/?token=guess", allow_redirects=False)
        assert wrong.status == 401
        right = await site.client.get(f"/?token={site.settings.token}", allow_redirects=False)
        assert right.status == 303 and right.headers["Location"] == "/"
        cookie = right.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert (await site.client.get("/")).status == 200


async def test_a_rebound_host_name_is_refused() -> None:
    """DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends its own Host."""
    async with serving() as site:
        response = await site.client.get(
            "/", headers={"Host": f"evil.example:{site.settings.port}"})
        assert response.status == 421
        assert "member1" not in await response.text()


async def test_an_action_from_another_origin_or_without_the_token_writes_nothing() -> None:
    async with serving() as site:
        path = "/application/shop/web/approve"
        csrf = site.settings.csrf
        attempts: list[tuple[dict[str, str], dict[str, str]]] = [
            ({}, {"csrf": csrf}),  # no Origin
            ({"Origin": "http://evil.example"}, {"csrf": csrf}),  # a cross-site form post
            ({"Origin": "null"}, {"csrf": csrf}),  # a sandboxed frame
            (site.origin(), {}),  # no token
            (site.origin(), {"csrf": "0" * 64}),  # a guessed token
        ]
        for headers, form in attempts:
            response = await site.client.post(path, data=form, headers=headers,
                                              allow_redirects=False)
            assert response.status == 403, (headers, form)
        assert site.hub.patches == []


async def test_approve_writes_the_resume_request_as_the_user() -> None:
    async with serving() as site:
        response = await site.client.post("/application/shop/web/approve",
                                          data={"csrf": site.settings.csrf},
                                          headers=site.origin(), allow_redirects=False)
        assert response.status == 303
        assert response.headers["Location"] == "/application/shop/web?done=approve"
        [(name, namespace, patch)] = site.hub.patches
        assert (name, namespace) == ("web", "shop")
        assert list(patch["metadata"]["annotations"]) == [app_controller.RESUME]
        body = await page(site, response.headers["Location"])
        assert "approve requested" in body


async def test_rollback_writes_the_rollback_request() -> None:
    async with serving() as site:
        await site.client.post("/application/shop/web/rollback", data={"csrf": site.settings.csrf},
                               headers=site.origin(), allow_redirects=False)
        [(_, _, patch)] = site.hub.patches
        value = patch["metadata"]["annotations"][app_controller.ROLLBACK]
        assert value.startswith("0@")


async def test_a_reflected_done_parameter_is_not_echoed() -> None:
    async with serving() as site:
        body = await page(site, "/application/shop/web?done=%3Cb%3Epwned%3C%2Fb%3E")
        assert "pwned" not in body


async def test_buttons_are_disabled_with_the_reason_when_the_review_says_no() -> None:
    test_server, found = await served(FakeHub(allowed=False))
    try:
        body = await page(found, "/application/shop/web")
        assert re.search(r'<button type="submit" disabled[^>]*data-action="approve"', body)
        assert "you may not patch this Application: no RoleBinding grants it" in body
        [review] = found.hub.reviews
        assert review["spec"]["resourceAttributes"] == {
            "group": "core.oam.dev", "resource": "applications", "verb": "patch",
            "namespace": "shop", "name": "web"}
    finally:
        await found.client.close()
        await test_server.close()


async def test_a_refusal_by_the_hub_is_shown_with_its_reason() -> None:
    refusal = ApiError("hub", 403, "Forbidden",
                       f'applications "web" is forbidden: user "bob" {SCRIPT}')
    test_server, found = await served(FakeHub(refuse=refusal))
    try:
        response = await found.client.post("/application/shop/web/approve",
                                           data={"csrf": found.settings.csrf},
                                           headers=found.origin(), allow_redirects=False)
        assert response.status == 403
        body = await response.text()
        assert "approve refused by the hub: hub: 403 Forbidden" in body
        assert SCRIPT not in body
        # the page is answered at the POST's URL; its live stream follows the Application
        named = re.search(r'<meta name="live-page" content="([^"]*)">', body)
        assert named is not None and named.group(1) == "/application/shop/web"
        stream = await found.client.get("/stream", params={"page": named.group(1)})
        assert stream.status == 200
        assert 'data-action="approve"' in await _event(stream)
        stream.close()
    finally:
        await found.client.close()
        await test_server.close()


async def test_resume_is_offered_only_for_a_suspend_step() -> None:
    async with serving() as site:
        body = await page(site, "/application/shop/web")
        assert "no suspended step to resume" in body  # web waits at an approve step
        assert re.search(r'<button type="submit" data-action="approve"', body)


async def test_the_workload_page_has_bars_explanation_and_what_if() -> None:
    async with serving() as site:
        body = await page(site, "/workload/shop/web-deployment?fail=member2")
        assert "3 ready of 4" in body and "? ready of 2" in body
        assert "why &lt;script&gt;" in body
        assert "what-if shop/web-deployment without member2" in body
        unknown = await page(site, "/workload/shop/web-deployment?fail=nowhere")
        assert "what-if" not in unknown.split('id="whatif"')[1].split("</form>")[1]


async def test_the_stream_sends_the_live_part_again_when_the_hub_changes() -> None:
    async with serving() as site:
        response = await site.client.get("/stream?page=/")
        assert response.headers["Content-Type"] == "text/event-stream"
        first = await _event(response)
        assert "member2" in first and 'data-member-ready="member2"' in first
        site.dashboard.mirror.objects["members"][("", "member2")] = member("member2", "False")
        await site.dashboard.mirror._bump()
        second = await _event(response)
        assert re.search(r'data-member-ready="member2"><span class="badge bad">False', second)
        response.close()


async def test_the_stream_serves_only_this_dashboard_s_pages() -> None:
    async with serving() as site:
        response = await site.client.get("/stream?page=http://evil.example/")
        assert response.status == 400
        assert (await site.client.get("/stream?page=/nowhere")).status == 404


async def _event(response: Any) -> str:
    lines: list[str] = []
    while True:
        line = (await asyncio.wait_for(response.content.readline(), 5)).decode()
        if line == "\n" and lines:
            return "\n".join(lines)
        if line.startswith("data: "):
            lines.append(line[len("data: "):].rstrip("\n"))


def test_the_host_names_accepted() -> None:
    loop = server.Settings(context(), "127.0.0.1", 8090)
    assert loop.accepts("127.0.0.1:8090") and loop.accepts("localhost:8090")
    assert not loop.accepts("evil.example:8090") and not loop.accepts("127.0.0.1:8091")
    one = server.Settings(context(), "192.0.2.7", 8090)
    assert one.accepts("192.0.2.7:8090") and not one.accepts("localhost:8090")
    wildcard = server.Settings(context(), "0.0.0.0", 8090)
    assert wildcard.accepts("dash.example:8090") and not wildcard.accepts("dash.example:1")


async def test_the_stream_does_not_recompute_the_what_if() -> None:
    """The what-if reads the whole hub: a change must not repeat it for each open page."""
    async with serving() as site:
        asked: list[str] = []

        async def what_if(namespace: str, name: str, failed: str) -> Html:
            asked.append(failed)
            return el("p", "answer")

        site.dashboard.what_if = what_if
        await page(site, "/workload/shop/web-deployment?fail=member2")
        assert asked == ["member2"]
        response = await site.client.get(
            "/stream?page=/workload/shop/web-deployment%3Ffail%3Dmember2")
        await _event(response)
        changed = binding("web")
        changed["status"]["aggregatedStatus"][0]["status"]["readyReplicas"] = 4
        site.dashboard.mirror.objects["bindings"][("shop", "web-deployment")] = changed
        await site.dashboard.mirror._bump()
        assert "4 ready of 4" in await _event(response)
        response.close()
        assert asked == ["member2"]
