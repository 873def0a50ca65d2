"""IP addresses someone else named: the IPv4 address an IPv6 form carries.

A gateway routes an IPv4-mapped, 6to4, Teredo or NAT64 address to the IPv4 address inside
it, so a rule about IPv4 addresses (loopback, the metadata service, a private range) must
judge that address too. Used by the outbound policy (:mod:`federation.contexts.egress`) and
the export-service step (:mod:`federation.applications.export_service`).
"""

from __future__ import annotations

import ipaddress

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def unwrap(address: Address) -> Address:
    """The IPv4 address an IPv6 address carries (mapped, 6to4, NAT64, Teredo), else itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if address.teredo is not None:
            return address.teredo[1]
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address
