"""The notification sender: the outbound policy on real sockets (finding 2: a listener on
127.0.0.1 that must receive nothing), no redirects, no cookies, tenant-safe reports; and
the fairness and bounds of the queue on a fake transport (finding 3)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from aiohttp import web

from federation.contexts import egress
from federation.controllers.applications import notifications

APP = {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
       "metadata": {"name": "shop", "namespace": "team-a", "uid": "u1"}}


def message(url: str, namespace: str = "team-a", step: str = "tell") -> notifications.Message:
    app = {**APP, "metadata": {**APP["metadata"], "namespace": namespace}}  # type: ignore[dict-item]
    return notifications.Message(app, step, url, "hi")


class Reports:
    """The sender's report callback: what was not delivered, and why."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.changed = asyncio.Event()

    async def __call__(self, message: notifications.Message, why: str) -> None:
        self.seen.append((message.url, why))
        self.changed.set()

    async def wait_for(self, count: int) -> None:
        while len(self.seen) < count:
            self.changed.clear()
            await self.changed.wait()


@contextlib.asynccontextmanager
async def running(sender: notifications.Sender) -> AsyncIterator[notifications.Sender]:
    task = asyncio.create_task(sender.run())
    try:
        yield sender
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# -- a real listener -------------------------------------------------------------------------


class Listener:
    """An HTTP server on 127.0.0.1 (and ::1 when the host has it) recording every request."""

    def __init__(self) -> None:
        self.received: list[tuple[str, str, dict[str, str], bytes]] = []
        self.arrived = asyncio.Event()
        self.port = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.received.append((request.method, request.path, dict(request.headers),
                              await request.read()))
        self.arrived.set()
        if request.path == "/redirect":
            raise web.HTTPTemporaryRedirect(f"http://127.0.0.1:{self.port}/target")
        response = web.Response(text="ok")
        if request.path == "/cookie":
            response.set_cookie("session", "SECRET-COOKIE")
        return response


def has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@contextlib.asynccontextmanager
async def serving() -> AsyncIterator[Listener]:
    """The listener, on this test's loop (an async fixture may run on another one)."""
    found = Listener()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", found.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    found.port = runner.addresses[0][1]
    if has_ipv6_loopback():
        await web.TCPSite(runner, "::1", found.port).start()
    try:
        yield found
    finally:
        await runner.cleanup()


def attack_urls(port: int) -> Iterator[str]:
    """Finding 2's URLs (aimed at the listener where they name a port) and their cousins."""
    yield f"http://127.0.0.1:{port}/"
    yield "http://169.254.169.254/latest/meta-data/"
    yield f"http://[::1]:{port}/"
    yield f"http://localhost:{port}/"
    yield f"http://0.0.0.0:{port}/"
    yield f"http://2130706433:{port}/"
    yield f"http://user:pw@127.0.0.1:{port}/"
    yield f"http://127.1:{port}/"
    yield f"http://[::ffff:127.0.0.1]:{port}/"
    yield f"http://[::ffff:7f00:1]:{port}/"
    yield f"http://127.0.0.1.nip.invalid:{port}/"  # a name: resolves to nothing, refused


@pytest.mark.timeout(30)
async def test_the_attack_urls_reach_nothing_with_the_default_policy() -> None:
    """Every destination of finding 2 is refused before a byte is sent: the listener on
    127.0.0.1 receives nothing, and each report is the tenant-safe wording."""
    async with serving() as listener:
        reports = Reports()
        sender = notifications.Sender(egress.EgressPolicy(), reports)
        urls = list(attack_urls(listener.port))
        async with running(sender):
            for url in urls:
                assert sender.submit(message(url)).queued
            await asyncio.wait_for(reports.wait_for(len(urls)), 20)
        assert listener.received == []
        assert sorted(url for url, _ in reports.seen) == sorted(urls)
        for url, why in reports.seen:
            assert why == expected(url), url
            assert str(listener.port) not in why and "127" not in why


def expected(url: str) -> str:
    """Refused by the policy; a name that resolves to nothing is unreachable; aiohttp
    itself refuses the non-canonical IPv4 forms before any lookup (and so does parsing:
    test_notifications.py), which is unreachable too."""
    if "invalid" in url or "//127.1:" in url or "//2130706433:" in url:
        return egress.UNREACHABLE
    return egress.REFUSED


