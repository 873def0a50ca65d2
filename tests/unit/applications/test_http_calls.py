"""The HTTP steps' calls: the sender on real sockets through the outbound policy (a
listener on 127.0.0.1 that must receive nothing unless allowed, no redirect followed, an
answer over the cap refused), fairness on a fake transport (a black-holed namespace never
delays another), the caller's bookkeeping, and whole reconciles on the in-memory fleet (a
request's answer feeding a later component; the URL in no status, Event or log line)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from federation.applications import http_steps
from federation.contexts import client as kube
from federation.contexts import egress
from federation.controllers.applications import calls, notifications
from tests.unit.applications.test_controller import MC, REQUEST, Clock, Writer, must, set_app
from tests.unit.controllers import fakes
from tests.unit.controllers.applications import fakes as app_fakes

APP = {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
       "metadata": {"name": "shop", "namespace": "team-a", "uid": "u1",
                    "managedFields": [{"manager": "kubectl"}]},
       "spec": {"components": []}}
LOOPBACK = egress.EgressPolicy(egress.parse_networks(["127.0.0.0/8"]))


class Listener:
    """An HTTP server on 127.0.0.1 recording every request."""

    def __init__(self) -> None:
        self.received: list[tuple[str, str, dict[str, str], bytes]] = []
        self.port = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.received.append((request.method, request.path_qs, dict(request.headers),
                              await request.read()))
        if request.path == "/redirect":
            raise web.HTTPTemporaryRedirect(f"http://127.0.0.1:{self.port}/target")
        if request.path == "/huge":
            return web.Response(body=b"x" * (http_steps.MAX_ANSWER + 1))
        if request.path == "/stream":  # no Content-Length: the cap holds while reading
            response = web.StreamResponse()
            await response.prepare(request)
            for _ in range(64):
                await response.write(b"y" * 4096)
            await response.write_eof()
            return response
        return web.json_response({"count": 7}, headers={"X-Answer": "yes"})


@contextlib.asynccontextmanager
async def serving() -> AsyncIterator[Listener]:
    found = Listener()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", found.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    found.port = runner.addresses[0][1]
    try:
        yield found
    finally:
        await runner.cleanup()


async def no_report(message: notifications.Message, why: str) -> None:
    raise AssertionError(why)


@contextlib.asynccontextmanager
async def running(*senders: notifications.Sender) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(s.run()) for s in senders]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


class Woken:
    """The caller's wake callback: which Applications were requeued."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.event = asyncio.Event()

    def __call__(self, namespace: str, name: str) -> None:
        self.seen.append((namespace, name))
        self.event.set()

    async def until(self, count: int) -> None:
        while len(self.seen) < count:
            self.event.clear()
            await asyncio.wait_for(self.event.wait(), 20)


def caller_of(policy: egress.EgressPolicy, now: float = 50.0
              ) -> tuple[calls.Caller, notifications.Sender, Woken]:
    sender = notifications.Sender(policy, no_report)
    caller = calls.Caller({"request": sender, "notification": sender}, lambda: now)
    woken = Woken()
    caller.wake = woken
    return caller, sender, woken


def key(step: str = "s", number: int = 1) -> calls.Key:
    return ("u1", 1, 0.0, step, number)


async def ask(caller: calls.Caller, woken: Woken, call: http_steps.HttpCall,
              step_type: str = "request", app: dict[str, Any] | None = None
              ) -> dict[str, Any]:
    caller.ensure(app or APP, key(), call)
    await woken.until(1)
    found = caller.answered(key(), step_type)
    assert found is not None
    return found


@pytest.mark.timeout(30)
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::ffff:127.0.0.1]", "0.0.0.0"])
async def test_a_loopback_destination_is_refused_without_the_allowlist(host: str) -> None:
    """A request step aimed at the control plane's own loopback: refused before a byte is
    sent; the step reads the policy's words, nothing about the listener."""
    async with serving() as listener:
        caller, sender, woken = caller_of(egress.EgressPolicy())
        async with running(sender):
            found = await ask(caller, woken, http_steps.HttpCall(
                "request", "GET", f"http://{host}:{listener.port}/?token=SECRET"))
        assert listener.received == []
        assert found == {"at": 50.0, "error": egress.REFUSED}


