"""``WebFetch`` and ``WebSearch``, named and shaped as Claude Code's.

``WebFetch`` makes one real HTTP(S) GET with httpx and returns the page as text: HTML is
stripped to its readable text by the standard library's :mod:`html.parser` (scripts, styles
and other non-text elements left out), other text types (plain text, JSON, XML, …) are
returned as they are, and anything else is refused. Everything about it is bounded: the
whole fetch, redirects included, must finish within ``timeout_s`` seconds
(:data:`WEB_TIMEOUT_S`), at most ``max_bytes`` bytes of the body are read
(:data:`WEB_MAX_BYTES`; a larger body is cut and the result says so), at most
:data:`WEB_MAX_CHARS` characters are returned, at most :data:`WEB_MAX_REDIRECTS` redirects
are followed. When nothing can be reached (no network, a refused connection, a name that
does not resolve) the result says exactly that.

``WebFetch`` only reaches public addresses (no server-side request forgery): for the first
request and for every redirect it resolves the host once, refuses when an address it got is
not public (:func:`blocked_reason`: loopback, private, link-local with the cloud metadata
address 169.254.169.254, CGNAT, unique-local, multicast, unspecified, reserved, and those in
IPv4-mapped and other IPv6 forms) and connects to exactly the address it checked (the host
name still goes in ``Host`` and TLS SNI, and certificates are checked against it), so a name
that resolves to another address a moment later (DNS rebinding) gains nothing.
``allow_private=True`` (``web_fetch_allow_private = true`` in ``config.toml``) lifts the
refusal, for pages on the user's own network; a list of networks lifts it for those only.

``WebSearch`` asks a pluggable :class:`SearchBackend`; none is set by default, and the tool
then answers with a clear "not configured" error. :class:`SearxngBackend` asks a SearXNG
instance's JSON API (``web_search_url`` in ``config.toml``). :func:`make_web_search` makes
the tool with a backend, :func:`make_web_fetch` one with other limits.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
import ssl
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Annotated, Any, Protocol
from urllib.parse import urlsplit

import httpx
from pydantic import Field

from retinue.errors import ToolError
from retinue.tools.base import Tool, tool

__all__ = [
    "SEARCH_MAX_BYTES",
    "WEB_MAX_BYTES",
    "WEB_MAX_CHARS",
    "WEB_MAX_REDIRECTS",
    "WEB_TIMEOUT_S",
    "Resolver",
    "SearchBackend",
    "SearchHit",
    "SearxngBackend",
    "blocked_reason",
    "html_to_text",
    "make_web_fetch",
    "make_web_search",
    "web_tools",
]

WEB_TIMEOUT_S = 30.0
"""Seconds one ``WebFetch`` (or one ``WebSearch``) may take in all."""
WEB_MAX_BYTES = 5 * 1024 * 1024
"""Most bytes of a response body ``WebFetch`` reads."""
WEB_MAX_CHARS = 100_000
"""Most characters ``WebFetch`` returns."""
WEB_MAX_REDIRECTS = 5
"""Most redirects ``WebFetch`` follows."""
SEARCH_MAX_BYTES = 2 * 1024 * 1024
"""Most bytes of a search service's answer ``WebSearch`` reads."""
_SKIP = frozenset({"script", "style", "noscript", "template", "svg", "iframe", "object"})
_BLOCK = frozenset({
    "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "fieldset",
    "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr",
    "li", "main", "nav", "ol", "p", "pre", "section", "table", "tr", "ul", "title",
})  # fmt: skip
_TEXT_TYPES = ("json", "xml", "javascript", "ecmascript", "yaml", "toml", "csv")


class _TextParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self._skipping += 1
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self._skipping = max(self._skipping - 1, 0)
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """The readable text of an HTML page: one line per block, spaces collapsed."""
    parser = _TextParser()
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolError(f"not an http(s) URL: {url!r}; WebFetch fetches http:// and https://")


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


def _allowance(allow: bool | Sequence[str]) -> Callable[[IPAddress], bool]:
    """Which addresses are allowed although not public (a bad network is a ValueError)."""
    if isinstance(allow, bool):
        return lambda _ip: allow
    networks = [ipaddress.ip_network(n, strict=False) for n in allow]
    return lambda ip: any(ip in net for net in networks)


async def _system_resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class _Refused(Exception):
    def __init__(self, url: str, why: str) -> None:
        super().__init__(why)
        self.url, self.why = url, why


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
                raise _Refused(str(url), f"{named}{address}, {why}")
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


_PORTS = {"http": 80, "https": 443}


