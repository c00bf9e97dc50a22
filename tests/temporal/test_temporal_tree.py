"""Sub-agent sessions as child workflows, approvals and questions that wait for a person, and
the queries a front end reads: against a real dev server and in-process workers."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the temporal extra (temporalio) is not installed")

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError

from retinue.config import Settings
from retinue.llm.base import Model, ToolSpec
from retinue.memory.consolidate import consolidation_run
from retinue.messages import AssistantMessage, Message, ToolResultMessage
from retinue.policy.guards import Guard
from retinue.runtime import Runtime
from retinue.subagents.roles import Role
from retinue.temporal._types import Limits
from retinue.temporal.client import TemporalConversations
from retinue.temporal.worker import make_worker
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.base import Tool, tool

pytestmark = pytest.mark.timeout(300)  # a hang bound, the dev server's start included

FAST = Limits(heartbeat_s=2.0)
SPAWNS = frozenset({"spawn_agent"})


@dataclass
class Remembered:
    """A memory that records each consolidation it is asked for (no store behind it)."""

    consolidated: list[tuple[str, str]] = field(default_factory=list)
    run_ids: list[str | None] = field(default_factory=list)  # what the store would key it by

    async def render(self, tenant: str, role: str) -> str:
        return ""

    async def consolidate(
        self, *, tenant: str, role: str, session_id: str, messages: Sequence[Message], model: Model
    ) -> bool:
        self.consolidated.append((role, session_id))
        self.run_ids.append(consolidation_run.get())
        return True


def role(name: str, *caps: str) -> Role:
    return Role(name, f"the {name} role", f"You are {name}.", None, f"scripted:{name}",
                frozenset(caps))  # fmt: skip


def runtime_for(
    tmp_path: Path,
    main: ScriptedModel,
    models: dict[str, ScriptedModel],
    *,
    roles: Sequence[Role],
    tools: Sequence[Tool] = (),
    tenant: str = "default",
    guards: Sequence[Guard] = (),
) -> tuple[Runtime, Remembered]:
    tmp_path.mkdir(exist_ok=True)
    settings = Settings(home=tmp_path / "home", workspace=tmp_path, tenant=tenant)
    runtime = Runtime.create(
        settings, model=main, model_for=models.__getitem__, roles=roles, extra_tools=list(tools),
        with_memory=False, builtins=False, guards=guards,
    )  # fmt: skip
    memory = Remembered()
    runtime.manager.factory.memory = memory  # (what a session's close consolidates into)
    return runtime, memory


async def conversations(address: str, tenant: str = "default") -> TemporalConversations:
    client = await Client.connect(address)
    queue = f"test-{uuid.uuid4().hex}"  # every test its own workers
    return TemporalConversations(client, tenant=tenant, task_queue=queue, limits=FAST)


def delegate(role_name: str, task: str, **more: object) -> AssistantMessage:
    return call_tool("SubAgent", {"role": role_name, "task": task, **more})


def last_result(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
    result = messages[-1]
    assert isinstance(result, ToolResultMessage)
    return "got: " + result.content.split("\n\n[")[0]  # (without the session's footnote)


def heard(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
    return "heard: " + " | ".join(m.content for m in messages if m.role == "user")


async def runs_of(convs: TemporalConversations, workflow_id: str) -> int:
    """How many runs a workflow id has had (continue-as-new starts another)."""
    found = convs.client.list_workflows(f"WorkflowId = '{workflow_id}'")
    return len([w async for w in found])


async def approvals_of(convs: TemporalConversations, cid: str, *, but: str = "") -> list[Any]:
    """The approvals a conversation waits on, once there are some (other than ``but``'s id);
    a bound (60 s) against a turn that never asks."""
    async with asyncio.timeout(60):
        while not (pending := [p for p in await convs.approvals(cid) if p.id != but]):
            await asyncio.sleep(0.05)
    return pending


async def closed(convs: TemporalConversations, cid: str) -> None:
    """Close the conversation and wait until its workflow (and every session) has ended."""
    await convs.close(cid)
    await convs.handle(cid).result()


async def test_a_nested_interactive_session_lives_across_turns(
    temporal_address: str, tmp_path: Path
) -> None:
    convs = await conversations(temporal_address)
    convs.limits = replace(FAST, max_events=25)  # each workflow continues as new between turns
    on = {"interactive": True}
    main = ScriptedModel([delegate("helper", "t1", **on), last_result,
                          delegate("helper", "t2", **on), last_result])  # fmt: skip
    helper = ScriptedModel([delegate("sub", "s1", **on), last_result,
                            delegate("sub", "s2", **on), last_result])  # fmt: skip
    sub = ScriptedModel([heard, heard])
    models = {"scripted:helper": helper, "scripted:sub": sub}
    runtime, memory = runtime_for(tmp_path, main, models,
                                  roles=[role("helper", "spawn_agent"), role("sub")])  # fmt: skip
    async with make_worker(convs.client, runtime, convs.task_queue):
        first = await convs.send("tree-1", "first")
        before = (await convs.handle("tree-1").describe()).run_id
        second = await convs.send("tree-1", "second")
        state = await convs.state("tree-1")
        runs = {n.agent_id: await runs_of(convs, n.workflow_id) for n in state.sessions}
        assert (await convs.handle("tree-1").describe()).run_id != before
        assert memory.consolidated == []  # both sessions are still open
        await closed(convs, "tree-1")
    assert first.content == "got: got: heard: s1"
    assert second.content == "got: got: heard: s1 | s2"  # one sub session over both turns
    tree = {n.agent_id: n for n in state.sessions}
    assert set(tree) == {"tree-1/helper", "tree-1/helper/sub"}
    assert tree["tree-1/helper/sub"].parent_id == "tree-1/helper"
    assert tree["tree-1/helper/sub"].workflow_id.startswith(tree["tree-1/helper"].workflow_id + "/")
    assert tree["tree-1/helper"].workflow_id.startswith("retinue/default/tree-1/")
    assert [n.turns for n in (tree["tree-1/helper"], tree["tree-1/helper/sub"])] == [2, 2]
    assert state.state == "idle" and state.approvals == [] and state.question is None
    assert runs["tree-1/helper"] >= 2 and runs["tree-1/helper/sub"] >= 2  # (continued as new)
    # the conversation's close ended the sub session before its parent, each consolidated once
    assert memory.consolidated == [("sub", "tree-1/helper/sub"), ("helper", "tree-1/helper")]
    for model in (main, helper, sub):
        model.assert_done()


async def test_unload_closes_the_session_and_consolidates_once(
    temporal_address: str, tmp_path: Path
) -> None:
    convs = await conversations(temporal_address)
    unload = call_tool("UnloadSubAgent", {"role": "helper"})
    main = ScriptedModel([delegate("helper", "t1", interactive=True), "opened", unload,
                          last_result])  # fmt: skip
    helper = ScriptedModel(["hello"])
    runtime, memory = runtime_for(tmp_path, main, {"scripted:helper": helper},
                                  roles=[role("helper")])  # fmt: skip
    async with make_worker(convs.client, runtime, convs.task_queue):
        await convs.send("tree-2", "open it")
        [node] = (await convs.state("tree-2")).sessions
        first_run = (await convs.client.get_workflow_handle(node.workflow_id).describe()).run_id
        unloaded = await convs.send("tree-2", "end it")
        state = await convs.state("tree-2")
        await closed(convs, "tree-2")
    assert "ended after 1 turn(s)" in unloaded.content
    assert "consolidated into its memory" in unloaded.content
    assert state.sessions == []
    assert node.agent_id == "tree-2/helper"
    assert memory.consolidated == [("helper", "tree-2/helper")]  # once: the close found none left
    assert memory.run_ids == [first_run]  # keyed by the session's run: a retry writes nothing
    main.assert_done()


@tool(needs_approval=True)
async def deploy(target: str) -> str:
    """Deploy to a target."""
    DEPLOYED.append(target)
    return f"deployed {target}"


DEPLOYED: list[str] = []


async def test_an_approval_three_levels_down_is_answered_from_another_client(
    temporal_address: str, tmp_path: Path
) -> None:
    DEPLOYED.clear()
    convs = await conversations(temporal_address)
    main = ScriptedModel([delegate("a", "go"), last_result])
    a = ScriptedModel([delegate("b", "go"), last_result])
    b = ScriptedModel([delegate("c", "go"), last_result])
    c = ScriptedModel([call_tool("deploy", {"target": "prod"}), last_result])
    models = {"scripted:a": a, "scripted:b": b, "scripted:c": c}
    roles = [role("a", "spawn_agent"), role("b", "spawn_agent"), role("c")]
    runtime, _ = runtime_for(tmp_path, main, models, roles=roles, tools=[deploy])
    other = TemporalConversations(await Client.connect(temporal_address),
                                  task_queue=convs.task_queue)  # fmt: skip
    async with make_worker(convs.client, runtime, convs.task_queue):
        await convs.start("tree-3")  # (so that the other client finds it at once)
        turn = asyncio.create_task(convs.send("tree-3", "deploy it"))
        pending = await approvals_of(other, "tree-3")
    async with make_worker(convs.client, runtime, convs.task_queue):  # every worker anew
        state = await other.state("tree-3")
        assert DEPLOYED == []  # it waits for the answer
        await other.approve("tree-3", pending[0].id, allow=True)
        reply = await turn
        after = await other.state("tree-3")
        await closed(convs, "tree-3")
    [request] = pending
    assert (request.tool, request.role, request.depth) == ("deploy", "c", 3)
    assert request.agent_id.startswith("tree-3/a#") and "/b#" in request.agent_id
    assert '"prod"' in request.arguments and request.reason
    assert state.state == "paused" and [r["id"] for r in state.approvals] == [request.id]
    paused = [n for n in state.sessions if n.state == "paused"]
    assert [n.role for n in paused] == ["c"]
    assert DEPLOYED == ["prod"]
    assert reply.content == "got: got: got: got: deployed prod"
    assert after.state == "idle" and after.approvals == []


async def test_a_denied_approval_refuses_the_call_with_the_person_s_reason(
    temporal_address: str, tmp_path: Path
) -> None:
    DEPLOYED.clear()
    convs = await conversations(temporal_address)
    main = ScriptedModel([call_tool("deploy", {"target": "prod"}), last_result])
    runtime, _ = runtime_for(tmp_path, main, {}, roles=[], tools=[deploy])
    async with make_worker(convs.client, runtime, convs.task_queue):
        await convs.start("tree-4")
        turn = asyncio.create_task(convs.send("tree-4", "deploy it"))
        pending = await approvals_of(convs, "tree-4")
        await convs.approve("tree-4", pending[0].id, allow=False, message="not on a Friday")
        reply = await turn
        await closed(convs, "tree-4")
    assert DEPLOYED == []
    assert "did not approve" in reply.content and "not on a Friday" in reply.content


async def test_closing_a_conversation_that_waits_on_an_approval_leaves_nothing_running(
    temporal_address: str, tmp_path: Path
) -> None:
    DEPLOYED.clear()
    convs = await conversations(temporal_address)
    main = ScriptedModel([delegate("a", "go")])
    a = ScriptedModel([call_tool("deploy", {"target": "prod"})])
    runtime, memory = runtime_for(tmp_path, main, {"scripted:a": a}, roles=[role("a")],
                                  tools=[deploy])  # fmt: skip
    async with make_worker(convs.client, runtime, convs.task_queue):
        await convs.start("tree-8")
        turn = asyncio.create_task(convs.send("tree-8", "deploy it"))
        await approvals_of(convs, "tree-8")
        await closed(convs, "tree-8")
        with pytest.raises(WorkflowUpdateFailedError):
            await turn  # (its turn ended with the conversation)
        child = await convs.client.get_workflow_handle("retinue/default/tree-8/a#1").describe()
    assert DEPLOYED == []
    assert child.status == WorkflowExecutionStatus.COMPLETED
    assert memory.consolidated == [("a", "tree-8/a#1")]  # its close consolidated it, once


def answered(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
    result = messages[-1]
    assert isinstance(result, ToolResultMessage) and result.name == "AskParent"
    return f"{result.content.capitalize()} it is."


async def test_a_question_is_answered_after_every_worker_was_restarted(
    temporal_address: str, tmp_path: Path
) -> None:
    convs = await conversations(temporal_address)
    asks = ScriptedModel([call_tool("AskParent", {"question": "Which colour?"})])
    first, _ = runtime_for(tmp_path, asks, {}, roles=[])
    async with make_worker(convs.client, first, convs.task_queue):
        question = await convs.send("tree-5", "paint the shed")
        state = await convs.state("tree-5")
    then = ScriptedModel([answered])
    second, _ = runtime_for(tmp_path, then, {}, roles=[])
    async with make_worker(convs.client, second, convs.task_queue):  # a fresh worker
        reply = await convs.answer("tree-5", "blue")
        after = await convs.state("tree-5")
        await closed(convs, "tree-5")
    assert (question.stop_reason, question.content) == ("asking", "Which colour?")
    assert (state.state, state.question) == ("paused", "Which colour?")
    assert reply.content == "Blue it is." and reply.stop_reason == "final"
    assert after.question is None and after.state == "idle"
    then.assert_done()


async def test_a_session_s_question_is_answered_by_its_parent_s_next_message(
    temporal_address: str, tmp_path: Path
) -> None:
    convs = await conversations(temporal_address)

    def answer(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> AssistantMessage:
        asked = messages[-1]
        assert isinstance(asked, ToolResultMessage) and "Which file?" in asked.content
        return delegate("helper", "README.md", interactive=True)

    main = ScriptedModel([delegate("helper", "read it", interactive=True), answer, last_result])
    helper = ScriptedModel([call_tool("AskParent", {"question": "Which file?"}), answered])
    runtime, _ = runtime_for(tmp_path, main, {"scripted:helper": helper}, roles=[role("helper")])
    async with make_worker(convs.client, runtime, convs.task_queue):
        reply = await convs.send("tree-7", "read the file")
        state = await convs.state("tree-7")
        await closed(convs, "tree-7")
    assert reply.content == "got: Readme.md it is."
    assert state.question is None  # (the helper asked its parent, not the user)
    assert [(n.agent_id, n.turns) for n in state.sessions] == [("tree-7/helper", 2)]  # 2 messages
    main.assert_done()
    helper.assert_done()


async def test_two_tenants_keep_their_session_trees_apart(
    temporal_address: str, tmp_path: Path
) -> None:
    states = {}
    for tenant in ("a", "b"):
        convs = await conversations(temporal_address, tenant)
        main = ScriptedModel([delegate("helper", tenant, interactive=True), last_result])
        helper = ScriptedModel([heard])
        runtime, _ = runtime_for(tmp_path / tenant, main, {"scripted:helper": helper},
                                 roles=[role("helper")], tenant=tenant)  # fmt: skip
        async with make_worker(convs.client, runtime, convs.task_queue):
            reply = await convs.send("tree-6", "hi")
            states[tenant] = await convs.state("tree-6")
            await closed(convs, "tree-6")
        assert reply.content == f"got: heard: {tenant}"
    trees = {t: [n.workflow_id for n in s.sessions] for t, s in states.items()}
    assert trees["a"][0].startswith("retinue/a/tree-6/") and len(trees["a"]) == 1
    assert trees["b"][0].startswith("retinue/b/tree-6/") and len(trees["b"]) == 1


async def test_an_answer_to_an_approval_does_not_answer_the_one_asked_after_it(
    temporal_address: str, tmp_path: Path
) -> None:
    # a PreToolUse hook rewrites the call differently the second time: once allowed, the
    # call asks again about what it would now run; the first answer, sent again (a client's
    # retry, a second click), must not allow what the person never saw
    DEPLOYED.clear()
    counter = tmp_path / "runs"
    hook = tmp_path / "rewrite.py"
    hook.write_text(
        "import json, pathlib, sys\n"
        f"p = pathlib.Path({str(counter)!r})\n"
        "n = int(p.read_text()) + 1 if p.exists() else 1\n"
        "p.write_text(str(n))\n"
        "args = json.load(sys.stdin)['tool_input']\n"
        "args['target'] = f'prod-{min(n, 2)}'\n"
        "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PreToolUse',"
        " 'updatedInput': args}}))\n"
    )
    command = f"{sys.executable} {hook}"
    convs = await conversations(temporal_address)
    main = ScriptedModel([call_tool("deploy", {"target": "prod"}), last_result])
    rewrite = {"type": "command", "command": command}
    settings = Settings(
        home=tmp_path / "home",
        workspace=tmp_path,
        hooks={"PreToolUse": [{"matcher": "deploy", "hooks": [rewrite]}]},
    )
    runtime = Runtime.create(settings, model=main, extra_tools=[deploy], with_memory=False,
                             builtins=False)  # fmt: skip
    async with make_worker(convs.client, runtime, convs.task_queue):
        await convs.start("tree-12")
        turn = asyncio.create_task(convs.send("tree-12", "deploy it"))
        first = await approvals_of(convs, "tree-12")
        await convs.approve("tree-12", first[0].id, allow=True)
        second = await approvals_of(convs, "tree-12", but=first[0].id)
        with pytest.raises(WorkflowUpdateFailedError):  # (no request of that id is pending)
            await convs.approve("tree-12", first[0].id, allow=True)
        assert DEPLOYED == []
        await convs.approve("tree-12", second[0].id, allow=False, message="not that one")
        reply = await turn
        await closed(convs, "tree-12")
    assert '"prod-1"' in first[0].arguments and '"prod-2"' in second[0].arguments
    assert second[0].id != first[0].id
    assert "not that one" in reply.content and DEPLOYED == []


async def test_a_delegation_rule_of_the_manager_holds_on_temporal_too(
    temporal_address: str, tmp_path: Path
) -> None:
    """One copy of the delegation rules (``SubAgentManager.check_start``): the main agent
    may not start a role named as its own (``main``: already in its chain), in process and
    on Temporal alike, with the same line for the model."""
    told: dict[str, str] = {}

    def refused(where: str) -> Callable[[Sequence[Message], Sequence[ToolSpec]], str]:
        def answer(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
            result = messages[-1]
            assert isinstance(result, ToolResultMessage) and result.is_error
            told[where] = result.content
            return "refused"

        return answer

    here = ScriptedModel([delegate("main", "again"), refused("in process")])
    runtime, _ = runtime_for(tmp_path / "here", here, {}, roles=[role("main")])
    assert (await runtime.conversation("rule-here").send("go")).content == "refused"
    convs = await conversations(temporal_address)
    there = ScriptedModel([delegate("main", "again"), refused("on Temporal")])
    runtime, _ = runtime_for(tmp_path / "there", there, {}, roles=[role("main")])
    async with make_worker(convs.client, runtime, convs.task_queue):
        assert (await convs.send("rule-1", "go")).content == "refused"
        assert (await convs.state("rule-1")).sessions == []  # (no child workflow began)
    assert "cannot start 'main': it is already in this call chain" in told["in process"]
    assert told["on Temporal"].split("\n\n[")[0] == told["in process"].split("\n\n[")[0]
    here.assert_done()
    there.assert_done()


async def test_subagent_status_says_what_a_session_is_doing(
    temporal_address: str, tmp_path: Path
) -> None:
    convs = await conversations(temporal_address)
    seen: list[str] = []

    def status(then: AssistantMessage) -> Callable[[Sequence[Message], Sequence[ToolSpec]], Any]:
        def read(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> AssistantMessage:
            result = messages[-1]
            assert isinstance(result, ToolResultMessage)
            seen.append(result.content)
            return then

        return read

    ask = call_tool("SubAgentStatus", {"role": "helper"})
    main = ScriptedModel([
        delegate("helper", "read it", interactive=True),
        status(ask),  # it asked: its state says so
        status(delegate("helper", "README.md", interactive=True)),
        status(ask),  # answered: idle, two messages answered
        status(call_tool("SubAgentStatus", {"role": "nobody"})),
        status(AssistantMessage("done")),
    ])  # fmt: skip
    helper = ScriptedModel([call_tool("AskParent", {"question": "Which file?"}), answered])
    runtime, _ = runtime_for(tmp_path, main, {"scripted:helper": helper}, roles=[role("helper")])
    async with make_worker(convs.client, runtime, convs.task_queue):
        reply = await convs.send("tree-status", "read the file")
        await closed(convs, "tree-status")
    assert reply.content == "done"
    aid = "tree-status/helper"
    assert seen[1] == (
        f"Session {aid}: asking ([session {aid} asks: Which file?]), 1 turn(s) done; "
        "no new replies."
    )
    assert seen[3] == f"Session {aid}: idle, 2 turn(s) done; no new replies."
    assert seen[4].startswith("Error: no interactive session 'tree-status/nobody'")
    assert aid in seen[4]  # (the live sessions it names)
    assert "SubAgentStatus" in main.calls[0].tool_names  # offered to the model on Temporal
    main.assert_done()
    helper.assert_done()


async def test_the_sub_agent_caps_count_the_whole_tree_of_a_conversation(
    temporal_address: str, tmp_path: Path
) -> None:
    """The conversation's workflow counts the sessions of its tree, those a session opens
    included, against the worker's caps (retinue.subagents.caps); a refusal is the line the
    in-process manager gives."""
    convs = await conversations(temporal_address)
    on = {"interactive": True}
    main = ScriptedModel([
        delegate("helper", "t1", **on), last_result,  # helper and helper/sub open
        delegate("helper", "t2", **on), last_result,  # helper may not open a third
        call_tool("UnloadSubAgent", {"role": "helper"}), delegate("sub", "once"), last_result,
        delegate("sub", "again"), last_result,  # the conversation's third was the last
    ])  # fmt: skip
    helper = ScriptedModel([delegate("sub", "s1", **on), last_result,
                            delegate("sub", "s2", instance="two", **on), last_result])  # fmt: skip
    sub = ScriptedModel(["sub here", "one-shot done"])
    models = {"scripted:helper": helper, "scripted:sub": sub}
    settings = Settings(home=tmp_path / "home", workspace=tmp_path, max_subagents_per_run=0,
                        max_concurrent_subagents=2, max_subagents_per_conversation=3)  # fmt: skip
    runtime = Runtime.create(
        settings, model=main, model_for=models.__getitem__, roles=[role("helper", "spawn_agent"),
        role("sub")], with_memory=False, builtins=False,
    )  # fmt: skip
    async with make_worker(convs.client, runtime, convs.task_queue):
        first = await convs.send("caps", "open two")
        second = await convs.send("caps", "open a third below")
        third = await convs.send("caps", "unload, then one more")
        fourth = await convs.send("caps", "one more again")
        await closed(convs, "caps")
    assert first.content == "got: got: sub here"
    # the session's own request was counted by the conversation's workflow: refused
    assert second.content == (
        "got: got: Error: cannot start 'sub': 2 sub-agent sessions are open in this "
        "conversation, the limit (max_concurrent_subagents=2); end one with UnloadSubAgent, "
        "wait for one to finish, or do the work yourself"
    )
    assert third.content == "got: one-shot done"  # the unload closed two: room again
    assert fourth.content.startswith(
        "got: Error: cannot start 'sub': this conversation has started 3 sub-agent sessions,"
        " the limit (max_subagents_per_conversation=3)"
    )
    for model in (main, helper, sub):
        model.assert_done()