@pytest.mark.timeout(30)
async def test_an_allowed_destination_answers_the_step() -> None:
    """The control: allowed, the request is made as the step says and its answer is the
    step's ``response`` and ``req.$returns``."""
    async with serving() as listener:
        caller, sender, woken = caller_of(LOOPBACK)
        async with running(sender):
            found = await ask(caller, woken, http_steps.request({
                "url": f"http://127.0.0.1:{listener.port}/x", "method": "POST",
                "body": {"a": 1}, "header": {"X-Token": "t"}}, "p"))
        method, path, headers, body = listener.received[0]
        assert (method, path, body, headers["X-Token"]) == ("POST", "/x", b'{"a": 1}', "t")
        assert headers["Host"] == f"127.0.0.1:{listener.port}"
        assert found["response"] == {"count": 7} and found["statusCode"] == 200
        assert found["req"]["$returns"]["header"]["X-Answer"] == ["yes"]


@pytest.mark.timeout(30)
async def test_a_redirect_is_not_followed() -> None:
    async with serving() as listener:
        caller, sender, woken = caller_of(LOOPBACK)
        async with running(sender):
            found = await ask(caller, woken, http_steps.HttpCall(
                "request", "GET", f"http://127.0.0.1:{listener.port}/redirect"))
        assert [path for _, path, _, _ in listener.received] == ["/redirect"]
        assert found["invalid"] == calls.REDIRECT


@pytest.mark.timeout(30)
@pytest.mark.parametrize("path", ["/huge", "/stream"])
async def test_a_huge_answer_is_refused_not_kept(path: str) -> None:
    """An answer over MAX_ANSWER bytes, announced or streamed: the step reads one line,
    and nothing of it is kept."""
    async with serving() as listener:
        caller, sender, woken = caller_of(LOOPBACK)
        async with running(sender):
            found = await ask(caller, woken, http_steps.HttpCall(
                "request", "GET", f"http://127.0.0.1:{listener.port}{path}"))
        assert found == {"at": 50.0, "error": notifications.TOO_LARGE}


@pytest.mark.timeout(30)
async def test_a_webhook_posts_the_application_without_managed_fields() -> None:
    async with serving() as listener:
        caller, sender, woken = caller_of(LOOPBACK)
        async with running(sender):
            found = await ask(caller, woken, http_steps.webhook(
                {"url": {"value": f"http://127.0.0.1:{listener.port}/hook"}}, "p"), "webhook")
        sent = json.loads(listener.received[0][3])
        assert sent["metadata"] == {"name": "shop", "namespace": "team-a", "uid": "u1"}
        assert found["statusCode"] == 200


@pytest.mark.timeout(30)
async def test_the_url_is_in_no_log_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    caller, sender, woken = caller_of(egress.EgressPolicy())
    async with running(sender):
        found = await ask(caller, woken, http_steps.HttpCall(
            "request", "GET", "http://127.0.0.1:9/hook?token=SECRET-TOKEN"))
    assert "call of team-a/shop step s failed" in caplog.text
    assert "SECRET-TOKEN" not in caplog.text and "127.0.0.1" not in caplog.text
    assert "SECRET" not in json.dumps(found)


class Hanging:
    """A call transport: URLs under ``blackhole`` never answer, the others at once."""

    def __init__(self) -> None:
        self.hanging: list[str] = []

    async def call(self, method: str, url: str, headers: tuple[tuple[str, str], ...],
                   body: str | None) -> notifications.Answer:
        if "blackhole" in url:
            self.hanging.append(url)
            await asyncio.Event().wait()
        return notifications.Answer(200, {}, "{}")

    async def close(self) -> None:
        return None


@pytest.mark.timeout(10)
async def test_a_black_holed_namespace_never_delays_another() -> None:
    """team-a's twenty calls to a black hole hold two workers; team-b's call, asked after
    all of them, is answered while every one of team-a's still hangs."""
    transport = Hanging()
    sender = notifications.Sender(egress.EgressPolicy(), no_report, calls=transport)
    caller = calls.Caller({"request": sender}, lambda: 1.0)
    woken = Woken()
    caller.wake = woken
    for n in range(20):
        caller.ensure(APP, key(number=n + 1), http_steps.HttpCall(
            "request", "GET", f"http://blackhole.example/{n}"))
    b_app = {**APP, "metadata": {"name": "b", "namespace": "team-b", "uid": "u2"}}
    b_key = ("u2", 1, 0.0, "s", 1)
    caller.ensure(b_app, b_key, http_steps.HttpCall("request", "GET", "http://b.example/"))
    async with running(sender):
        await woken.until(1)
    assert woken.seen == [("team-b", "b")]
    assert caller.answered(b_key, "request") is not None
    assert len(transport.hanging) == sender.settings.namespace_in_flight


