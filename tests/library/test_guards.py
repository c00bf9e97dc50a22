"""Guards in Python: ``Agent(guards=[...])`` checks each model call, each tool call before it
runs and its result before the model reads it, and each answer; each may deny, rewrite or ask
(through the one approver), at every depth, before the settings' hooks; a guard that raises is
an error the run survives."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from pathlib import Path

import pytest
from pydantic import BaseModel

from retinue import (
    Agent,
    ApprovalRequest,
    FinalAnswer,
    Guard,
    Message,
    ModelRequest,
    Role,
    ToolRequest,
    ToolResponse,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
    Verdict,
    tool,
)
from retinue.engine import RunConfig, run
from retinue.messages import SystemMessage
from retinue.policy.gate import Policy
from retinue.policy.hooks import Hooks
from retinue.testing import ScriptedModel, call_tool, final_result
from retinue.tools import ToolContext, ToolRegistry

ran: list[str] = []


@tool
def shell(command: str) -> str:
    """Run a command (pretend)."""
    ran.append(command)
    return f"ran {command}; the password is hunter2"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


def agent(model: ScriptedModel, tmp_path: Path, *guards: Guard, **kw: object) -> Agent:
    return Agent(model, workspace=tmp_path, home=tmp_path / "home", tools=[shell],
                 builtin_tools=False, memory=False, guards=guards, **kw)  # type: ignore[arg-type]  # fmt: skip


def results(model: ScriptedModel, n: int = -1) -> list[str]:
    return [m.content for m in model.calls[n].messages if isinstance(m, ToolResultMessage)]


def no_rm(call: ToolRequest) -> Verdict | None:
    if call.tool == "shell" and "rm " in call.arguments.get("command", ""):
        return Verdict.deny("rm is not allowed")
    return None


def test_a_guard_denies_a_tool_call_and_the_turn_goes_on(tmp_path: Path) -> None:
    model = ScriptedModel([call_tool("shell", {"command": "rm -rf /"}),
                           call_tool("shell", {"command": "ls"}), "done"])  # fmt: skip
    out = agent(model, tmp_path, Guard(before_tool=no_rm)).run_sync("clean up")
    assert out.content == "done" and ran == ["ls"]
    assert "rm is not allowed" in results(model, 1)[0] and "did not run" in results(model, 1)[0]


def test_a_guard_rewrites_arguments_then_the_result_before_the_model_reads_it(
    tmp_path: Path,
) -> None:
    async def dry_run(call: ToolRequest) -> Verdict[dict[str, object]]:  # async is fine
        await asyncio.sleep(0)
        return Verdict.rewrite({"command": call.arguments["command"] + " --dry-run"})

    def redact(res: ToolResponse) -> Verdict[str]:
        return Verdict.rewrite(res.content.replace("hunter2", "[redacted]"))

    model = ScriptedModel([call_tool("shell", {"command": "make"}), "ok"])
    guards = Guard(before_tool=dry_run), Guard(after_tool=redact)
    agent(model, tmp_path, *guards).run_sync("build")
    assert ran == ["make --dry-run"]
    assert results(model) == ["ran make --dry-run; the password is [redacted]"]


def test_guards_run_in_order_each_on_what_the_one_before_left(tmp_path: Path) -> None:
    def first(call: ToolRequest) -> Verdict[dict[str, object]]:
        return Verdict.rewrite({"command": "rm x"})

    model = ScriptedModel([call_tool("shell", {"command": "ls"}), "ok"])
    agent(model, tmp_path, Guard(before_tool=first), Guard(before_tool=no_rm)).run_sync("go")
    assert ran == [] and "rm is not allowed" in results(model)[0]


def test_only_a_rewrite_changes_the_call(tmp_path: Path) -> None:
    def meddle(call: ToolRequest) -> None:
        call.arguments["command"] = "rm -rf /"  # changes the guard's copy, not the call

    def edit(call: ToolRequest) -> Verdict[dict[str, object]]:
        call.arguments["command"] += " -l"
        return Verdict.rewrite(call.arguments)

    model = ScriptedModel([call_tool("shell", {"command": "ls"}), "ok"])
    agent(model, tmp_path, Guard(before_tool=meddle), Guard(before_tool=edit)).run_sync("go")
    assert ran == ["ls -l"]


def test_a_model_call_is_rewritten_or_refused_before_it_is_made(tmp_path: Path) -> None:
    def scrub(req: ModelRequest) -> Verdict[Sequence[Message]]:
        return Verdict.rewrite([m if not isinstance(m, UserMessage)
                                else UserMessage(m.content.replace("4111-1111", "[card]"))
                                for m in req.messages])  # fmt: skip

    model = ScriptedModel(["noted"])
    a = agent(model, tmp_path, Guard(before_model=scrub))
    out = a.run_sync("my card is 4111-1111")
    sent = [m.content for m in model.calls[0].messages if isinstance(m, UserMessage)]
    assert sent == ["my card is [card]"] and out.content == "noted"
    assert "4111-1111" in repr(out.messages)  # the history keeps what was said

    def budget(req: ModelRequest) -> Verdict | None:
        return Verdict.deny("over budget") if req.ctx.depth == 0 else None

    model = ScriptedModel([])
    out = agent(model, tmp_path, Guard(before_model=budget)).run_sync("hello")
    assert model.call_count == 0
    assert out.stop_reason == "refused" and out.stopped
    assert out.content == "Stopped: the model call was refused: over budget"


def test_an_answer_is_rewritten_or_withheld(tmp_path: Path) -> None:
    def polite(ans: FinalAnswer) -> Verdict[str]:
        return Verdict.rewrite(ans.content.upper())

    model = ScriptedModel(["hello there"])
    out = agent(model, tmp_path, Guard(on_answer=polite)).run_sync("hi")
    assert out.content == out.output == "HELLO THERE" and out.stop_reason == "final"
    assert out.messages[-1].content == "HELLO THERE"

    def no_leak(ans: FinalAnswer) -> Verdict | None:
        return Verdict.deny("it names a password") if "hunter2" in ans.content else None

    model = ScriptedModel(["the password is hunter2"])
    out = agent(model, tmp_path, Guard(on_answer=no_leak)).run_sync("what is it?")
    assert out.stop_reason == "refused"
    assert out.content == "Stopped: the answer was withheld: it names a password"
    assert "hunter2" not in repr(out.messages)  # the withheld answer is not kept


def test_a_typed_answer_is_rewritten_as_its_type_or_refused(tmp_path: Path) -> None:
    class Report(BaseModel):
        headline: str

    def shout(ans: FinalAnswer) -> Verdict[str]:
        assert isinstance(ans.output, Report)  # the guard sees the typed value too
        return Verdict.rewrite(Report(headline=ans.output.headline.upper()).model_dump_json())

    model = ScriptedModel([final_result({"headline": "calm"})])
    a = agent(model, tmp_path, Guard(on_answer=shout), output_type=Report)
    assert a.run_sync("report").output == Report(headline="CALM")

    model = ScriptedModel([final_result({"headline": "calm"})])
    bad = Guard(on_answer=lambda ans: Verdict.rewrite("not json"))
    out = agent(model, tmp_path, bad, output_type=Report).run_sync("report")
    assert out.stop_reason == "refused" and "not its type" in out.content


def test_a_guard_that_asks_goes_to_the_approver_and_without_one_is_refused(
    tmp_path: Path,
) -> None:
    def careful(call: ToolRequest) -> Verdict:
        return Verdict.ask(f"shell {call.arguments['command']!r} wants a look")

    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return "ls" in request.arguments

    model = ScriptedModel([call_tool("shell", {"command": "ls"}),
                           call_tool("shell", {"command": "reboot"}), "done"])  # fmt: skip
    agent(model, tmp_path, Guard(before_tool=careful), approver=approver).run_sync("go")
    assert ran == ["ls"] and [r.tool for r in asked] == ["shell", "shell"]
    assert asked[0].reason == "shell 'ls' wants a look"
    assert "did not approve" in results(model)[1]

    model = ScriptedModel([call_tool("shell", {"command": "ls"}), "done"])
    agent(model, tmp_path, Guard(before_tool=careful)).run_sync("go")  # nobody to answer
    assert ran == ["ls"]  # (only the first run's)
    [said] = results(model)
    assert "nobody is here to approve it" in said and "wants a look" in said


def test_an_answer_a_guard_asks_about_waits_for_the_approver(tmp_path: Path) -> None:
    def review(ans: FinalAnswer) -> Verdict:
        return Verdict.ask("answers are reviewed")

    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return False

    model = ScriptedModel(["42"])
    out = agent(model, tmp_path, Guard(on_answer=review), approver=approver).run_sync("?")
    assert [r.tool for r in asked] == ["(final answer)"] and '"42"' in asked[0].arguments
    assert out.stop_reason == "refused" and "did not approve" in out.content


def test_a_guard_that_raises_is_an_error_the_run_survives(tmp_path: Path) -> None:
    def broken(call: ToolRequest) -> Verdict | None:
        raise KeyError("oops")

    model = ScriptedModel([call_tool("shell", {"command": "ls"}), "carried on"])
    out = agent(model, tmp_path, Guard(before_tool=broken, name="audit")).run_sync("go")
    assert out.content == "carried on" and ran == []
    assert "guard 'audit' failed: KeyError: 'oops'" in results(model)[0]

    def wrong(res: ToolResponse) -> Verdict[object]:
        return Verdict.rewrite(42)  # not a str: refused, not sent

    model = ScriptedModel([call_tool("shell", {"command": "ls"}), "ok"])
    bad = Guard(after_tool=wrong)  # pyright: ignore[reportArgumentType] -- a type checker sees it
    agent(model, tmp_path, bad).run_sync("go")
    assert "rewrote it as a int" in results(model)[0] and "hunter2" not in results(model)[0]


def test_guards_apply_to_sub_agents_at_every_depth(tmp_path: Path) -> None:
    seen: list[tuple[str, int]] = []

    def watch(call: ToolRequest) -> Verdict | None:
        seen.append((call.tool, call.ctx.depth))
        return no_rm(call)

    steps: deque[object] = deque([
        call_tool("SubAgent", {"task": "tidy", "role": "ops"}),
        call_tool("shell", {"command": "rm -rf build"}),
        "could not remove it",
        "the sub-agent could not remove it",
    ])  # fmt: skip

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> object:
        return steps.popleft()

    def sign(ans: FinalAnswer) -> Verdict[str]:
        seen.append(("answer", ans.ctx.depth))
        return Verdict.rewrite(f"{ans.content} [{ans.ctx.role}]")

    role = Role(name="ops", description="Runs commands", prompt="You run.", tools=("shell",))
    model = ScriptedModel(responder=answer)
    guard = Guard(before_tool=watch, on_answer=sign)
    out = agent(model, tmp_path, guard, roles=[role]).run_sync("tidy up")
    assert out.content == "the sub-agent could not remove it [main]" and ran == []
    assert seen == [("SubAgent", 0), ("shell", 1), ("answer", 1), ("answer", 0)]
    assert "could not remove it [ops]" in results(model)[0]  # what the parent read


def test_guards_run_before_the_settings_hooks(tmp_path: Path) -> None:
    """A guard's deny means the PreToolUse hook never runs; its rewrite is what the hook sees."""
    log = tmp_path / "hook.log"
    hook = {"type": "command", "command": f"cat >> {log}"}
    parsed = Hooks.from_settings({"hooks": {"PreToolUse": [{"matcher": "", "hooks": [hook]}]}},
                                 source=None)  # fmt: skip
    hooks = Hooks(parsed.commands, workspace=tmp_path)

    def tag(call: ToolRequest) -> Verdict:
        if call.arguments["command"] == "ls":
            return Verdict.rewrite({"command": "ls --tagged"})
        return no_rm(call) or Verdict.allow()

    policy = Policy(modes=("bypassPermissions",), hooks=hooks, guards=(Guard(before_tool=tag),))
    ctx = ToolContext("main", tmp_path, tmp_path / ".data", call_chain=("main",), gate=policy)
    model = ScriptedModel([call_tool("shell", {"command": "rm -rf x"}),
                           call_tool("shell", {"command": "ls"}), "done"])  # fmt: skip
    config = RunConfig(model, [SystemMessage("main"), UserMessage("go")],
                       ToolRegistry([shell]), ctx)  # fmt: skip
    assert asyncio.run(run(config)).content == "done"
    assert ran == ["ls --tagged"]
    text = log.read_text()
    assert "--tagged" in text and "rm -rf" not in text
