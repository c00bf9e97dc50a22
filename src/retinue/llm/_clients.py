"""What the OpenAI and Anthropic adapters share: the API key rule and one client per loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar
from urllib.parse import urlsplit

from retinue.errors import ConfigError

__all__ = ["PLACEHOLDER_KEY", "PerLoopClients", "api_key_for"]

PLACEHOLDER_KEY = "retinue-no-key"  # local servers (Ollama, vLLM...) ignore the key


def api_key_for(key: str | None, base_url: str, official_host: str, hint: str) -> str:
    """``key``; without one, a placeholder for a custom server, a ConfigError for the official."""
    if key:
        return key
    if urlsplit(base_url).hostname == official_host:
        raise ConfigError(f"no API key for {base_url}: set {hint}")
    return PLACEHOLDER_KEY


class _Closable(Protocol):
    async def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)


class PerLoopClients(Generic[C]):
    """One SDK client per event loop: a kept-alive connection cannot cross loops."""

    def __init__(self, factory: Callable[[], C]) -> None:
        self._factory = factory
        self._clients: dict[asyncio.AbstractEventLoop, C] = {}

    def get(self) -> C:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            self._clients = {lp: c for lp, c in self._clients.items() if not lp.is_closed()}
            client = self._clients[loop] = self._factory()
        return client

    async def aclose(self) -> None:
        """Close this event loop's client, if it has one."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()
