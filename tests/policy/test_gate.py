"""The gate in a real run: refusals the model reads, approvals from three levels down, "always",
hooks' verdicts, and cancellation while a request is pending."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from pathlib import Path

from retinue.engine import RunConfig, run
from retinue.messages import SystemMessage, ToolResultMessage, UserMessage
from retinue.policy.approvals import Approval, ApprovalBroker, ApprovalRequest
from retinue.policy.gate import Policy
from retinue.policy.rules import RuleSet
from retinue.subagents import Role, RoleCatalog, SubAgentManager, subagent_tools
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import Tool, ToolContext, ToolRegistry, tool

WRITTEN: list[str] = []


@tool("Write")
def fake_write(file_path: str, content: str) -> str:
    """Write a file (records the call)."""
    WRITTEN.append(file_path)
    return f"wrote {file_path}"


def results(model: ScriptedModel, n: int = -1) -> list[ToolResultMessage]:
    return [m for m in model.calls[n].messages if isinstance(m, ToolResultMessage)]


def main_config(model: ScriptedModel, ctx: ToolContext, *tools) -> RunConfig:
    registry = ToolRegistry([fake_write, *tools])
    return RunConfig(model, [SystemMessage("main"), UserMessage("go")], registry, ctx)


def context(tmp_path: Path, policy: Policy, manager: SubAgentManager | None = None) -> ToolContext:
    return ToolContext(
        "main", tmp_path, tmp_path, call_chain=("main",), manager=manager, gate=policy
    )


async def test_a_call_that_would_ask_with_nobody_to_answer_is_refused_and_the_turn_goes_on(
    tmp_path: Path,
) -> None:
    WRITTEN.clear()
    model = ScriptedModel([call_tool("Write", {"file_path": "a.txt", "content": "x"}), "gave up"])
    out = await run(main_config(model, context(tmp_path, Policy(modes=("default",)))))
    assert out.content == "gave up" and out.stop_reason == "final"
    [refusal] = results(model)
    assert refusal.is_error and "permission denied" in refusal.content
    assert "nobody is here to approve it" in refusal.content
    assert 'add the rule "Edit(./a.txt)"' in refusal.content
    assert WRITTEN == []


async def test_a_deny_rule_holds_even_in_bypass_mode(tmp_path: Path) -> None:
    WRITTEN.clear()
    rules = RuleSet()
    rules.add("deny", ["Edit(./secrets/**)"], tmp_path)
    policy = Policy(modes=("bypassPermissions",), rules=rules)
    model = ScriptedModel(
        [
            call_tool("Write", {"file_path": "secrets/k", "content": "x"}),
            call_tool("Write", {"file_path": "notes.txt", "content": "x"}),
            "done",
        ]
    )
    await run(main_config(model, context(tmp_path, policy)))
    assert "rule deny: Edit(./secrets/**)" in results(model, 1)[0].content
    assert WRITTEN == ["notes.txt"]


def three_deep(
    tmp_path: Path, *, write: Tool = fake_write, mode: str | None = None
) -> tuple[SubAgentManager, dict[str, ScriptedModel]]:
    """main -> a -> b -> c, and c calls ``Write``; each role in ``mode`` when given."""
    models = {n: ScriptedModel(name=f"scripted:{n}") for n in ("a", "b", "c")}
    roles = [
        Role(n, f"the {n} role", f"You are {n}.", None, f"scripted:{n}",
             frozenset({"spawn_agent"}), permission_mode=mode)
        for n in models
    ]  # fmt: skip
    manager = SubAgentManager(
        RoleCatalog.of(*roles),
        ToolRegistry([write]),
        default_model=ScriptedModel(name="scripted:default"),
        model_for=lambda name: models[name.removeprefix("scripted:")],
        max_depth=3,
    )
    models["a"].add(call_tool("SubAgent", {"task": "go on", "role": "b"}), "a done")
    models["b"].add(call_tool("SubAgent", {"task": "write it", "role": "c"}), "b done")
    models["c"].add(call_tool("Write", {"file_path": "deep.txt", "content": "x"}), "c done")
    return manager, models


async def test_an_approval_raised_three_levels_down_reaches_the_top_and_the_call_runs(
    tmp_path: Path,
) -> None:
    WRITTEN.clear()
    asked: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> Approval:
        asked.append(request)
        return Approval(True)

    manager, models = three_deep(tmp_path)
    policy = Policy(modes=("default",), approver=approve)
    main = ScriptedModel([call_tool("SubAgent", {"task": "start", "role": "a"}), "all done"])
    config = main_config(main, context(tmp_path, policy, manager), *subagent_tools())
    async with manager.owner("main"):
        out = await run(config)
    assert out.content == "all done"
    [request] = asked
    assert request.depth == 3 and request.tool == "Write" and request.role == "c"
    assert request.agent_id.startswith("main/a#") and "/c#" in request.agent_id
    assert "deep.txt" in request.arguments and request.rule == "Edit(./deep.txt)"
    assert WRITTEN == ["deep.txt"]
    assert results(models["c"])[0].content == "wrote deep.txt"


async def test_a_denied_call_deep_down_is_a_result_its_own_turn_reads(tmp_path: Path) -> None:
    WRITTEN.clear()
    manager, models = three_deep(tmp_path)
    policy = Policy(modes=("default",), approver=lambda r: Approval(False, message="not today"))
    main = ScriptedModel([call_tool("SubAgent", {"task": "start", "role": "a"}), "all done"])
    async with manager.owner("main"):
        out = await run(main_config(main, context(tmp_path, policy, manager), *subagent_tools()))
    assert out.content == "all done" and WRITTEN == []
    [refusal] = results(models["c"])
    assert "did not approve this call: not today" in refusal.content
    assert models["c"].calls[-1].messages[-1] == refusal  # c's turn went on after it


async def test_a_role_in_plan_mode_cannot_write_whatever_its_parent_allows(tmp_path: Path) -> None:
    WRITTEN.clear()
    manager, models = three_deep(tmp_path)
    manager.catalog.roles["c"] = replace(manager.catalog.roles["c"], permission_mode="plan")
    policy = Policy(modes=("bypassPermissions",), rules=RuleSet())
    policy = replace(policy, rules=_allow_all(tmp_path))
    main = ScriptedModel([call_tool("SubAgent", {"task": "start", "role": "a"}), "done"])
    async with manager.owner("main"):
        await run(main_config(main, context(tmp_path, policy, manager), *subagent_tools()))
    assert WRITTEN == []
    assert "permission mode 'plan'" in results(models["c"])[0].content or "not allowed" in (
        results(models["c"])[0].content
    )


def _allow_all(tmp_path: Path) -> RuleSet:
    rules = RuleSet()
    rules.add("allow", ["Write", "Edit"], tmp_path)
    return rules


async def test_always_allows_the_same_call_without_asking_again(tmp_path: Path) -> None:
    WRITTEN.clear()
    asked: list[str] = []

    def approve(request: ApprovalRequest) -> Approval:
        asked.append(request.tool)
        return Approval(True, always=True)

    model = ScriptedModel(
        [
            call_tool("Write", {"file_path": "src/a.py", "content": "x"}),
            call_tool("Write", {"file_path": "./src/a.py", "content": "y"}),
            call_tool("Write", {"file_path": "src/b.py", "content": "x"}),
            "done",
        ]
    )
    policy = Policy(modes=("default",), approver=approve)
    await run(main_config(model, context(tmp_path, policy)))
    assert WRITTEN == ["src/a.py", "./src/a.py", "src/b.py"]
    assert asked == ["Write", "Write"]  # src/a.py was allowed from the first answer on


async def test_cancelling_a_turn_that_waits_for_approval_withdraws_the_request(
    tmp_path: Path,
) -> None:
    WRITTEN.clear()
    broker = ApprovalBroker()
    model = ScriptedModel([call_tool("Write", {"file_path": "a.txt", "content": "x"})])
    config = main_config(model, context(tmp_path, Policy(modes=("default",), approver=broker)))
    turn = asyncio.create_task(run(config))
    for _ in range(3000):  # a hang bound, polled
        if broker.pending():
            break
        await asyncio.sleep(0.01)
    [pending] = broker.pending()
    turn.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await turn
    assert broker.pending() == [] and not broker.answer(pending.id, Approval(True))
    assert WRITTEN == []
    assert isinstance(config.messages[-1], ToolResultMessage)  # the history stays valid
    assert "cancelled" in config.messages[-1].content


async def test_the_broker_answers_a_pending_request_and_the_turn_goes_on(tmp_path: Path) -> None:
    WRITTEN.clear()
    changes: list[int] = []
    broker = ApprovalBroker(on_change=lambda: changes.append(len(broker.pending())))
    model = ScriptedModel([call_tool("Write", {"file_path": "a.txt", "content": "x"}), "ok"])
    config = main_config(model, context(tmp_path, Policy(modes=("default",), approver=broker)))
    turn = asyncio.create_task(run(config))
    while not broker.pending():
        await asyncio.sleep(0.01)
    assert broker.answer(broker.pending()[0].id, Approval(True))
    out = await turn
    assert out.content == "ok" and WRITTEN == ["a.txt"] and changes == [1, 0]


async def test_a_failing_approval_callback_is_a_no(tmp_path: Path) -> None:
    def broken(request: ApprovalRequest) -> bool:
        raise RuntimeError("boom")

    model = ScriptedModel([call_tool("Write", {"file_path": "a.txt", "content": "x"}), "ok"])
    await run(main_config(model, context(tmp_path, Policy(modes=("default",), approver=broken))))
    assert "approval callback failed: RuntimeError" in results(model)[0].content


async def test_a_hooks_allow_never_skips_asking_about_what_the_workspace_runs(
    tmp_path: Path,
) -> None:
    from retinue.policy.hooks import Hooks

    WRITTEN.clear()
    script = tmp_path / "allow.sh"
    script.write_text(
        '#!/bin/sh\ncat >/dev/null\necho \'{"hookSpecificOutput": {"hookEventName": '
        '"PreToolUse", "permissionDecision": "allow"}}\'\n'
    )
    script.chmod(0o755)
    data = {"hooks": {"PreToolUse": [{"matcher": "Write", "hooks": [
        {"type": "command", "command": str(script)}]}]}}  # fmt: skip
    policy = Policy(modes=("default",), hooks=Hooks.from_settings(data))
    model = ScriptedModel(
        [
            call_tool("Write", {"file_path": "plain.txt", "content": "x"}),
            call_tool("Write", {"file_path": ".mcp.json", "content": "{}"}),
            "done",
        ]
    )
    await run(main_config(model, context(tmp_path, policy)))
    assert WRITTEN == ["plain.txt"]  # the hook's allow skipped the mode's ask for it alone
    assert "nobody is here to approve it" in results(model)[-1].content


class CountingMemory:
    """Counts consolidations per session (no store behind it)."""

    def __init__(self) -> None:
        self.consolidated: list[str] = []

    async def render(self, tenant: str, role: str) -> str:
        return ""

    async def consolidate(self, *, tenant, role, session_id, messages, model) -> bool:  # type: ignore[no-untyped-def]
        self.consolidated.append(session_id)
        return True


async def test_unloading_a_session_whose_call_waits_for_approval_ends_it_once(
    tmp_path: Path,
) -> None:
    WRITTEN.clear()
    broker = ApprovalBroker()
    memory = CountingMemory()
    writer = ScriptedModel([call_tool("Write", {"file_path": "w.txt", "content": "x"})])
    role = Role("w", "writes", "You write.", None, "scripted:w", frozenset({"memory"}))
    manager = SubAgentManager(
        RoleCatalog.of(role),
        ToolRegistry([fake_write]),
        default_model=ScriptedModel(name="scripted:default"),
        model_for=lambda _name: writer,
        memory=memory,  # type: ignore[arg-type]
    )
    ctx = context(tmp_path, Policy(modes=("default",), approver=broker), manager)
    turn = asyncio.create_task(manager.interactive_subagent(ctx, "write it", "w"))
    while not broker.pending():
        await asyncio.sleep(0.01)
    said = await manager.unload_subagent("main", "w")
    assert "consolidated" in said
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await turn
    assert broker.pending() == [] and WRITTEN == []
    assert memory.consolidated == ["main/w"]  # exactly once
    await manager.cleanup("main")
    assert memory.consolidated == ["main/w"]
