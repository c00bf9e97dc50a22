"""A per-run context: ``run(..., deps=x)`` reaches a tool two sub-agents down as ``ctx.deps``,
and is never recorded nor shown to a model."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from retinue import Agent, Message, Role, ToolContext, ToolSpec, tool
from retinue.testing import ScriptedModel, call_tool

SECRET = "tok-7f3a9c-never-stored"


@dataclass
class Deps:
    token: str
    seen: list[str]


@tool
def lookup(ctx: ToolContext[Deps], key: str) -> str:
    """Look a key up with the caller's credentials."""
    ctx.deps.seen.append(f"{ctx.agent_id} depth={ctx.depth} key={key}")
    return f"{key}=42" if ctx.deps.token == SECRET else "denied"


ROLES = [
    Role(name="researcher", description="Finds facts", prompt="You research.",
         tools=("SubAgent",), capabilities=frozenset({"spawn_agent", "memory"})),
    Role(name="fetcher", description="Fetches values", prompt="You fetch.", tools=("lookup",)),
]  # fmt: skip


def script() -> tuple[ScriptedModel, deque[object]]:
    """The run's answers in order; each sub-agent's memory consolidation (it ends) gets a
    ``memorize`` call whenever it asks."""
    steps: deque[object] = deque([
        call_tool("SubAgent", {"task": "find a", "role": "researcher"}),
        call_tool("SubAgent", {"task": "fetch a", "role": "fetcher"}),
        call_tool("lookup", {"key": "a"}),
        "a=42",
        "a is 42",
        "The answer is 42.",
    ])  # fmt: skip
    memorize = call_tool("memorize", {"block_updates": [], "new_passages": ["a is 42"]})

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> object:
        return memorize if any(t.name == "memorize" for t in tools) else steps.popleft()

    return ScriptedModel(responder=answer), steps


def test_deps_reach_a_tool_at_depth_two_and_are_never_recorded(tmp_path: Path) -> None:
    model, steps = script()
    deps = Deps(SECRET, [])
    agent = Agent(model, workspace=tmp_path, home=tmp_path / "home", roles=ROLES,
                  tools=[lookup], builtin_tools=False, deps_type=Deps)  # fmt: skip
    with agent:
        out = agent.run_sync("What is a?", deps=deps)
    assert not steps  # every scripted step used
    assert out.content == "The answer is 42."
    [seen] = deps.seen
    assert seen.startswith("main/researcher#") and "/fetcher#" in seen and "depth=2" in seen
    assert model.calls[3].messages[-1].content == "a=42"  # the tool had the token
    # never shown to a model: no request holds it (messages or tool schemas)
    assert SECRET not in repr([(c.messages, c.tools) for c in model.calls])
    assert "deps" not in repr([c.tools for c in model.calls])
    # never recorded: no file the run wrote (memory store, transcripts, journals) holds it
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix in (".db", ".sqlite", ".sqlite3") for p in written), written
    for path in written:
        assert SECRET.encode() not in path.read_bytes(), path


def test_each_run_has_its_own_deps_and_a_run_without_has_none(tmp_path: Path) -> None:
    seen: list[object] = []

    @tool
    def peek(ctx: ToolContext) -> str:
        """Report the run's deps."""
        seen.append(ctx.deps)
        return "ok"

    model = ScriptedModel(responder=lambda m, t: call_tool("peek") if len(m) % 4 == 2 else "done")
    agent = Agent(model, workspace=tmp_path, home=tmp_path / "home", tools=[peek],
                  builtin_tools=False, memory=False)  # fmt: skip

    async def both() -> None:
        await asyncio.gather(agent.run("one", deps="first"), agent.run("two", deps="second"))
        await agent.run("three")

    asyncio.run(both())
    agent.close()
    assert sorted(map(str, seen)) == ["None", "first", "second"]
