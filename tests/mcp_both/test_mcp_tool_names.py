"""MCP tool names within the providers' 64 characters: a long server name no longer makes two
tools one (a cut name ends with a hash of the full one, stable from run to run); a tool that
requires task-augmented execution is left out with a notice, not offered and then failed."""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field
from pathlib import Path

import mcp_types as types

from retinue.events import NOTICE, Event
from retinue.mcp.tools import MAX_NAME, McpSource, server_of, tool_name
from retinue.tools.base import ToolContext

LONG = "a-server-whose-name-is-forty-six-characters-xx"


def test_cut_names_stay_apart_stable_and_within_the_limit() -> None:
    assert len(LONG) == 46
    links = tool_name(LONG, "get-resource-links")
    reference = tool_name(LONG, "get-resource-reference")
    assert links != reference
    assert len(links) == len(reference) == MAX_NAME
    assert links == tool_name(LONG, "get-resource-links")  # the same on every listing
    assert server_of(links) == LONG
    assert tool_name("echo", "echo") == "mcp__echo__echo"  # short names are as they were
    rng = random.Random(29)
    names = ["".join(rng.choices(string.ascii_letters + "-_.", k=rng.randint(1, 90)))
             for _ in range(2000)]  # fmt: skip
    made = {tool_name(LONG, n) for n in set(names)}
    assert all(len(n) <= MAX_NAME for n in made)
    assert len(made) == len({n.replace(".", "_") for n in names})  # no two made one


@dataclass
class FakeServer:
    """A server as McpSource sees it: a name and a listing (the SDK's own Tool models)."""

    name: str
    listed: list[types.Tool]
    tasks: bool = False  # whether it offers MCP Tasks at 2026-07-28

    async def list_tools(self) -> list[types.Tool]:
        return self.listed


@dataclass
class FakeHub:
    servers: dict[str, FakeServer] = field(default_factory=dict)

    def visible(self, role: str) -> dict[str, FakeServer]:
        return self.servers


def spec(name: str, task_support: str | None = None) -> types.Tool:
    execution = types.ToolExecution(task_support=task_support) if task_support else None  # type: ignore[arg-type]
    return types.Tool(name=name, input_schema={"type": "object"}, execution=execution)


async def test_long_names_and_task_only_tools_in_a_listing(tmp_path: Path) -> None:
    listed = [spec("get-resource-links"), spec("get-resource-reference"),
              spec("long-job", "required"), spec("maybe-job", "optional"),
              spec("a.b"), spec("a_b")]  # fmt: skip
    hub = FakeHub({LONG: FakeServer(LONG, listed)})
    events: list[Event] = []
    ctx = ToolContext("main", tmp_path, tmp_path, events=events.append)
    source = McpSource(hub)  # type: ignore[arg-type]
    tools = await source.tools(ctx, [], frozenset())
    names = [t.name for t in tools]
    assert len(names) == len(set(names)) == 4
    remote = {t.remote_name for t in tools}  # type: ignore[attr-defined]
    assert {"get-resource-links", "get-resource-reference", "maybe-job"} <= remote
    assert "long-job" not in remote
    notices = [e.data["text"] for e in events if e.kind == NOTICE]
    assert any("long-job" in n and "task" in n for n in notices)
    assert any("is taken" in n for n in notices)  # a.b and a_b: one name, the second left out
    await source.tools(ctx, [], frozenset())
    assert len([e for e in events if e.kind == NOTICE]) == len(notices)  # told once
