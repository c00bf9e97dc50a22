"""Which addresses ``WebFetch`` may connect to (no server-side request forgery).

:func:`blocked_reason` says why an address is not public (loopback, private, link-local with
the cloud metadata address 169.254.169.254, CGNAT, unique-local, multicast, unspecified,
reserved, and those in IPv4-mapped and other IPv6 forms); :func:`allowance` turns the
``allow_private`` setting into a test; :func:`system_resolve` is the default resolver.
Standard library only, so the tools that use it load without an HTTP client.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence

__all__ = ["IPAddress", "Refused", "Resolver", "allowance", "blocked_reason", "system_resolve"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""How a host name becomes addresses: ``await resolve(host, port)``."""
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def blocked_reason(ip: IPAddress) -> str | None:
    """Why ``WebFetch`` may not connect to ``ip`` by default (None: it is public)."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = ip.ipv4_mapped or ip.sixtofour
        if inner is None and ip in _NAT64:
            inner = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if inner is not None and (why := blocked_reason(inner)):
            return f"{why} (IPv4 {inner} in IPv6 form)"
        if ip.teredo is not None:
            return "a Teredo tunnel"
    checks = (
        (ip.is_unspecified, "unspecified"),
        (ip.is_loopback, "loopback"),
        (ip.is_link_local, "link-local (cloud metadata services answer there)"),
        (ip.is_multicast, "multicast"),
        (ip in _CGNAT, "shared (CGNAT)"),
        (ip.is_private, "private"),
        (isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local, "site-local"),
        (ip.is_reserved or not ip.is_global, "reserved, not public"),
    )
    return next((f"a {what} address" for hit, what in checks if hit), None)


def allowance(allow: bool | Sequence[str]) -> Callable[[IPAddress], bool]:
    """Which addresses are allowed although not public (a bad network is a ValueError)."""
    if isinstance(allow, bool):
        return lambda _ip: allow
    networks = [ipaddress.ip_network(n, strict=False) for n in allow]
    return lambda ip: any(ip in net for net in networks)


async def system_resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class Refused(Exception):
    """A request (the first or a redirect) would reach an address that is not allowed."""

    def __init__(self, url: str, why: str) -> None:
        super().__init__(why)
        self.url, self.why = url, why