def test_a_call_is_asked_once_per_key_and_a_full_backlog_is_the_steps_answer() -> None:
    sent: list[notifications.Call] = []

    class Full:
        def submit_call(self, call: notifications.Call) -> notifications.Admission:
            sent.append(call)
            return notifications.Admission(len(sent) < 2)

    caller = calls.Caller({"request": Full()}, lambda: 3.0)
    call = http_steps.HttpCall("request", "GET", "http://a.example/")
    caller.ensure(APP, key(), call)
    caller.ensure(APP, key(), call)  # a reconcile on a stale cache: recognised
    assert len(sent) == 1 and caller.answered(key(), "request") is None
    caller.ensure(APP, key(number=2), call)
    assert caller.answered(key(number=2), "request") == {"at": 3.0, "error": calls.FULL}
    caller.ensure(APP, key(number=3), http_steps.HttpCall("notification", "POST", "x"))
    assert caller.answered(key(number=3), "webhook") == {"at": 3.0, "error": calls.NO_SENDER}


@pytest.mark.parametrize(("status", "body", "error"), [
    (400, '{"status":"error","errorType":"bad_data","error":"parse error at char 4\\n"}',
     "Prometheus answered 400: parse error at char 4\\n"),
    (503, "<html>down</html>", "Prometheus answered 503"),
])
def test_a_prometheus_error_is_one_line(status: int, body: str, error: str) -> None:
    found = calls.observation("check-metrics", 1.0, notifications.Answer(status, {}, body))
    assert found == {"at": 1.0, "error": error}


def test_answers_kept_are_bounded() -> None:
    caller = calls.Caller({}, lambda: 0.0, remembered=3)
    for n in range(5):
        caller.ensure(APP, key(number=n), http_steps.HttpCall("request", "GET", "x"))
    assert [caller.answered(key(number=n), "request") is not None for n in range(5)] == \
        [False, False, True, True, True]


# -- whole reconciles ---------------------------------------------------------------------------


class Answering:
    """A sender that answers every call at once with ``body`` (and records it)."""

    def __init__(self, body: str, status: int = 200) -> None:
        self.body, self.status = body, status
        self.calls: list[notifications.Call] = []

    def submit_call(self, call: notifications.Call) -> notifications.Admission:
        self.calls.append(call)
        call.done(notifications.Answer(self.status, {}, self.body))
        return notifications.Admission(True)


def request_app(url: str) -> dict[str, Any]:
    return {
        "apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
        "metadata": {"name": "shop", "namespace": "shop", "annotations": {}},
        "spec": {
            "components": [{"name": "cfg", "type": "config",
                            "properties": {"data": {"fixed": "1"}}}],
            "workflow": {"steps": [
                {"name": "ask", "type": "request", "properties": {"url": url},
                 "outputs": [{"name": "greeting", "valueFrom": "response.greeting"}]},
                {"name": "apply", "type": "apply-component",
                 "properties": {"component": "cfg", "cluster": "member1"},
                 "inputs": [{"from": "greeting", "parameterKey": "data.greeting"}]}]}}}


async def reconcile_until(mc: MC, caller: calls.Caller, clock: Clock,
                          recorder: app_fakes.Recorder, times: int = 6) -> dict[str, Any]:
    reconciler = app_fakes.reconciler(mc, recorder, clock=clock, caller=caller)
    for _ in range(times):
        await reconciler.reconcile(REQUEST)
        clock.now += 1
    status: dict[str, Any] = must(mc, "hub", "Application", "shop")["status"]
    return status


