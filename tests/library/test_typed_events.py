"""Streaming text of a nested sub-agent: ``Agent.stream()`` carries every agent's text, typed
and tagged with the agent's path, down to depth 2; a run that does not stream carries none."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import assert_type

from retinue import Agent, Event, Role
from retinue.events import RunFinished, SessionChanged, TextDelta, ToolStarted
from retinue.messages import Message, ToolResultMessage, UserMessage
from retinue.testing import ScriptedModel, call_tool

RESEARCHER = Role(
    name="researcher",
    description="Looks things up, with a critic's help",
    prompt="Research the task; ask the critic.",
    tools=("SubAgent",),
)
CRITIC = Role(name="critic", description="Finds the flaw", prompt="Criticise.", tools=())


def nested_script() -> ScriptedModel:
    """main -> researcher (interactive) -> critic (one-shot): each answers in text."""
    return ScriptedModel([
        call_tool("SubAgent", {"task": "find X", "role": "researcher", "interactive": True}),
        call_tool("SubAgent", {"task": "check X", "role": "critic"}),
        "critic: X holds",
        "researcher: X, checked",
        "main: here is X",
    ])  # fmt: skip


def agent(model: ScriptedModel, tmp_path: Path, **kwargs: object) -> Agent:
    return Agent(model, workspace=tmp_path, home=tmp_path / "home", builtin_tools=False,
                 memory=False, roles=[RESEARCHER, CRITIC], **kwargs)  # type: ignore[arg-type]  # fmt: skip


def said(event: Event) -> tuple[str, str] | None:
    """Who wrote what, for a text delta (the ``match`` a program would write)."""
    match event:
        case TextDelta(text=text, agent_id=who):
            assert_type(text, str)
            return who, text
        case _:
            return None


def test_stream_carries_nested_sub_agents_text_tagged_with_their_path(tmp_path: Path) -> None:
    model = nested_script()

    async def go() -> tuple[list[Event], str]:
        with agent(model, tmp_path) as a:
            stream = a.stream("What is X?")
            events = [e async for e in stream]
            assert stream.output is not None
            return events, stream.output.content

    events, content = asyncio.run(go())
    model.assert_done()
    assert content == "main: here is X"
    texts = [s for e in events if (s := said(e)) is not None]
    [(critic, _)] = [t for t in texts if t[1] == "critic: X holds"]
    assert critic.startswith("main/researcher/critic#")  # depth 2: its whole path
    assert texts == [
        (critic, "critic: X holds"),
        ("main/researcher", "researcher: X, checked"),
        ("main", "main: here is X"),
    ]
    delta = next(e for e in events if isinstance(e, TextDelta) and e.agent_id == critic)
    assert delta.path == ("main", "researcher", critic.rpartition("/")[2])
    # every event is typed, and its typed fields say what its dict view says
    assert all(type(e) is not Event for e in events)
    calls = [e for e in events if isinstance(e, ToolStarted)]
    assert [(c.agent_id, c.name) for c in calls] == [
        ("main", "SubAgent"),
        ("main/researcher", "SubAgent"),
    ]
    assert all(c.data["name"] == c.name and c.to_dict()["call_id"] == c.call_id for c in calls)
    created = [e for e in events if isinstance(e, SessionChanged) and e.action == "created"]
    assert [(s.agent_id, s.parent_id, s.role) for s in created] == [
        ("main/researcher", "main", "researcher")
    ]
    finished = [e.agent_id for e in events if isinstance(e, RunFinished)]
    assert finished == [critic, "main/researcher", "main"]


def by_tag(messages: Sequence[Message], _tools: object) -> object:
    """Deterministic whatever the order of calls: an agent's part follows from its own
    conversation (its first user message names the run, ``X`` or ``Y``, and its rank)."""
    first = next(m.content for m in messages if isinstance(m, UserMessage))
    tag = "X" if "X" in first else "Y"
    answered = isinstance(messages[-1], ToolResultMessage)
    if first.startswith("check"):
        return f"critic: {tag} holds"
    if first.startswith("find"):
        return f"researcher: {tag}" if answered else call_tool(
            "SubAgent", {"task": f"check {tag}", "role": "critic"})  # fmt: skip
    return f"main: {tag}" if answered else call_tool(
        "SubAgent", {"task": f"find {tag}", "role": "researcher", "interactive": True})  # fmt: skip


def test_a_run_beside_a_stream_gets_no_sub_agent_text(tmp_path: Path) -> None:
    """Sub-agents stream while a stream is on: a plain run beside it does not hear its own
    sub-agents' text, and once the stream is over no sub-agent streams again."""
    seen: list[Event] = []
    model = ScriptedModel(responder=by_tag)

    async def go(a: Agent) -> tuple[list[Event], str]:
        stream = a.stream("What is X?")

        async def streamed() -> list[Event]:
            return [e async for e in stream]

        events, out = await asyncio.gather(streamed(), a.run("What is Y?"))
        return events, out.content

    with agent(model, tmp_path, on_event=seen.append) as a:
        events, content = asyncio.run(go(a))
        assert content == "main: Y"
        streamed = {e.agent_id: e.text for e in events if isinstance(e, TextDelta)}
        assert sorted(streamed.values()) == ["critic: X holds", "main: X", "researcher: X"]
        heard = {e.agent_id: e.text for e in seen if isinstance(e, TextDelta)}
        assert heard == streamed  # on_event: the stream's text, none of the plain run's
        seen.clear()
        assert a.run_sync("What is Y?").content == "main: Y"
        assert a.runtime.manager.factory.stream is False
    assert not [e for e in seen if isinstance(e, TextDelta)]
    assert any(isinstance(e, RunFinished) and "/critic#" in e.agent_id for e in seen)
