"""Messages between sessions (issue 31, item 1): ``SendMessage`` to a working sibling arrives
between its tool calls, to an idle one starts its turn; the receiver reads who sent it;
``wait=true`` returns the reply; mutual waits get one clear error, not a hang; messages are
bounded in size and rate; another parent's sessions are out of reach."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from subagent_kit import Kit, make_kit

from retinue.engine import RunConfig
from retinue.engine.session import Session
from retinue.errors import SubAgentError
from retinue.llm.base import ToolSpec
from retinue.memory import open_memory
from retinue.messages import Message, ToolResultMessage
from retinue.subagents import subagent_tools
from retinue.subagents.messaging import MAX_PER_MINUTE, messenger_of
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry, tool

pytestmark = pytest.mark.timeout(60)  # a hang bound, not a timing

gates: dict[str, asyncio.Event] = {}
entered: dict[str, asyncio.Event] = {}


@tool("Gate")
async def gate(ctx: ToolContext, name: str) -> str:
    """Wait until the test opens gate ``name``."""
    entered.setdefault(name, asyncio.Event()).set()
    await gates.setdefault(name, asyncio.Event()).wait()
    return f"gate {name} passed"


@pytest.fixture
def kit(tmp_path: Path) -> Kit:
    gates.clear()
    entered.clear()
    return make_kit(tmp_path, "reviewer", "tester", extra_tools=[gate])


def send(to: str, message: str, wait: bool = False):
    return call_tool("SendMessage", {"to": to, "message": message, "wait": wait})


def texts(messages: Sequence[Message]) -> str:
    return "\n".join(m.content for m in messages if isinstance(m.content, str))


def results(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


class Recorder:
    """A scripted step that keeps what the model was shown, then answers ``reply``."""

    def __init__(self, reply: str) -> None:
        self.reply, self.seen = reply, ""

    def __call__(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        self.seen = texts(messages)
        return self.reply


async def entered_gate(name: str) -> None:
    await entered.setdefault(name, asyncio.Event()).wait()


async def test_a_message_to_a_working_sibling_arrives_between_its_tool_calls(kit: Kit) -> None:
    m, ctx = kit.manager, kit.ctx()
    after = Recorder("reviewed with tabs")
    kit.models["reviewer"].add(call_tool("Gate", {"name": "r"}), after)
    kit.models["tester"].add(send("reviewer", "use tabs"), "told it")
    m.start_background(ctx, "review", "reviewer")
    await entered_gate("r")
    out = await m.interactive_subagent(ctx, "tell the reviewer", "tester")
    assert "before its next step" in results(out.messages)[-1]
    gates["r"].set()
    reviewer = m.registry.by_id("main/reviewer").session  # type: ignore[union-attr]
    await reviewer.wait_background()
    assert "[message from main/tester: use tabs]" in after.seen  # named, in the same turn
    assert reviewer.turns == 1 and reviewer.collect()[0].startswith("reviewed with tabs")
    await m.cleanup("main")


async def test_a_message_to_an_idle_sibling_starts_its_turn(kit: Kit) -> None:
    m, ctx = kit.manager, kit.ctx()
    after = Recorder("ok, tabs")
    kit.models["reviewer"].add("hello", after)
    kit.models["tester"].add(send("main/reviewer", "use tabs"), "told it")
    await m.interactive_subagent(ctx, "hi", "reviewer")
    out = await m.interactive_subagent(ctx, "tell the reviewer", "tester")
    assert "it was idle and works on it now" in results(out.messages)[-1]
    reviewer = m.registry.by_id("main/reviewer").session  # type: ignore[union-attr]
    await reviewer.wait_background()
    assert reviewer.turns == 2 and reviewer.collect() == ["ok, tabs"]
    assert reviewer.messages[-2].content.startswith("[message from main/tester: use tabs]")
    await m.cleanup("main")
    assert sorted(kit.memory.sessions()) == ["main/reviewer", "main/tester"]


async def test_wait_returns_the_receivers_reply(kit: Kit) -> None:
    m, ctx = kit.manager, kit.ctx()
    kit.models["reviewer"].add("hello", "yes, merge it")
    kit.models["tester"].add(send("reviewer", "may I merge?", wait=True), "merging")
    await m.interactive_subagent(ctx, "hi", "reviewer")
    out = await m.interactive_subagent(ctx, "ask the reviewer", "tester")
    assert results(out.messages)[-1] == "[reply from main/reviewer]\nyes, merge it"
    reviewer = m.registry.by_id("main/reviewer").session  # type: ignore[union-attr]
    assert reviewer.collect() == []  # the reply went to the waiting sender, not the inbox
    await m.cleanup("main")


async def test_two_sessions_waiting_on_each_other_get_one_clear_error(kit: Kit) -> None:
    m, ctx = kit.manager, kit.ctx()
    tester_end = Recorder("tester gave up waiting")
    kit.models["tester"].add(
        call_tool("Gate", {"name": "t"}), send("reviewer", "and you?", wait=True), tester_end
    )
    kit.models["reviewer"].add(send("tester", "are you done?", wait=True), "reviewer done")
    m.start_background(ctx, "test", "tester")
    await entered_gate("t")
    m.start_background(ctx, "review", "reviewer")
    messenger = messenger_of(m.registry)
    while messenger.waiting() != {"main/reviewer": "main/tester"}:
        await asyncio.sleep(0)
    gates["t"].set()
    tester = m.registry.by_id("main/tester").session  # type: ignore[union-attr]
    reviewer = m.registry.by_id("main/reviewer").session  # type: ignore[union-attr]
    await tester.wait_background()
    await reviewer.wait_background()
    assert "would deadlock (main/tester waits for main/reviewer waits for main/tester)" in (
        tester_end.seen
    )
    (reply,) = reviewer.collect()
    assert reply == "reviewer done"
    reviewer_results = results(reviewer.messages)
    assert reviewer_results[-1].startswith("[reply from main/tester]\ntester gave up waiting")
    assert messenger.waiting() == {}
    await m.cleanup("main")


async def test_size_and_rate_limits(kit: Kit) -> None:
    m, ctx = kit.manager, kit.ctx()
    kit.models["reviewer"].add(call_tool("Gate", {"name": "r"}), "done")
    kit.models["tester"].add("hello")
    await m.interactive_subagent(ctx, "hi", "tester")
    m.start_background(ctx, "review", "reviewer")
    await entered_gate("r")
    messenger = messenger_of(m.registry)
    with pytest.raises(SubAgentError, match="over the limit of 8,000"):
        await messenger.send("default", "main/tester", "reviewer", "x" * 8_001)
    for n in range(MAX_PER_MINUTE):
        await messenger.send("default", "main/tester", "reviewer", f"note {n}")
    with pytest.raises(SubAgentError, match="20 messages in the last minute"):
        await messenger.send("default", "main/tester", "reviewer", "one more")
    gates["r"].set()
    reviewer = m.registry.by_id("main/reviewer").session  # type: ignore[union-attr]
    await reviewer.wait_background()
    assert reviewer.steered == MAX_PER_MINUTE  # the refused ones never arrived
    await m.cleanup("main")


async def test_another_parents_sessions_and_tenants_are_out_of_reach(kit: Kit) -> None:
    m = kit.manager
    kit.models["reviewer"].add("hello")
    kit.models["tester"].add(send("other/reviewer", "psst"), "refused")
    await m.interactive_subagent(kit.ctx("other"), "hi", "reviewer")
    out = await m.interactive_subagent(kit.ctx(), "reach across", "tester")
    assert "no session 'other/reviewer' in your team" in results(out.messages)[-1]
    messenger = messenger_of(m.registry)
    with pytest.raises(SubAgentError, match="no session"):
        await messenger.send("default", "main/tester", "reviewer", "no such sibling")
    with pytest.raises(SubAgentError, match="no session"):  # same id, another tenant
        await messenger.send("acme", "other/x#1", "other/reviewer", "hi")
    other = m.registry.by_id("other/reviewer").session  # type: ignore[union-attr]
    assert other.turns == 1 and other.steered == 0
    await m.cleanup("main")
    await m.cleanup("other")


async def test_a_child_messages_the_main_agent(kit: Kit) -> None:
    main_model = ScriptedModel(name="scripted:main")
    main_model.add("noted")
    main = Session("main", RunConfig(main_model, [], ToolRegistry([]), kit.ctx()))
    messenger = messenger_of(kit.manager.registry)
    messenger.saw("default", main)
    kit.models["tester"].add("hello")
    await kit.manager.interactive_subagent(kit.ctx(), "hi", "tester")
    ack = await messenger.send("default", "main/tester", "main", "tests pass")
    assert "it was idle" in ack
    await main.wait_background()
    assert main.collect() == ["noted"]
    assert main.messages[0].content.startswith("[message from main/tester: tests pass]")
    with pytest.raises(SubAgentError, match="the main agent has no parent"):
        await messenger.send("default", "main", "parent", "hi")
    await kit.manager.cleanup("main")
    await main.close()


async def test_siblings_share_the_teams_task_list_through_the_tools(
    kit: Kit, tmp_path: Path
) -> None:
    store = open_memory(tmp_path / "mem")
    kit.memory.tasks = store.tasks  # type: ignore[attr-defined]  (a store that keeps tasks)
    m = kit.manager
    ctx = replace(kit.ctx(), memory=store)
    create = call_tool("TaskCreate", {"subject": "design", "description": "the schema"})
    kit.models["tester"].add(
        create,
        call_tool("TaskCreate", {"subject": "build", "blocked_by": [1]}),
        call_tool("TaskUpdate", {"id": 1, "status": "in_progress"}),
        "planned",
    )
    kit.models["reviewer"].add(
        call_tool("TaskUpdate", {"id": 2, "status": "in_progress"}),
        call_tool("TaskUpdate", {"id": 1, "status": "in_progress"}),
        call_tool("TaskList", {}),
        "took what was free",
    )
    out = await m.interactive_subagent(ctx, "plan", "tester")
    made = results(out.messages)
    assert made[:2] == ["created #1 [pending] design", "created #2 [pending] build (blocked by #1)"]
    assert made[2] == "updated #1 [in_progress] design (owner: main/tester)"
    out = await m.interactive_subagent(ctx, "work", "reviewer")
    blocked, owned, listing = results(out.messages)
    assert "task #2 is blocked by #1 (in_progress)" in blocked
    assert "task #1 is owned by main/tester" in owned
    assert listing.startswith("#1 [in_progress] design (owner: main/tester)\n#2 [pending]")
    assert "TaskCreate" in kit.models["reviewer"].calls[0].tool_names
    (mine,) = [t for t in await store.tasks.list("default", "main") if t.owner]
    assert mine.owner == "main/tester"  # the team is the tree: keyed by its main agent
    await m.cleanup("main")
    store.close()


async def test_a_child_waiting_on_its_working_parent_is_refused_and_a_plain_message_steers_it(
    kit: Kit,
) -> None:
    """The main agent waits for the child's turn (SubAgent); the child's wait=true on it
    would deadlock: refused at once. Without wait, the message reaches main's next step."""
    main_model = ScriptedModel(name="scripted:main")
    after = Recorder("all done")
    main_model.add(
        call_tool("SubAgent", {"task": "run the tests", "role": "tester", "interactive": True}),
        after,
    )
    kit.models["tester"].add(
        send("main", "may I skip the slow ones?", wait=True),
        send("main", "skipping the slow ones"),
        "tests pass",
    )
    tools = ToolRegistry([*subagent_tools()])
    main = Session("main", RunConfig(main_model, [], tools, kit.ctx()))
    out = await main.send("go")
    assert out.content.startswith("all done")
    tester = kit.manager.registry.by_id("main/tester").session  # type: ignore[union-attr]
    refused, delivered = results(tester.messages)
    assert "main holds your session and may wait for you" in refused
    assert "before its next step" in delivered
    assert "[message from main/tester: skipping the slow ones]" in after.seen
    assert messenger_of(kit.manager.registry).waiting() == {}
    await kit.manager.cleanup("main")
    await main.close()
