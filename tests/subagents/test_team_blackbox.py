"""The issue's black-box check for teams (issue 31): a lead with three teammates splits a task
list of six dependent tasks. The teammates are scripted by one rule each step (list, claim
the first free task, complete it, tell the team), never by a fixed order, so who gets which
task is up to the race the real code runs. Every task is completed exactly once, no claim
jumps a dependency, and each teammate's memory is consolidated exactly once at the end."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from subagent_kit import make_kit

from retinue.engine import RunConfig
from retinue.engine.session import Session
from retinue.llm.base import ToolSpec
from retinue.memory import open_memory
from retinue.messages import AssistantMessage, Message, ToolResultMessage
from retinue.subagents import subagent_tools
from retinue.subagents.tasklist import task_tools
from retinue.subagents.team import team_tools
from retinue.subagents.tools import send_message
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolRegistry

pytestmark = pytest.mark.timeout(30)

TASKS = [  # (subject, blocked_by)
    ("lexer", []),
    ("parser", []),
    ("printer", []),
    ("checker", [1]),
    ("optimiser", [2, 3]),
    ("release", [4, 5]),
]
NAMES = ("ann", "ben", "cat")
_LINE = re.compile(r"^#(\d+) \[(\w+)\] [^(\n]*(?:\((.*)\))?$", re.MULTILINE)


def _free(listing: str, me: str) -> int | None:
    """A task of mine still in progress (a message came between its claim and its end),
    else the first pending, unowned task whose dependencies are all completed."""
    rows = {int(i): (status, extra) for i, status, extra in _LINE.findall(listing)}
    for tid, (status, extra) in sorted(rows.items()):
        if status == "in_progress" and f"owner: {me}" in extra:
            return tid
    for tid, (status, extra) in sorted(rows.items()):
        deps = [int(d) for d in re.findall(r"#(\d+)", extra.partition("blocked by")[2])]
        ready = all(rows.get(d, ("", ""))[0] == "completed" for d in deps)
        if status == "pending" and "owner:" not in extra and ready:
            return tid
    return None


def teammate(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> object:
    """One step of a teammate: what its last tool result (or new message) calls for."""
    last = messages[-1]
    text = last.content if isinstance(last.content, str) else ""
    if not isinstance(last, ToolResultMessage) or text.startswith("[message delivered"):
        return call_tool("TaskList", {})
    if done := re.match(r"updated #(\d+) \[in_progress\]", text):
        return call_tool("TaskUpdate", {"id": int(done[1]), "status": "completed"})
    if done := re.match(r"updated #(\d+) \[completed\]", text):
        return call_tool("SendMessage", {"to": "*", "message": f"#{done[1]} is done"})
    if text.startswith("#"):  # the list
        me = re.search(r"You are (\w+), a teammate", str(messages[1].content))
        free = _free(text, f"main/worker:{me[1] if me else '?'}")
        if free is not None:
            return call_tool("TaskUpdate", {"id": free, "status": "in_progress"})
        statuses = [s for _, s, _ in _LINE.findall(text)]
        return "all done" if set(statuses) == {"completed"} else "nothing free: waiting"
    return call_tool("TaskList", {})  # a refused claim: look again


def the_lead(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> object:
    """The lead: the six tasks, then the team, then it acknowledges what it is told."""
    made = sum(
        1 for m in messages if isinstance(m, ToolResultMessage) and m.content.startswith("created")
    )
    asked_team = any(
        isinstance(m, AssistantMessage) and any(c.name == "TeamCreate" for c in m.tool_calls)
        for m in messages
    )
    if made < len(TASKS):
        subject, deps = TASKS[made]
        return call_tool("TaskCreate", {"subject": subject, "blocked_by": deps})
    if not asked_team:
        spec = [{"name": n, "role": "worker", "task": "take tasks until none is left"}
                for n in NAMES]  # fmt: skip
        return call_tool("TeamCreate", {"team_name": "compiler", "members": spec})
    return "noted"


async def test_a_lead_and_three_teammates_do_six_dependent_tasks_once_each(
    tmp_path: Path,
) -> None:
    kit = make_kit(tmp_path, "worker")
    kit.models["worker"].add(*[teammate] * 1_000)  # the same rule at every step
    kit.models["worker"].delay = 0.001  # a model call takes a while: the teammates interleave
    store = open_memory(tmp_path / "mem")
    kit.memory.tasks = store.tasks  # type: ignore[attr-defined]  (a store that keeps tasks)
    lead_model = ScriptedModel(name="scripted:lead", responder=the_lead)
    tools = ToolRegistry([*subagent_tools(), send_message, *task_tools(), *team_tools()])
    main = Session("main", RunConfig(lead_model, [], tools, replace(kit.ctx(), memory=store)))
    await main.send("build the compiler with a team")
    ids = [f"main/worker:{n}" for n in NAMES]
    mates = [kit.manager.registry.by_id(sid).session for sid in ids]  # type: ignore[union-attr]
    while True:  # until a whole pass finds every session idle: then nothing can start again
        for s in (*mates, main):
            await s.wait_background()
        if all(s.state == "idle" and not s.tasks() for s in (*mates, main)):
            break
    tasks = await store.tasks.list("default", "main")
    assert [(t.subject, t.status) for t in tasks] == [(s, "completed") for s, _ in TASKS]
    completions = Counter(
        int(m)
        for s in mates
        for r in s.messages
        if isinstance(r, ToolResultMessage)
        for m in re.findall(r"^updated #(\d+) \[completed\]", r.content)
    )
    assert completions == Counter(range(1, 7))  # each task completed once, by its claimer
    assert all(t.owner in ids for t in tasks)
    assert len({t.owner for t in tasks}) >= 2  # split (who does how many is the race's)
    await kit.manager.cleanup("main")
    assert sorted(kit.memory.sessions()) == sorted(ids)  # each consolidated exactly once
    await main.close()
    store.close()