async def _read_capped(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """Up to ``max_bytes`` of the body, and whether it was cut."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > max_bytes:
            return bytes(body[:max_bytes]), True
    return bytes(body), False


async def _get(
    url: str, max_bytes: int, timeout_s: float, transport: httpx.AsyncBaseTransport
) -> tuple[httpx.Response, bytes, bool]:
    """The response, up to ``max_bytes`` of its body, and whether the body was cut."""
    headers = {"User-Agent": "retinue-webfetch/1", "Accept": "text/html, text/*;q=0.9, */*;q=0.5"}
    async with (
        httpx.AsyncClient(
            follow_redirects=True,
            max_redirects=WEB_MAX_REDIRECTS,
            headers=headers,
            timeout=httpx.Timeout(timeout_s),
            transport=transport,
        ) as client,
        client.stream("GET", url) as response,
    ):
        body, cut = await _read_capped(response, max_bytes)
        return response, body, cut


def _unreachable(url: str, exc: Exception) -> ToolError:
    host = urlsplit(url).netloc
    return ToolError(
        f"could not reach {host}: {exc or type(exc).__name__} (the network may be unreachable, "
        "the name may not resolve, or nothing answers at that address)"
    )


def _as_text(response: httpx.Response, body: bytes) -> str:
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    charset = response.charset_encoding or "utf-8"
    try:
        text = body.decode(charset, errors="replace")
    except LookupError:
        text = body.decode("utf-8", errors="replace")
    if kind in ("text/html", "application/xhtml+xml") or (not kind and "<html" in text[:2000]):
        return html_to_text(text)
    if kind.startswith("text/") or any(t in kind for t in _TEXT_TYPES) or not kind:
        return text
    raise ToolError(f"{response.url} is {kind}, not text; WebFetch only returns text")


def make_web_fetch(
    *,
    timeout_s: float = WEB_TIMEOUT_S,
    max_bytes: int = WEB_MAX_BYTES,
    allow_private: bool | Sequence[str] = False,
    resolve: Resolver | None = None,
    verify: ssl.SSLContext | None = None,
) -> Tool:
    """A ``WebFetch`` tool with these limits (the built-in one uses the defaults).

    ``allow_private=True`` lets it reach loopback, private and link-local addresses too, a
    list of networks (``["192.168.1.0/24"]``) those only; ``resolve`` replaces the system's
    name resolution (tests); ``verify`` is the TLS context that checks certificates
    (default: the system's trusted authorities).
    """
    resolver = resolve or _system_resolve
    allowed = _allowance(allow_private)

    @tool("WebFetch")
    async def web_fetch(
        url: Annotated[str, Field(max_length=4000, description="The http(s) URL to fetch")],
        prompt: Annotated[
            str | None, Field(description="What you are looking for in the page (optional)")
        ] = None,
    ) -> str:
        """Fetch a web page (HTTP GET) and return its content as text.

        HTML is converted to plain text; other text (JSON, XML, plain text) is returned as
        it is; binary content is refused. Large pages are cut. Read the text for what
        prompt asks.
        """
        _check_url(url)
        transport = _PinnedTransport(allowed=allowed, resolve=resolver, verify=verify)
        try:
            async with asyncio.timeout(timeout_s):
                response, body, cut = await _get(url, max_bytes, timeout_s, transport)
        except _Refused as exc:
            via = "" if exc.url == str(httpx.URL(url)) else f" (a redirect from {url})"
            raise ToolError(
                f"refused to fetch {exc.url}{via}: {exc.why}; WebFetch only fetches public "
                "addresses (web_fetch_allow_private = true in config.toml allows the others)"
            ) from None
        except httpx.ConnectError as exc:
            raise _unreachable(url, exc) from None
        except (TimeoutError, httpx.TimeoutException):
            raise ToolError(f"fetching {url} took longer than {timeout_s:g} s; gave up") from None
        except httpx.TooManyRedirects:
            raise ToolError(f"{url} redirects more than {WEB_MAX_REDIRECTS} times") from None
        except httpx.HTTPError as exc:
            raise ToolError(f"fetching {url} failed: {type(exc).__name__}: {exc}") from None
        if response.status_code >= 400:
            reason = response.reason_phrase or "error"
            raise ToolError(f"{response.url} answered HTTP {response.status_code} {reason}")
        text = await asyncio.to_thread(_as_text, response, body)  # parsing a page takes a while
        notes = [f"(the body was cut after {max_bytes} bytes)"] if cut else []
        if len(text) > WEB_MAX_CHARS:
            notes.append(f"(text cut to {WEB_MAX_CHARS} of {len(text)} characters)")
            text = text[:WEB_MAX_CHARS]
        head = f"{response.url} (HTTP {response.status_code})"
        return "\n\n".join([head, text or "(no text content)", *notes])

    return web_fetch


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One search result."""

    title: str
    url: str
    snippet: str = ""


class SearchBackend(Protocol):
    """What ``WebSearch`` asks: up to ``limit`` results for ``query``."""

    async def search(self, query: str, *, limit: int) -> Sequence[SearchHit]: ...


_NOT_CONFIGURED = (
    "WebSearch is not configured: no search backend is set (it is off by default). The user "
    "can turn it on with web_search_url (a SearXNG instance) in config.toml; a program, with "
    "retinue.tools.builtin.web.make_web_search(backend). Use WebFetch on a URL you know instead."
)


@dataclass(frozen=True, slots=True)
class SearxngBackend:
    """A SearXNG instance's JSON search API: ``GET <url>/search?q=…&format=json``.

    ``url`` is the instance's address (``http://127.0.0.1:8888``, or its ``…/search``); the
    instance must allow the JSON format (``search: formats: [html, json]`` in its
    ``settings.yml``). It is the user's own service, so private addresses are allowed.
    At most :data:`SEARCH_MAX_BYTES` of the answer are read.
    """

    url: str
    timeout_s: float = WEB_TIMEOUT_S

    @property
    def endpoint(self) -> str:
        base = self.url.rstrip("/")
        return base if base.endswith("/search") else base + "/search"

    async def search(self, query: str, *, limit: int) -> Sequence[SearchHit]:
        where = f"the search service at {self.endpoint}"
        params = {"q": query, "format": "json"}
        headers = {"User-Agent": "retinue-websearch/1", "Accept": "application/json"}
        try:
            async with (
                httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s), headers=headers) as c,
                c.stream("GET", self.endpoint, params=params) as response,
            ):
                body, cut = await _read_capped(response, SEARCH_MAX_BYTES)
        except httpx.TimeoutException:
            raise ToolError(f"{where} took longer than {self.timeout_s:g} s; gave up") from None
        except httpx.HTTPError as exc:
            raise ToolError(f"{where} cannot be reached: {exc or type(exc).__name__}") from None
        if response.status_code == 403:
            raise ToolError(
                f"{where} refused the JSON format (HTTP 403); a SearXNG instance must list "
                "json in search.formats of its settings.yml"
            )
        if response.is_error:
            raise ToolError(f"{where} answered HTTP {response.status_code}")
        return _searxng_hits(body, cut, where)[:limit]


