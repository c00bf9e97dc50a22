"""Fixtures for the web page's tests: a live server on 127.0.0.1, and Debian's Chromium.

``serve(main_model, slow_model=None, limits=None, session_token_budget=0)`` starts the
service as ``retinue serve`` builds it (tests/server/serverkit.py), in a workspace with two
roles: ``lead`` (the main model; it may delegate to ``scout``) and ``scout`` (the slow
model). Servers of one test share a data directory (and so the stored conversations).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from retinue.config import Settings
from retinue.runtime import Runtime
from retinue.server.conversations import Limits
from retinue.testing import ScriptedModel

sys.path.insert(0, str(Path(__file__).parents[1] / "server"))
serverkit = importlib.import_module("serverkit")  # the server tests' helpers, not a package

CHROMIUM = Path("/usr/bin/chromium")

ROLES = {
    "lead": """---
name: lead
description: Leads an investigation; asks the scout to look around.
tools: [Read, Agent(scout)]
---
You lead.
""",
    "scout": """---
name: scout
description: Looks around slowly (its model is the test's slow model).
tools: [Read]
model: scripted:slow
---
You look around.
""",
}


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    started: list[Any] = []
    agents = tmp_path / ".retinue" / "agents"
    agents.mkdir(parents=True)
    for name, text in ROLES.items():
        (agents / f"{name}.md").write_text(text)

    def start(
        model: ScriptedModel,
        slow_model: ScriptedModel | None = None,
        *,
        limits: Limits | None = None,
        session_token_budget: int = 0,
    ) -> Any:
        settings = Settings.load(home=tmp_path / "home", workspace=tmp_path)
        settings.session_token_budget = session_token_budget
        slow = slow_model or ScriptedModel(name="scripted:slow")
        runtime = Runtime.create(settings, model=model, model_for=lambda _spec: slow)
        server = serverkit.ServerThread(runtime, limits).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium for the whole module (headless, no sandbox: CI runs as root)."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is absent (install Debian's chromium package, as .ci/run does)")
    from playwright.sync_api import expect, sync_playwright

    # expect() polls until its condition holds; its 5 s default bounds a hang too tightly
    # for a loaded machine driving Chromium (30 s, as Playwright's own actions wait)
    expect.set_options(timeout=30_000)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield chromium
        chromium.close()
