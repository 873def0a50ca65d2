"""Outbound policy: which addresses the control plane may dial on a tenant's behalf.

Three things a namespace tenant writes make the control plane open a connection: an
Application's notification URL, the URL of its HTTP workflow steps (webhook, request,
check-metrics) and a reloader address (an EndpointSlice in a member). Left alone, each
is a server-side request forgery: the tenant picks the destination and
the control plane dials it from inside the operator's network, with the control plane's
own reach (its health port, the node's kubelet, the cloud's metadata service, the API
server on loopback). So every such destination is resolved *here* and each address it
resolves to is checked against one rule before any byte is sent:

- refused: loopback, link-local (169.254.0.0/16 holds the metadata services), unspecified,
  multicast, reserved, private (RFC 1918, unique local fc00::/7), shared (100.64.0.0/10),
  the IPv4 space inside IPv6 (mapped, 6to4, NAT64 and Teredo forms are unwrapped and
  judged as the IPv4 address they carry) and the control plane's own listening addresses;
- unless an operator's allowlist (CIDRs, a ``fedctl run`` flag per purpose) holds the
  address: a reloader lives on a pod IP, which is private in every real cluster, so the
  operator lists the pod CIDRs there, and only there.

The check happens at connect time, on the addresses actually dialled (:meth:`connector`
for aiohttp resolves through the policy), so a DNS name that resolves to a public address
when checked and to 127.0.0.1 when dialled (rebinding) is refused too. Redirects are the
caller's to refuse (``allow_redirects=False``): a redirect is a new destination.

Failures shown to a tenant name no network detail (:func:`tenant_message`): "refused",
"timed out" and "TLS handshake failed" differ only by what is listening at the address, so
a tenant who could read them could scan the control plane's network through it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import abc as aiohttp_abc

from federation.untrusted.addresses import unwrap

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Networks refused unless allowed; ``is_private`` and friends cover most, these are explicit
#: so the rule does not change with the Python version's idea of "private".
_REFUSED_NETWORKS: tuple[Network, ...] = tuple(ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
    "172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4",
    "240.0.0.0/4", "::/128", "::1/128", "fc00::/7", "fe80::/10", "ff00::/8",
))

REFUSED = "destination refused by the control plane's outbound policy"
UNREACHABLE = "destination unreachable"


class EgressRefused(OSError):
    """A destination the outbound policy refuses. Its text names no address: it is shown to
    the tenant who wrote the destination (conditions, Events)."""

    def __init__(self) -> None:
        super().__init__(REFUSED)


def parse_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """CIDRs from flags (``10.244.0.0/16``, ``fd00::/8``, a bare address); ValueError names
    the bad one."""
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError:
            raise ValueError(f"not an IP network in CIDR form: {value!r}") from None
    return tuple(networks)


@dataclass(frozen=True)
class EgressPolicy:
    """The rule for one purpose (notifications and webhooks, requests, reloaders): see the
    module's docstring."""

    allow: tuple[Network, ...] = ()
    """Operator allowlist: addresses inside these networks are permitted even when private or
    loopback (the local fleet allows 127.0.0.0/8 for its reloaders)."""
    own: frozenset[Address] = field(default_factory=frozenset)
    """The control plane's own listening addresses (refused unless allowed: a tenant must
    not reach our health or metrics port through a routable address either)."""

    def permits(self, address: Address) -> bool:
        """Whether ``address`` may be dialled."""
        if any(address in network for network in self.allow if network.version
               == address.version):
            return True
        plain = unwrap(address)
        if plain != address:
            return self.permits(plain)
        if address in self.own:
            return False
        if any(address in network for network in _REFUSED_NETWORKS
               if network.version == address.version):
            return False
        return not (address.is_private or address.is_loopback or address.is_link_local
                    or address.is_multicast or address.is_reserved or address.is_unspecified)

    async def resolve(self, host: str, port: int) -> list[str]:
        """The addresses ``host`` resolves to, all permitted (else :class:`EgressRefused`).

        An IP literal is judged as it is; a name is resolved off the event loop. Every
        address must pass, not just one: the dialler may pick any of them.
        """
        literal = _literal(host)
        if literal is not None:
            if not self.permits(literal):
                raise EgressRefused()
            return [str(literal)]
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            raise OSError(UNREACHABLE) from None
        addresses = [str(info[4][0]) for info in infos]
        if not addresses or not all(self.permits(ipaddress.ip_address(a.split("%")[0]))
                                    for a in addresses):
            raise EgressRefused()
        return list(dict.fromkeys(addresses))

    def connector(self, **kwargs: Any) -> aiohttp.TCPConnector:
        """An aiohttp connector that applies this policy at connect time: names resolve
        through it, and every socket it opens is checked against the address it is about to
        dial (aiohttp skips the resolver for IP literals; the socket factory sees both)."""
        return aiohttp.TCPConnector(resolver=_PolicyResolver(self),
                                    socket_factory=self._socket, **kwargs)

    def _socket(self, addr_info: tuple[Any, ...]) -> socket.socket:
        family, kind, proto, _, sockaddr = addr_info
        if not self.permits(ipaddress.ip_address(str(sockaddr[0]).split("%")[0])):
            raise EgressRefused()
        return socket.socket(family=family, type=kind, proto=proto)


class _PolicyResolver(aiohttp_abc.AbstractResolver):
    """aiohttp's resolver hook: the addresses it returns are the ones dialled."""

    def __init__(self, policy: EgressPolicy) -> None:
        self.policy = policy

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET
                      ) -> list[aiohttp_abc.ResolveResult]:
        addresses = await self.policy.resolve(host, port)
        return [aiohttp_abc.ResolveResult(
            hostname=host, host=address, port=port,
            family=socket.AF_INET6 if ":" in address else socket.AF_INET,
            proto=0, flags=socket.AI_NUMERICHOST) for address in addresses]

    async def close(self) -> None:
        return None


def _literal(host: str) -> Address | None:
    """``host`` as an IP address when it is one (``[::1]`` and zone ids included)."""
    try:
        return ipaddress.ip_address(host.strip("[]").split("%")[0])
    except ValueError:
        return None


def tenant_message(error: BaseException) -> str:
    """What a tenant may read about a failed dial: refused by policy, or unreachable.

    aiohttp wraps the policy's refusal in its connector error (``os_error``) and Python in
    ``__cause__``/``__context__``; any of them being a refusal makes it one."""
    seen: BaseException | None = error
    for _ in range(5):
        if seen is None:
            break
        if isinstance(seen, EgressRefused):
            return REFUSED
        seen = getattr(seen, "os_error", None) or seen.__cause__ or seen.__context__
    return UNREACHABLE