@pytest.mark.timeout(30)
async def test_an_allowed_listener_does_receive_the_post() -> None:
    """The control: with 127.0.0.0/8 allowed the same listener gets the POST, so 'received
    nothing' above is the policy's doing."""
    async with serving() as listener:
        reports = Reports()
        sender = notifications.Sender(egress.EgressPolicy(egress.parse_networks(["127.0.0.0/8"])),
                                      reports)
        async with running(sender):
            sender.submit(message(f"http://127.0.0.1:{listener.port}/hook"))
            await asyncio.wait_for(listener.arrived.wait(), 20)
        method, path, _, body = listener.received[0]
        assert (method, path, body) == ("POST", "/hook", b'{"text": "hi"}')
        assert reports.seen == []


@pytest.mark.timeout(30)
async def test_a_redirect_is_not_followed() -> None:
    """A 307 to another path is an answer, not a new destination: not accepted, and the
    target receives nothing."""
    async with serving() as listener:
        reports = Reports()
        sender = notifications.Sender(egress.EgressPolicy(egress.parse_networks(["127.0.0.0/8"])),
                                      reports)
        async with running(sender):
            sender.submit(message(f"http://127.0.0.1:{listener.port}/redirect"))
            await asyncio.wait_for(reports.wait_for(1), 20)
        assert [path for _, path, _, _ in listener.received] == ["/redirect"]
        assert reports.seen == [(f"http://127.0.0.1:{listener.port}/redirect",
                                 notifications.NOT_ACCEPTED)]


@pytest.mark.timeout(30)
async def test_one_tenants_cookie_is_not_sent_to_another() -> None:
    async with serving() as listener:
        reports = Reports()
        sender = notifications.Sender(egress.EgressPolicy(egress.parse_networks(["127.0.0.0/8"])),
                                      reports, notifications.SenderSettings(workers=1))
        async with running(sender):
            sender.submit(message(f"http://127.0.0.1:{listener.port}/cookie"))
            sender.submit(message(f"http://127.0.0.1:{listener.port}/other", namespace="team-b"))
            while len(listener.received) < 2:
                listener.arrived.clear()
                await asyncio.wait_for(listener.arrived.wait(), 20)
        assert "SECRET-COOKIE" not in str(listener.received[1][2])


# -- fairness and bounds, on a fake transport ------------------------------------------------


class Transport:
    """URLs under ``blackhole`` never answer; the others answer 200 at once, in order."""

    def __init__(self) -> None:
        self.delivered: list[str] = []
        self.hanging: list[str] = []
        self.release = asyncio.Event()
        self.progress = asyncio.Event()

    async def post(self, url: str, body: Any) -> int:
        if "blackhole" in url:
            self.hanging.append(url)
            self.progress.set()
            await self.release.wait()
            return 200
        self.delivered.append(url)
        self.progress.set()
        return 200

    async def close(self) -> None:
        return None

    async def until(self, condition: Any) -> None:
        while not condition():
            self.progress.clear()
            await self.progress.wait()


async def no_report(message: notifications.Message, why: str) -> None:
    raise AssertionError(f"unexpected report {why}")


@pytest.mark.timeout(30)
async def test_a_namespace_whose_endpoints_hang_never_delays_another() -> None:
    """Finding 3: team-a's twenty POSTs to a blackhole hold two workers; team-b's message,
    submitted after all of them, is delivered while every one of team-a's still hangs."""
    transport = Transport()
    sender = notifications.Sender(egress.EgressPolicy(), no_report, transport=transport)
    for n in range(20):
        assert sender.submit(message(f"http://blackhole.example/{n}")).queued
    sender.submit(message("http://hook.example/b", namespace="team-b"))
    async with running(sender):
        await transport.until(lambda: transport.delivered and len(transport.hanging) >= 2)
        assert transport.delivered == ["http://hook.example/b"]
        assert len(transport.hanging) == sender.settings.namespace_in_flight
        assert sender.waiting == 18


@pytest.mark.timeout(30)
async def test_namespaces_take_turns() -> None:
    """One worker, two namespaces with five messages each: a, b, a, b... not a's five first."""
    transport = Transport()
    sender = notifications.Sender(egress.EgressPolicy(), no_report,
                                  notifications.SenderSettings(workers=1),
                                  transport=transport)
    for n in range(5):
        sender.submit(message(f"http://a.example/{n}"))
    for n in range(5):
        sender.submit(message(f"http://b.example/{n}", namespace="team-b"))
    async with running(sender):
        await transport.until(lambda: len(transport.delivered) == 10)
    assert [url.split("/")[2][0] for url in transport.delivered] == list("ababababab")


