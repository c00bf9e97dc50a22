"""The HTTP side of ``WebFetch`` and ``WebSearch`` (httpx), loaded on their first call.

:func:`fetch` makes one bounded GET that only reaches allowed addresses: each request, the
first and every redirect, goes through :class:`_PinnedTransport`, which resolves the host
once, refuses an address :func:`~retinue.tools.builtin._netguard.blocked_reason` names, and
connects to exactly the address it checked (the name still goes in ``Host`` and TLS SNI, and
certificates are checked against it). It follows a redirect on the same host only: the
permission rules decide a fetch by its host, so a redirect to another one is reported
(:attr:`Fetched.moved_to`), not followed, and fetching it is a new call the gate decides.
:func:`get_capped` is the plain bounded GET a search service gets. Failures come back as
:class:`~retinue.errors.ToolError` with one clear line.
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from retinue.errors import ToolError
from retinue.tools.builtin._netguard import IPAddress, Refused, Resolver, blocked_reason

__all__ = ["Fetched", "fetch", "get_capped"]

_PORTS = {"http": 80, "https": 443}
_HEADERS = {"User-Agent": "retinue-webfetch/1", "Accept": "text/html, text/*;q=0.9, */*;q=0.5"}


@dataclass(frozen=True, slots=True)
class Fetched:
    """A fetched page: where it ended up, its status, its type, and up to the cap of its body."""

    url: str
    status: int
    reason: str
    content_type: str
    charset: str | None
    body: bytes
    cut: bool
    moved_to: str = ""  # a redirect to another host, not followed (``url`` redirected there)


class _PinnedTransport(httpx.AsyncBaseTransport):
    """Each request goes to an address resolved once and checked, never to a name."""

    def __init__(
        self,
        *,
        allowed: Callable[[IPAddress], bool],
        resolve: Resolver,
        verify: ssl.SSLContext | None = None,
    ) -> None:
        self._inner = httpx.AsyncHTTPTransport(verify=verify or True)
        self._allowed = allowed
        self._resolve = resolve

    async def _addresses(self, url: httpx.URL) -> list[str]:
        host = url.host
        try:
            found = [str(ipaddress.ip_address(host))]  # a literal: no lookup at all
        except ValueError:
            try:
                found = list(await self._resolve(host, url.port or _PORTS[url.scheme]))
            except (OSError, UnicodeError) as exc:
                raise httpx.ConnectError(f"{host} does not resolve ({exc})") from None
        if not found:
            raise httpx.ConnectError(f"{host} does not resolve")
        for address in found:
            ip = ipaddress.ip_address(address.partition("%")[0])
            if not self._allowed(ip) and (why := blocked_reason(ip)):
                named = "" if address == host else f"{host} resolves to "
                raise Refused(str(url), f"{named}{address}, {why}")
        return list(dict.fromkeys(found))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        extensions = dict(request.extensions)
        if url.scheme == "https":
            extensions["sni_hostname"] = url.host  # certificates are checked for the name
        addresses = await self._addresses(url)
        for n, address in enumerate(addresses, 1):  # the checked ones, in the resolver's order
            pinned = httpx.Request(
                request.method,
                url.copy_with(host=address),
                headers=request.headers,  # Host: still the name
                stream=request.stream,
                extensions=extensions,
            )
            try:
                return await self._inner.handle_async_request(pinned)
            except httpx.ConnectError:
                if n == len(addresses):
                    raise
        raise AssertionError("unreachable: there is at least one address")

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Elsewhere(Exception):
    """A redirect to another host: the fetch stops there (see :class:`_OneHost`)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url