async def test_a_requests_answer_feeds_a_later_component() -> None:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    clock = Clock()
    outbox = Answering('{"greeting": "hello"}')
    caller = calls.Caller({"request": outbox}, clock)
    recorder = app_fakes.Recorder()
    set_app(mc, request_app("https://api.example/greet?token=SECRET"))
    status = await reconcile_until(mc, caller, clock, recorder)
    steps = {s["name"]: s for s in status["workflow"]["steps"]}
    assert steps["ask"]["phase"] == "succeeded", steps["ask"]
    assert must(mc, "member1", "ConfigMap", "cfg")["data"]["greeting"] == "hello"
    assert [c.url for c in outbox.calls] == ["https://api.example/greet?token=SECRET"]
    assert "SECRET" not in json.dumps(status) and "SECRET" not in str(recorder.events)


async def test_a_request_answered_404_fails_the_workflow_without_the_url() -> None:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    clock = Clock()
    caller = calls.Caller({"request": Answering("nope", 404)}, clock)
    recorder = app_fakes.Recorder()
    set_app(mc, request_app("https://api.example/greet?token=SECRET"))
    status = await reconcile_until(mc, caller, clock, recorder, times=3)
    ask = status["workflow"]["steps"][0]
    assert (ask["phase"], ask["message"]) == ("failed", "the request failed: answered 404")
    assert "SECRET" not in json.dumps(status) and "SECRET" not in str(recorder.events)


async def test_nothing_is_called_before_the_status_says_the_step_asked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The status write fails: no call; the retried reconcile calls once."""
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    clock = Clock()
    outbox = Answering('{"greeting": "hello"}')
    caller = calls.Caller({"request": outbox}, clock)
    set_app(mc, request_app("https://api.example/"))

    async def refuse(self: Writer, *args: Any, **kw: Any) -> Any:
        raise kube.ApiError("hub", 500, "InternalError", "etcd timeout")

    reconciler = app_fakes.reconciler(mc, app_fakes.Recorder(), clock=clock, caller=caller)
    with monkeypatch.context() as patched:
        patched.setattr(Writer, "patch_status", refuse)
        with pytest.raises(kube.ApiError):
            await reconciler.reconcile(REQUEST)
    assert outbox.calls == []
    await reconcile_until(mc, caller, clock, app_fakes.Recorder(), times=3)
    assert len(outbox.calls) == 1


async def test_without_an_answer_the_step_waits_and_the_reconcile_returns() -> None:
    """A sender that never answers: each reconcile returns at once, the step running."""
    class Silent:
        def __init__(self) -> None:
            self.calls = 0

        def submit_call(self, call: notifications.Call) -> notifications.Admission:
            self.calls += 1
            return notifications.Admission(True)

    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    clock = Clock()
    silent = Silent()
    set_app(mc, request_app("https://api.example/"))
    status = await reconcile_until(mc, calls.Caller({"request": silent}, clock), clock,
                                   app_fakes.Recorder(), times=4)
    ask = status["workflow"]["steps"][0]
    assert (ask["phase"], ask["message"]) == ("running", "waiting for the answer")
    assert silent.calls == 1


def test_an_answer_becomes_the_steps_observation() -> None:
    prometheus = '{"status":"success","data":{"resultType":"scalar","result":[1,"10"]}}'
    assert calls.observation("check-metrics", 2.0, notifications.Answer(
        200, {}, prometheus)) == {"at": 2.0, "value": 10.0}
    found = calls.observation("request", 2.0, notifications.Answer(200, {}, "<html>"))
    assert found["invalid"].startswith("the answer is not JSON")
    assert "response" not in found
    found = calls.observation("request", 2.0, notifications.Answer(500, {}, "<html>"))
    assert found["statusCode"] == 500 and "invalid" not in found


def test_a_webhook_of_an_application_over_the_body_cap_is_not_sent() -> None:
    sent: list[notifications.Call] = []

    class Outbox:
        def submit_call(self, call: notifications.Call) -> notifications.Admission:
            sent.append(call)
            return notifications.Admission(True)

    caller = calls.Caller({"notification": Outbox()}, lambda: 1.0)
    big = {**APP, "spec": {"components": [], "note": "x" * http_steps.MAX_BODY}}
    caller.ensure(big, key(), http_steps.HttpCall("notification", "POST", "x", send_app=True))
    assert sent == []
    found = caller.answered(key(), "webhook")
    assert found is not None and "larger than 262144 bytes" in found["error"]