def _searxng_hits(body: bytes, cut: bool, where: str) -> list[SearchHit]:
    """The results of a SearXNG JSON answer (``results``: ``title``, ``url``, ``content``)."""
    try:
        data: Any = None if cut else json.loads(body)
    except ValueError:
        data = None
    results: Any = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise ToolError(f"{where} did not answer with SearXNG's JSON (a 'results' list)")
    hits: list[SearchHit] = []
    for item in results:
        if isinstance(item, dict) and isinstance(item.get("url"), str):
            title, snippet = item.get("title"), item.get("content")
            hits.append(
                SearchHit(
                    str(title or item["url"])[:300],
                    item["url"][:2000],
                    str(snippet or "")[:1000],
                )
            )
    return hits


def _host_in(url: str, domains: Sequence[str]) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return any(host == d.lower() or host.endswith("." + d.lower()) for d in domains)


def make_web_search(
    backend: SearchBackend | None = None, *, timeout_s: float = WEB_TIMEOUT_S, limit: int = 10
) -> Tool:
    """A ``WebSearch`` tool asking ``backend``; without one it answers "not configured"."""

    @tool("WebSearch")
    async def web_search(
        query: Annotated[str, Field(min_length=2, max_length=500, description="Search query")],
        allowed_domains: Annotated[
            list[str] | None, Field(max_length=50, description="Only results from these")
        ] = None,
        blocked_domains: Annotated[
            list[str] | None, Field(max_length=50, description="No results from these")
        ] = None,
    ) -> str:
        """Search the web; returns titles, URLs and snippets (read a page with WebFetch)."""
        if backend is None:
            raise ToolError(_NOT_CONFIGURED)
        try:
            async with asyncio.timeout(timeout_s):
                hits = list(await backend.search(query, limit=limit))
        except TimeoutError:
            raise ToolError(f"the search took longer than {timeout_s:g} s; gave up") from None
        if allowed_domains:
            hits = [h for h in hits if _host_in(h.url, allowed_domains)]
        if blocked_domains:
            hits = [h for h in hits if not _host_in(h.url, blocked_domains)]
        if not hits:
            return f"(no results for {query!r})"
        return "\n\n".join(
            f"{n}. {h.title}\n   {h.url}" + (f"\n   {h.snippet}" if h.snippet else "")
            for n, h in enumerate(hits[:limit], 1)
        )

    return web_search


def web_tools(search_url: str | None = None, *, allow_private: bool = False) -> list[Tool]:
    """``WebFetch`` (default limits; private addresses only with ``allow_private``) and
    ``WebSearch`` (asking the SearXNG instance at ``search_url``; not configured without)."""
    backend = SearxngBackend(search_url) if search_url else None
    return [make_web_fetch(allow_private=allow_private), make_web_search(backend)]