class _OneHost:
    """httpx event hooks that stop a fetch before a request to a host other than the first
    one's (a redirect), remembering the response that redirected."""

    def __init__(self, url: str) -> None:
        self.host = httpx.URL(url).host.lower()
        self.last: httpx.Response | None = None

    async def request(self, request: httpx.Request) -> None:
        if request.url.host.lower() != self.host:
            raise _Elsewhere(str(request.url))

    async def response(self, response: httpx.Response) -> None:
        self.last = response

    def moved(self, to: str) -> Fetched:
        """What :func:`fetch` answers for a redirect to ``to``, another host."""
        last = self.last
        assert last is not None  # (a redirect comes from a response)
        return Fetched(str(last.url), last.status_code, last.reason_phrase, "", None, b"",
                       cut=False, moved_to=to)  # fmt: skip


async def _read_capped(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """Up to ``max_bytes`` of the body, and whether it was cut."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > max_bytes:
            return bytes(body[:max_bytes]), True
    return bytes(body), False


def _unreachable(url: str, exc: Exception) -> ToolError:
    host = urlsplit(url).netloc
    return ToolError(
        f"could not reach {host}: {exc or type(exc).__name__} (the network may be unreachable, "
        "the name may not resolve, or nothing answers at that address)"
    )


async def fetch(
    url: str,
    *,
    max_bytes: int,
    timeout_s: float,
    max_redirects: int,
    allowed: Callable[[IPAddress], bool],
    resolve: Resolver,
    verify: ssl.SSLContext | None,
) -> Fetched:
    """GET ``url`` (redirects on its host followed; one to another host answered with
    ``moved_to``) from allowed addresses only; the caller bounds the whole fetch in time,
    ``timeout_s`` bounds each step."""
    transport = _PinnedTransport(allowed=allowed, resolve=resolve, verify=verify)
    one_host = _OneHost(url)
    try:
        async with (
            httpx.AsyncClient(
                follow_redirects=True,
                max_redirects=max_redirects,
                headers=_HEADERS,
                timeout=httpx.Timeout(timeout_s),
                transport=transport,
                event_hooks={"request": [one_host.request], "response": [one_host.response]},
            ) as client,
            client.stream("GET", url) as response,
        ):
            body, cut = await _read_capped(response, max_bytes)
    except _Elsewhere as exc:
        return one_host.moved(exc.url)
    except Refused as exc:
        via = "" if exc.url == str(httpx.URL(url)) else f" (a redirect from {url})"
        raise ToolError(
            f"refused to fetch {exc.url}{via}: {exc.why}; WebFetch only fetches public "
            "addresses (web_fetch_allow_private = true in config.toml allows the others)"
        ) from None
    except httpx.ConnectError as exc:
        raise _unreachable(url, exc) from None
    except httpx.TimeoutException:
        raise ToolError(f"fetching {url} took longer than {timeout_s:g} s; gave up") from None
    except httpx.TooManyRedirects:
        raise ToolError(f"{url} redirects more than {max_redirects} times") from None
    except httpx.HTTPError as exc:
        raise ToolError(f"fetching {url} failed: {type(exc).__name__}: {exc}") from None
    return Fetched(
        url=str(response.url),
        status=response.status_code,
        reason=response.reason_phrase,
        content_type=response.headers.get("content-type", "").split(";")[0].strip().lower(),
        charset=response.charset_encoding,
        body=body,
        cut=cut,
    )


async def get_capped(
    url: str,
    *,
    params: Mapping[str, str],
    headers: Mapping[str, str],
    timeout_s: float,
    max_bytes: int,
    where: str,
) -> tuple[int, bytes, bool]:
    """A plain GET of a service the user chose: its status, up to ``max_bytes`` of its body,
    and whether the body was cut; ``where`` names the service in errors."""
    try:
        async with (
            httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), headers=dict(headers)) as c,
            c.stream("GET", url, params=dict(params)) as response,
        ):
            body, cut = await _read_capped(response, max_bytes)
    except httpx.TimeoutException:
        raise ToolError(f"{where} took longer than {timeout_s:g} s; gave up") from None
    except httpx.HTTPError as exc:
        raise ToolError(f"{where} cannot be reached: {exc or type(exc).__name__}") from None
    return response.status_code, body, cut
