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

``WebSearch`` asks a pluggable :class:`SearchBackend`; none is set by default, and the tool
then answers with a clear "not configured" error. :func:`make_web_search` makes one with a
backend, :func:`make_web_fetch` one with other limits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Annotated, Protocol
from urllib.parse import urlsplit

import httpx
from pydantic import Field

from retinue.errors import ToolError
from retinue.tools.base import Tool, tool

__all__ = [
    "WEB_MAX_BYTES",
    "WEB_MAX_CHARS",
    "WEB_MAX_REDIRECTS",
    "WEB_TIMEOUT_S",
    "SearchBackend",
    "SearchHit",
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


async def _get(url: str, max_bytes: int, timeout_s: float) -> tuple[httpx.Response, bytes, bool]:
    """The response, up to ``max_bytes`` of its body, and whether the body was cut."""
    headers = {"User-Agent": "retinue-webfetch/1", "Accept": "text/html, text/*;q=0.9, */*;q=0.5"}
    async with (
        httpx.AsyncClient(
            follow_redirects=True,
            max_redirects=WEB_MAX_REDIRECTS,
            headers=headers,
            timeout=httpx.Timeout(timeout_s),
        ) as client,
        client.stream("GET", url) as response,
    ):
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > max_bytes:
                return response, bytes(body[:max_bytes]), True
        return response, bytes(body), False


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


def make_web_fetch(*, timeout_s: float = WEB_TIMEOUT_S, max_bytes: int = WEB_MAX_BYTES) -> Tool:
    """A ``WebFetch`` tool with these limits (the built-in one uses the defaults)."""

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
        try:
            async with asyncio.timeout(timeout_s):
                response, body, cut = await _get(url, max_bytes, timeout_s)
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
    "WebSearch is not configured: no search backend is set (it is off by default). The "
    "program running this agent can turn it on with "
    "retinue.tools.builtin.web.make_web_search(backend). Use WebFetch on a URL you know instead."
)


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


def web_tools() -> list[Tool]:
    """``WebFetch`` (default limits) and ``WebSearch`` (not configured)."""
    return [make_web_fetch(), make_web_search()]
