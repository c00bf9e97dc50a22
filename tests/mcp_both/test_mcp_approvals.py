"""``retinue mcp serve`` asks its client, by elicitation, before a sub-agent's call that needs
approval runs; a client without elicitation gets a refusal that says how to allow it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import Client, types

from retinue.config import Settings
from retinue.mcp.server.serve import build_server
from retinue.runtime import Runtime
from retinue.testing import ScriptedModel, call_tool

ROLE = """---
name: scribe
description: Writes files.
model: scripted:scribe
---
You write files.
"""


def runtime_for(tmp_path: Path, scribe: ScriptedModel) -> Runtime:
    agents = tmp_path / ".retinue" / "agents"
    agents.mkdir(parents=True)
    (agents / "scribe.md").write_text(ROLE)
    settings = Settings.load(home=tmp_path / "home", workspace=tmp_path)
    return Runtime.create(
        settings,
        model=ScriptedModel(name="scripted:main"),
        model_for=lambda _spec: scribe,
        with_memory=False,
        permission_mode="default",
    )


def scribe_model() -> ScriptedModel:
    return ScriptedModel(
        [call_tool("Write", {"file_path": "note.txt", "content": "hello"}), "finished"],
        name="scripted:scribe",
    )


def text(result: Any) -> str:
    return "\n".join(getattr(b, "text", "") for b in result.content)


async def test_the_client_is_asked_by_elicitation_and_its_yes_lets_the_call_run(
    tmp_path: Path,
) -> None:
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"allow": True, "always": False})

    scribe = scribe_model()
    server = build_server(runtime_for(tmp_path, scribe))
    async with Client(server, elicitation_callback=elicit, mode="legacy") as client:
        result = await client.call_tool("SubAgent", {"task": "write a note", "role": "scribe"})
    assert "finished" in text(result)
    [message] = asked
    assert "Write" in message and "note.txt" in message
    assert (tmp_path / "note.txt").read_text() == "hello"


async def test_a_decline_is_a_refusal_the_sub_agent_reads(tmp_path: Path) -> None:
    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    scribe = scribe_model()
    server = build_server(runtime_for(tmp_path, scribe))
    async with Client(server, elicitation_callback=elicit, mode="legacy") as client:
        result = await client.call_tool("SubAgent", {"task": "write a note", "role": "scribe"})
    assert "finished" in text(result)
    assert not (tmp_path / "note.txt").exists()
    refusal = scribe.calls[-1].messages[-1].content
    assert "did not approve" in refusal and "'decline'" in refusal


async def test_a_client_without_elicitation_gets_a_clear_refusal(tmp_path: Path) -> None:
    scribe = scribe_model()
    server = build_server(runtime_for(tmp_path, scribe))
    async with Client(server, mode="legacy") as client:
        await client.call_tool("SubAgent", {"task": "write a note", "role": "scribe"})
    assert not (tmp_path / "note.txt").exists()
    refusal = scribe.calls[-1].messages[-1].content
    assert "does not declare elicitation" in refusal and "--permission-mode" in refusal
