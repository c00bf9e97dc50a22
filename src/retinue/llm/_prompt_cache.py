"""An emulation of Anthropic's prompt cache, for the loopback Messages API: hits by prefix,
writes at breakpoints, lifetimes that expire by the clock.

Each rule is written from the prompt-caching page
(https://platform.claude.com/docs/en/build-with-claude/prompt-caching):

* the cached prefix is the whole prompt "tools, system, and messages (in that order) up to and
  including the block designated with cache_control", per model; a request may mark "up to 4
  cache breakpoints" (a fifth is a 400);
* at each breakpoint "the system automatically checks for cache hits at all previous content
  block boundaries (up to approximately 20 blocks before your explicit breakpoint)"; the
  longest live prefix found is read (``cache_read_input_tokens``);
* a breakpoint whose prefix is not cached yet is written (``cache_creation_input_tokens``,
  split by lifetime in ``cache_creation``), unless the prefix is shorter than the minimum
  cacheable length ("Shorter prompts cannot be cached, even if marked with cache_control");
* an entry lives 5 minutes, or 1 hour with ``"ttl": "1h"``; "the cache is refreshed for no
  additional cost each time the cached content is used".

The prompt's size is the larger of the loopback's own count (the scripted model's estimate
of the messages) and the serialized prompt at about four characters a token, tool
definitions included as the API counts them; it is split between the cached and uncached
parts in proportion to the serialized blocks' lengths.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_BREAKPOINTS", "TOO_MANY_BREAKPOINTS", "CacheUse", "PromptCache", "breakpoint_count"]

MAX_BREAKPOINTS = 4
LOOKBACK = 20
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
TOO_MANY_BREAKPOINTS = "A maximum of 4 blocks with cache_control may be provided. Found {n}."
_MAX_ENTRIES = 10_000


@dataclass(frozen=True, slots=True)
class CacheUse:
    """How one request used the cache: tokens read, and written per lifetime."""

    read: int = 0
    written_5m: int = 0
    written_1h: int = 0
    prompt: int = 0  # the whole prompt, cached or not

    @property
    def written(self) -> int:
        return self.written_5m + self.written_1h


@dataclass(frozen=True, slots=True)
class _Prefix:
    digest: str  # the hash of every block up to and including this one, and the model
    chars: int  # serialized length up to and including this block
    ttl: str | None  # the block's cache_control ttl when it is a breakpoint


def breakpoint_count(body: dict[str, Any]) -> int:
    """How many blocks of ``body`` carry ``cache_control``."""
    return sum(1 for _, block in _blocks(body) if isinstance(block, dict) and _marked(block))


def _marked(block: dict[str, Any]) -> bool:
    return isinstance(block.get("cache_control"), dict)


def _blocks(body: dict[str, Any]) -> list[tuple[str, Any]]:
    """The prompt's blocks in cache order: tools, system, then each message's content."""
    out: list[tuple[str, Any]] = [("tool", t) for t in body.get("tools") or ()]
    system = body.get("system")
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    out += [("system", b) for b in system or ()]
    for i, m in enumerate(body.get("messages") or ()):
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        out += [(f"{i}:{m.get('role')}", b) for b in content or ()]
    return out


def _prefixes(body: dict[str, Any]) -> list[_Prefix]:
    chain = hashlib.sha256(str(body.get("model", "")).encode())
    chars = 0
    out: list[_Prefix] = []
    for where, block in _blocks(body):
        plain = block
        ttl = None
        if isinstance(block, dict) and _marked(block):
            plain = {k: v for k, v in block.items() if k != "cache_control"}
            ttl = str(block["cache_control"].get("ttl") or "5m")
        text = json.dumps([where, plain], sort_keys=True, separators=(",", ":"))
        chain.update(text.encode())
        chars += len(text)
        out.append(_Prefix(chain.hexdigest(), chars, ttl))
    return out


class PromptCache:
    """The cache entries of one loopback server (thread-safe). Time is the monotonic clock
    plus what :meth:`advance` added, so a test or benchmark can let an hour pass at once.

    ``min_tokens``: the shortest prefix that is cached (1,024 tokens is the documented minimum
    of most Claude models; some take 2,048 or 4,096).
    """

    def __init__(self, *, min_tokens: int = 1024) -> None:
        self.min_tokens = min_tokens
        self._skipped = 0.0
        self._entries: dict[str, tuple[float, float]] = {}  # digest -> (expires, lifetime)
        self._lock = threading.Lock()

    def use(self, body: dict[str, Any], prompt_tokens: int) -> CacheUse:
        """Look ``body`` up, refresh what it reads, write its new breakpoints."""
        prefixes = _prefixes(body)
        if not prefixes:
            return CacheUse(prompt=prompt_tokens)
        total = prefixes[-1].chars
        prompt_tokens = max(prompt_tokens, total // 4)

        def tokens(index: int) -> int:
            return 0 if index < 0 else prompt_tokens * prefixes[index].chars // total

        marks = [i for i, p in enumerate(prefixes) if p.ttl is not None]
        with self._lock:
            now = time.monotonic() + self._skipped
            hit = max((self._hit(prefixes, b, now) for b in marks), default=-1)
            if hit >= 0:
                _, life = self._entries[prefixes[hit].digest]
                self._entries[prefixes[hit].digest] = (now + life, life)
            written = {"5m": 0, "1h": 0}
            covered = hit
            for b in marks:
                p = prefixes[b]
                if b <= covered or tokens(b) < self.min_tokens:
                    continue
                ttl = p.ttl if p.ttl in TTL_SECONDS else "5m"  # not live: ``hit`` >= b if it were
                self._entries[p.digest] = (now + TTL_SECONDS[ttl], TTL_SECONDS[ttl])
                written[ttl] += tokens(b) - tokens(covered)
                covered = b
            self._trim(now)
        return CacheUse(tokens(hit), written["5m"], written["1h"], prompt_tokens)

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass for the cache's lifetimes (an idle pause, without waiting)."""
        with self._lock:
            self._skipped += seconds

    def _live(self, digest: str, now: float) -> bool:
        entry = self._entries.get(digest)
        return entry is not None and entry[0] > now

    def _hit(self, prefixes: list[_Prefix], mark: int, now: float) -> int:
        """The longest live prefix at most ``LOOKBACK`` blocks before ``mark``; -1 if none."""
        for i in range(mark, max(mark - LOOKBACK, -1), -1):
            if self._live(prefixes[i].digest, now):
                return i
        return -1

    def _trim(self, now: float) -> None:
        if len(self._entries) <= _MAX_ENTRIES:
            return
        for digest in [d for d, (expires, _) in self._entries.items() if expires <= now]:
            del self._entries[digest]
