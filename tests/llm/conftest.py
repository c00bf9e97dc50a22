"""The loopback Anthropic Messages server (``retinue.llm.loopback_anthropic``, which also
plays Claude's thinking rules) as a fixture; it answers from a ScriptedModel over real HTTP on
127.0.0.1."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from retinue.llm.base import Model
from retinue.llm.loopback import LoopbackServer
from retinue.llm.loopback_anthropic import LoopbackAnthropicServer

AnthropicServerFactory = Callable[..., LoopbackServer]


@pytest.fixture
def anthropic_server() -> Iterator[AnthropicServerFactory]:
    """Start Anthropic loopback servers: ``anthropic_server(model, **options)``."""
    started: list[LoopbackServer] = []

    def start(model: Model, **options: Any) -> LoopbackServer:
        server = LoopbackAnthropicServer(model, **options).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()
