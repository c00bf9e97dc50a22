"""``retinue mcp serve`` as an MCP client sees it, in process through the SDK's own client:
Retinue's errors arrive with their own message (no "Error executing tool", nothing logged
as a crash), a reply is its text once (no structured copy), the server names its version,
each token's client is a parent of its own, and a sub-agent's ``AskParent`` reaches the
client (elicitation at 2025-11-25, ``input_required`` at 2026-07-28) with the answer going
on in the same turn."""

from __future__ import annotations

import logging
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, types

from retinue.config import Settings
from retinue.mcp.server.serve import Clients, build_server
from retinue.runtime import Runtime
from retinue.server.tokens import Principal
from retinue.testing import ScriptedModel, call_tool

ROLE = """---
name: asker
description: Asks before it answers.
model: scripted:asker
capabilities: [ask_parent]
---
You ask when unsure.
"""


def runtime_for(tmp_path: Path, model: ScriptedModel) -> Runtime:
    agents = tmp_path / ".retinue" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / "asker.md").write_text(ROLE)
    settings = Settings.load(home=tmp_path / "home", workspace=tmp_path)
    return Runtime.create(settings, model=ScriptedModel(name="scripted:main"),
                          model_for=lambda _spec: model, with_memory=False)  # fmt: skip


def text(result: Any) -> str:
    return "\n".join(getattr(b, "text", "") for b in result.content)


def asking_model() -> ScriptedModel:
    return ScriptedModel(
        [call_tool("AskParent", {"question": "Which colour?"}), "painted it in the colour given"],
        name="scripted:asker",
    )


def answer_of(model: ScriptedModel) -> str:
    """What the AskParent call returned to the sub-agent (its tool result)."""
    return model.calls[-1].messages[-1].content


async def test_retinue_errors_reach_the_client_with_their_own_message(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = build_server(runtime_for(tmp_path, asking_model()))
    caplog.set_level(logging.INFO)
    async with Client(server, mode="legacy") as client:
        unknown = await client.call_tool("SubAgent", {"task": "x", "role": "nobody"})
        instance = await client.call_tool(
            "SubAgent", {"task": "x", "role": "asker", "instance": "two"}
        )
        session = await client.call_tool("UnloadSubAgent", {"role": "asker"})
        status = await client.call_tool("SubAgentStatus", {"role": "asker", "instance": "z"})
    for result in (unknown, instance, session, status):
        assert result.is_error
        assert "Error executing tool" not in text(result)
    assert "nobody" in text(unknown)
    assert "interactive=true" in text(instance)
    assert "asker" in text(session) and "asker" in text(status)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


async def test_a_reply_is_its_text_once_and_the_server_names_its_version(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(["just the reply"], name="scripted:asker")
    server = build_server(runtime_for(tmp_path, model))
    async with Client(server, mode="legacy") as client:
        assert client.server_info is not None
        assert client.server_info.version == version("retinue")
        tools = (await client.list_tools()).tools
        assert all(t.output_schema is None for t in tools)
        result = await client.call_tool("SubAgent", {"task": "go", "role": "asker"})
    assert result.structured_content is None
    assert len(result.content) == 1 and text(result).count("just the reply") == 1


def test_each_token_is_a_parent_with_its_own_progress_and_approvals(tmp_path: Path) -> None:
    clients = Clients(runtime_for(tmp_path, asking_model()))
    alice, bob = Principal(name="alice", tenant="alice"), Principal(name="bob", tenant="bob")
    a, b, service = clients.of(alice), clients.of(bob), clients.of(None)
    assert clients.of(alice) is a  # the same token: the same parent, call after call
    assert {a[0].agent_id, b[0].agent_id, service[0].agent_id} == {
        "mcp-client-alice", "mcp-client-bob", "mcp-client"}  # fmt: skip
    assert (a[0].tenant, b[0].tenant) == ("alice", "bob")
    assert a[1] is not b[1] and a[1] is not service[1]  # progress sinks: one per token
    assert a[2] is not b[2]  # approvals asked of the token's own calls
    assert a[0].events is a[1] and b[0].events is b[1]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_question_reaches_the_client_and_the_answer_goes_on_in_the_same_call(
    tmp_path: Path, mode: str
) -> None:
    """2025-11-25 (legacy): an elicitation request within the call; 2026-07-28: an
    input_required result, the client retrying the call with the answer."""
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": "teal"})

    model = asking_model()
    server = build_server(runtime_for(tmp_path, model))
    async with Client(server, elicitation_callback=elicit, mode=mode) as client:
        assert (client.protocol_version == "2026-07-28") == (mode != "legacy")
        result = await client.call_tool("SubAgent", {"task": "paint", "role": "asker"})
    assert not result.is_error, text(result)
    assert "painted it in the colour given" in text(result)
    [message] = asked
    assert "Which colour?" in message
    assert answer_of(model) == "teal"
    assert len(model.calls) == 2  # one turn: the answer continued it, no new turn began


async def test_a_client_that_cannot_be_asked_reads_the_question_and_answers_by_subagent(
    tmp_path: Path,
) -> None:
    model = asking_model()
    server = build_server(runtime_for(tmp_path, model))
    async with Client(server, mode="legacy") as client:
        first = await client.call_tool("SubAgent", {"task": "paint", "role": "asker"})
        assert "asks: Which colour?" in text(first)
        args = {"task": "umber", "role": "asker", "interactive": True}
        second = await client.call_tool("SubAgent", args)
    assert "painted it in the colour given" in text(second)
    assert answer_of(model) == "umber"


async def test_at_2026_07_28_an_approval_is_refused_saying_how_to_allow_the_call(
    tmp_path: Path,
) -> None:
    """Approvals are asked within the call, which a 2026-07-28 connection cannot carry (not
    built yet): the sub-agent reads a refusal that says how to allow the call."""
    from test_mcp_approvals import runtime_for as approving_runtime
    from test_mcp_approvals import scribe_model

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise AssertionError("not asked at 2026-07-28")

    scribe = scribe_model()
    server = build_server(approving_runtime(tmp_path, scribe))
    async with Client(server, elicitation_callback=elicit, mode="2026-07-28") as client:
        result = await client.call_tool("SubAgent", {"task": "write a note", "role": "scribe"})
    assert "finished" in text(result)
    assert not (tmp_path / "note.txt").exists()
    refusal = scribe.calls[-1].messages[-1].content
    assert "2026-07-28" in refusal and "--permission-mode" in refusal
