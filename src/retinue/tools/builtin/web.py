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

A redirect is followed on the same host only. One to another host is not: the result names
the new URL, and the model fetches it with a new call, which the permission gate decides as
any other (as Claude Code's WebFetch does). Otherwise a ``WebFetch(domain:good.com)`` allow
rule would let good.com's redirect reach any host, and a deny rule for a host would not hold
against a redirect there.

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
import json
import ssl
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Annotated, Any, Protocol
from urllib.parse import urlsplit

from pydantic import Field

from retinue.errors import ToolError
from retinue.tools.base import Tool, tool
from retinue.tools.builtin._netguard import Resolver, allowance, blocked_reason, system_resolve

if TYPE_CHECKING:  # httpx loads on the first fetch or search, not with the tools
    from collections.abc import Sequence

    from retinue.tools.builtin._web_http import Fetched

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
_MAX_URL = 4000  # characters of a URL WebFetch takes (its ``url`` parameter's bound)
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


def _as_text(page: Fetched) -> str:
    kind, body = page.content_type, page.body
    try:
        text = body.decode(page.charset or "utf-8", errors="replace")
    except LookupError:
        text = body.decode("utf-8", errors="replace")
    if kind in ("text/html", "application/xhtml+xml") or (not kind and "<html" in text[:2000]):
        return html_to_text(text)
    if kind.startswith("text/") or any(t in kind for t in _TEXT_TYPES) or not kind:
        return text
    raise ToolError(f"{page.url} is {kind}, not text; WebFetch only returns text")


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
    resolver = resolve or system_resolve
    allowed = allowance(allow_private)

    @tool("WebFetch")
    async def web_fetch(
        url: Annotated[str, Field(max_length=_MAX_URL, description="The http(s) URL to fetch")],
        prompt: Annotated[
            str | None, Field(description="What you are looking for in the page (optional)")
        ] = None,
    ) -> str:
        """Fetch a web page (HTTP GET) and return its content as text.

        HTML is converted to plain text; other text (JSON, XML, plain text) is returned as
        it is; binary content is refused. Large pages are cut. Read the text for what
        prompt asks. A redirect to another host is not followed: the result gives its URL;
        fetch that with a new call.
        """
        _check_url(url)
        from retinue.tools.builtin._web_http import fetch

        try:
            async with asyncio.timeout(timeout_s):
                page = await fetch(
                    url,
                    max_bytes=max_bytes,
                    timeout_s=timeout_s,
                    max_redirects=WEB_MAX_REDIRECTS,
                    allowed=allowed,
                    resolve=resolver,
                    verify=verify,
                )
        except TimeoutError:
            raise ToolError(f"fetching {url} took longer than {timeout_s:g} s; gave up") from None
        if page.moved_to:
            return _moved(page)
        if page.status >= 400:
            raise ToolError(f"{page.url} answered HTTP {page.status} {page.reason or 'error'}")
        text = await asyncio.to_thread(_as_text, page)  # parsing a page takes a while
        notes = [f"(the body was cut after {max_bytes} bytes)"] if page.cut else []
        if len(text) > WEB_MAX_CHARS:
            notes.append(f"(text cut to {WEB_MAX_CHARS} of {len(text)} characters)")
            text = text[:WEB_MAX_CHARS]
        head = f"{page.url} (HTTP {page.status})"
        return "\n\n".join([head, text or "(no text content)", *notes])

    return web_fetch


def _moved(page: Fetched) -> str:
    """The result for a redirect to another host (the server's URL, cut where no call
    could take it)."""
    to = page.moved_to
    if len(to) > _MAX_URL:
        to = f"{to[:_MAX_URL]}… (cut: longer than WebFetch takes)"
    return (
        f"{page.url} (HTTP {page.status}) redirects to another host: {to}\n\n"
        "WebFetch does not follow a redirect to another host. To fetch that page, call "
        "WebFetch again with the URL above; the permission rules decide that call as any other."
    )


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
        from retinue.tools.builtin._web_http import get_capped

        where = f"the search service at {self.endpoint}"
        status, body, cut = await get_capped(
            self.endpoint,
            params={"q": query, "format": "json"},
            headers={"User-Agent": "retinue-websearch/1", "Accept": "application/json"},
            timeout_s=self.timeout_s,
            max_bytes=SEARCH_MAX_BYTES,
            where=where,
        )
        if status == 403:
            raise ToolError(
                f"{where} refused the JSON format (HTTP 403); a SearXNG instance must list "
                "json in search.formats of its settings.yml"
            )
        if status >= 400:
            raise ToolError(f"{where} answered HTTP {status}")
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
