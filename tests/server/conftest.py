"""The ``serve`` fixture: a real server on 127.0.0.1 for a runtime built on ScriptedModels."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from serverkit import Serve, ServerThread

from retinue.config import Settings
from retinue.runtime import Runtime
from retinue.server.conversations import Limits
from retinue.testing import ScriptedModel

SLOW_ROLE = """---
name: slowpoke
description: Answers slowly (its model is the test's slow model).
tools: [Read]
model: scripted:slow
---
You answer slowly.
"""


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    """``serve(main_model, slow_model=None, memory=False, limits=None)`` starts a server with
    its token in ``tmp_path / "home"``; stopped after."""
    started: list[ServerThread] = []
    agents = tmp_path / ".retinue" / "agents"
    agents.mkdir(parents=True)
    (agents / "slowpoke.md").write_text(SLOW_ROLE)

    def start(
        model: ScriptedModel,
        slow_model: ScriptedModel | None = None,
        *,
        memory: bool = False,
        limits: Limits | None = None,
    ) -> ServerThread:
        settings = Settings.load(home=tmp_path / "home", workspace=tmp_path)
        slow = slow_model or ScriptedModel(name="scripted:slow")
        runtime = Runtime.create(
            settings, model=model, model_for=lambda _spec: slow, with_memory=memory
        )
        server = ServerThread(runtime, limits).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