def test_a_full_namespace_backlog_drops_the_newest_and_warns_once(
        caplog: pytest.LogCaptureFixture) -> None:
    settings = notifications.SenderSettings(namespace_backlog=3, backlog=100)
    sender = notifications.Sender(egress.EgressPolicy(), no_report, settings,
                                  transport=Transport())
    with caplog.at_level(logging.WARNING, "federation.notifications"):
        answers = [sender.submit(message(f"http://h.example/?token=SECRET{n}"))
                   for n in range(6)]
    assert [a.queued for a in answers] == [True] * 3 + [False] * 3
    assert [a.warn for a in answers] == [False] * 3 + [True, False, False]
    assert sender.submit(message("http://h.example/", namespace="team-b")).queued
    assert len(caplog.records) == 1 and "team-a" in caplog.text
    assert "SECRET" not in caplog.text and "h.example" not in caplog.text


@pytest.mark.timeout(30)
async def test_after_the_backlog_drained_a_new_drop_warns_again(
        caplog: pytest.LogCaptureFixture) -> None:
    transport = Transport()
    settings = notifications.SenderSettings(namespace_backlog=1)
    sender = notifications.Sender(egress.EgressPolicy(), no_report, settings,
                                  transport=transport)
    sender.submit(message("http://h.example/1"))
    assert sender.submit(message("http://h.example/2")).warn
    with caplog.at_level(logging.WARNING, "federation.notifications"):
        async with running(sender):
            await transport.until(lambda: len(transport.delivered) == 1)
    assert "1 dropped while its backlog was full" in caplog.text
    sender.submit(message("http://h.example/3"))
    assert sender.submit(message("http://h.example/4")).warn


def test_the_whole_backlog_is_bounded_too() -> None:
    """Many namespaces, each within its share: the total is capped all the same."""
    settings = notifications.SenderSettings(namespace_backlog=2, backlog=5)
    sender = notifications.Sender(egress.EgressPolicy(), no_report, settings,
                                  transport=Transport())
    queued = [sender.submit(message("http://h.example/", namespace=f"ns{n}")).queued
              for n in range(8)]
    assert queued == [True] * 5 + [False] * 3
    assert sender.waiting == 5


class Failing:
    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def post(self, url: str, body: Any) -> int:
        raise self.error

    async def close(self) -> None:
        return None


@pytest.mark.timeout(30)
@pytest.mark.parametrize("error", [
    UnicodeError("idna SECRET"), ValueError("SECRET in text"), TimeoutError(),
    RuntimeError("SECRET"), OSError(111, "Connection refused to 10.0.0.7:6443 SECRET"),
    egress.EgressRefused()])
async def test_any_failure_is_a_report_in_the_tenants_words(
        caplog: pytest.LogCaptureFixture, error: BaseException) -> None:
    reports = Reports()
    sender = notifications.Sender(egress.EgressPolicy(), reports, transport=Failing(error))
    sender.submit(message("http://hook.example/?token=SECRET"))
    with caplog.at_level(logging.WARNING, "federation.notifications"):
        async with running(sender):
            await reports.wait_for(1)
    assert reports.seen[0][1] in (egress.REFUSED, egress.UNREACHABLE)
    assert type(error).__name__ in caplog.text
    assert "SECRET" not in caplog.text and "hook.example" not in caplog.text
    assert "10.0.0.7" not in str(reports.seen[0][1])


@pytest.mark.timeout(30)
async def test_a_post_over_its_time_is_unreachable() -> None:
    transport = Transport()
    reports = Reports()
    sender = notifications.Sender(egress.EgressPolicy(), reports,
                                  notifications.SenderSettings(timeout=0), transport=transport)
    sender.submit(message("http://blackhole.example/"))
    async with running(sender):
        await reports.wait_for(1)
    assert reports.seen == [("http://blackhole.example/", egress.UNREACHABLE)]


@pytest.mark.timeout(30)
async def test_an_error_answer_is_not_accepted() -> None:
    class Answers:
        async def post(self, url: str, body: Any) -> int:
            return 404

        async def close(self) -> None:
            return None

    reports = Reports()
    sender = notifications.Sender(egress.EgressPolicy(), reports, transport=Answers())
    sender.submit(message("http://hook.example/"))
    async with running(sender):
        await reports.wait_for(1)
    assert reports.seen == [("http://hook.example/", notifications.NOT_ACCEPTED)]
