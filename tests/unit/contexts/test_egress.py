"""The outbound policy: the destinations of the SSRF findings are refused, public ones pass."""

from __future__ import annotations

import ipaddress
import re

import aiohttp
import pytest
from aiohttp import web

from federation.contexts import egress

# Destinations a tenant tried (issue 20, finding 2) and the forms that hide the same places.
REFUSED_LITERALS = [
    "127.0.0.1", "127.8.9.10", "169.254.169.254", "::1", "0.0.0.0", "::", "10.0.0.1",
    "172.16.5.4", "192.168.1.1", "100.64.0.1", "fd00::1", "fe80::1", "224.0.0.1",
    "::ffff:127.0.0.1", "::ffff:169.254.169.254", "2002:7f00:0001::1", "64:ff9b::7f00:1",
    "240.0.0.1", "255.255.255.255",
]


@pytest.mark.parametrize("host", REFUSED_LITERALS)
async def test_internal_addresses_are_refused(host: str) -> None:
    """Every loopback, link-local, private, unspecified or IPv4-in-IPv6 form is refused."""
    with pytest.raises(egress.EgressRefused) as refused:
        await egress.EgressPolicy().resolve(host, 80)
    assert host not in str(refused.value)


@pytest.mark.parametrize("host", ["8.8.8.8", "2001:4860:4860::8888", "[2606:4700::1111]"])
async def test_public_addresses_pass(host: str) -> None:
    assert await egress.EgressPolicy().resolve(host, 443) == [host.strip("[]")]


async def test_names_are_judged_by_every_address_they_resolve_to() -> None:
    """`localhost` and the decimal form 2130706433 resolve to loopback: refused."""
    policy = egress.EgressPolicy()
    for host in ("localhost", "2130706433"):
        with pytest.raises(egress.EgressRefused):
            await policy.resolve(host, 80)


async def test_allowlist_admits_exactly_its_networks() -> None:
    policy = egress.EgressPolicy(egress.parse_networks(["127.0.0.0/8", "10.244.0.0/16"]))
    assert await policy.resolve("127.0.0.1", 80) == ["127.0.0.1"]
    assert await policy.resolve("10.244.3.7", 80) == ["10.244.3.7"]
    assert await policy.resolve("::ffff:127.0.0.1", 80) == ["::ffff:7f00:1"]
    with pytest.raises(egress.EgressRefused):
        await policy.resolve("10.245.0.1", 80)
    with pytest.raises(egress.EgressRefused):
        await policy.resolve("169.254.169.254", 80)


def test_own_addresses_are_refused_even_when_public() -> None:
    own = ipaddress.ip_address("203.0.113.7")
    assert egress.EgressPolicy().permits(ipaddress.ip_address("8.8.4.4"))
    assert not egress.EgressPolicy(own=frozenset({own})).permits(own)


def test_bad_cidr_is_named() -> None:
    with pytest.raises(ValueError, match=re.escape("'10.0.0.300/8'")):
        egress.parse_networks(["10.0.0.300/8"])


async def test_unresolvable_names_say_unreachable_only() -> None:
    with pytest.raises(OSError) as failed:
        await egress.EgressPolicy().resolve("no-such-host.invalid", 80)
    assert str(failed.value) == egress.UNREACHABLE
    assert egress.tenant_message(failed.value) == egress.UNREACHABLE
    assert egress.tenant_message(egress.EgressRefused()) == egress.REFUSED


async def test_connector_refuses_a_loopback_listener_at_connect_time(
        unused_tcp_port: int) -> None:
    """A real listener on 127.0.0.1 is never reached through the policy's connector, whether
    named by address or by a name resolving there; with it allowed, it is reached."""
    hits: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", unused_tcp_port)
    await site.start()
    try:
        for url in (f"http://127.0.0.1:{unused_tcp_port}/a",
                    f"http://localhost:{unused_tcp_port}/b"):
            async with aiohttp.ClientSession(connector=egress.EgressPolicy().connector()) as s:
                with pytest.raises(aiohttp.ClientConnectorError) as refused:
                    await s.post(url, allow_redirects=False)
                assert egress.tenant_message(refused.value) == egress.REFUSED
        allowed = egress.EgressPolicy(egress.parse_networks(["127.0.0.0/8"]))
        async with aiohttp.ClientSession(connector=allowed.connector()) as s, \
                s.post(f"http://127.0.0.1:{unused_tcp_port}/c") as response:
            assert response.status == 200
    finally:
        await runner.cleanup()
    assert hits == ["/c"]

