"""Every hook event Retinue fires, each with a real hook script: UserPromptSubmit, Stop,
SessionStart, SessionEnd, SubagentStart, SubagentStop (a role's own Stop hooks included),
PreCompact and Notification; and the trust rule: a project hook stays inert until approved."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from retinue.cli.app import app
from retinue.engine import RunConfig
from retinue.engine.compress import AutoCompressor
from retinue.engine.session import Lifecycle, Session
from retinue.errors import SessionError
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
from retinue.policy.approvals import Approval, ApprovalRequest
from retinue.policy.gate import Policy
from retinue.policy.hooks import MAX_STOP_BLOCKS, HookResult, Hooks, load_hooks
from retinue.subagents import Role, RoleCatalog, SubAgentManager
from retinue.subagents.tools import ask_parent
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry, tool
from retinue.tools.builtin.sandbox import bwrap_problem

pytestmark = pytest.mark.timeout(60)


def recorder(log: Path, answer: str = "", code: int = 0) -> str:
    """A hook that appends its stdin (one JSON line) to ``log``, prints ``answer`` and exits
    with ``code``."""
    py = (
        "import json,sys; e=json.load(sys.stdin); "
        f"open({str(log)!r},'a').write(json.dumps(e)+chr(10))"
    )
    out = f"; printf '%s' {json.dumps(answer)}" if answer else ""
    return f"python3 -c {json.dumps(py)}{out}; exit {code}"


def answer(event: str, context: str) -> str:
    """A hook's JSON answer that adds ``context``."""
    specific = {"hookEventName": event, "additionalContext": context}
    return json.dumps({"hookSpecificOutput": specific})


def seen(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def settings(*entries: tuple[str, str, str]) -> dict[str, Any]:
    """``{"hooks": ...}`` from (event, matcher, command) entries."""
    hooks: dict[str, list[Any]] = {}
    for event, matcher, command in entries:
        hooks.setdefault(event, []).append(
            {"matcher": matcher, "hooks": [{"type": "command", "command": command}]}
        )
    return {"hooks": hooks}


def gate(hooks: Hooks, mode: str = "bypassPermissions", approver: Any = None) -> Policy:
    return Policy(modes=(mode,), hooks=hooks, approver=approver)  # type: ignore[arg-type]


def main_session(tmp_path: Path, model: ScriptedModel, hooks: Hooks, **kw: Any) -> Session:
    ctx = ToolContext("main", tmp_path, tmp_path / ".data", call_chain=("main",),
                      gate=gate(hooks, **kw))  # fmt: skip

    async def system_prompt() -> str:
        return "You are the main agent."

    config = RunConfig(model, [], ToolRegistry([ask_parent]), ctx)
    return Session("main", config, Lifecycle(system_prompt=system_prompt))


# -- UserPromptSubmit, SessionStart, Stop, SessionEnd ------------------------------------------


async def test_session_start_and_user_prompt_submit_add_context(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    prompt_context = answer("UserPromptSubmit", "The build is green.")
    hooks = Hooks.from_settings(settings(
        ("SessionStart", "startup", recorder(log, "Project rule: tabs, not spaces.")),
        ("UserPromptSubmit", "", recorder(log, prompt_context))))  # fmt: skip
    model = ScriptedModel(["ok", "ok again"])
    session = main_session(tmp_path, model, hooks)
    await session.send("fix the bug")
    await session.send("and the other one")
    system, user = model.calls[0].messages[:2]
    assert isinstance(system, SystemMessage)
    assert system.content == "You are the main agent.\n\nProject rule: tabs, not spaces."
    assert user.content == "fix the bug\n\nThe build is green."
    events = seen(log)
    assert [e["hook_event_name"] for e in events] == [
        "SessionStart", "UserPromptSubmit", "UserPromptSubmit"]  # fmt: skip
    assert events[0]["source"] == "startup" and events[1]["prompt"] == "fix the bug"
    assert events[2]["prompt"] == "and the other one"


async def test_user_prompt_submit_exit_2_drops_the_prompt_and_tells_the_user(
    tmp_path: Path,
) -> None:
    hooks = Hooks.from_settings(settings((
        "UserPromptSubmit", "",
        "grep -q password && { echo 'Do not paste secrets into the chat' >&2; exit 2; }; exit 0",
    )))  # fmt: skip
    model = ScriptedModel(["answered"])
    session = main_session(tmp_path, model, hooks)
    with pytest.raises(SessionError, match="Do not paste secrets into the chat"):
        await session.send("my password is hunter2")
    assert model.call_count == 0
    assert not any(isinstance(m, UserMessage) for m in session.messages)
    assert (await session.send("hello")).content == "answered"  # the session goes on


async def test_a_stop_hook_sends_the_agent_back_once_then_lets_it_stop(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    script = tmp_path / "stop.py"
    script.write_text(
        "import json, sys\n"
        f"e = json.load(sys.stdin); open({str(log)!r}, 'a').write(json.dumps(e) + '\\n')\n"
        "if not e['stop_hook_active']:\n"
        "    print(json.dumps({'decision': 'block', 'reason': 'Run the tests first.'}))\n"
    )
    hooks = Hooks.from_settings(settings(("Stop", "", f"python3 {script}")))
    model = ScriptedModel(["done", "tests pass, done"])
    out = await main_session(tmp_path, model, hooks).send("fix it")
    assert out.content == "tests pass, done" and out.stop_reason == "final"
    last = model.calls[1].messages[-1]
    assert isinstance(last, UserMessage) and "Run the tests first." in last.content
    events = seen(log)
    assert [e["stop_hook_active"] for e in events] == [False, True]
    assert events[0]["last_assistant_message"] == "done"


async def test_a_stop_hook_that_always_blocks_is_bounded(tmp_path: Path) -> None:
    hooks = Hooks.from_settings(settings(("Stop", "", "echo 'keep going' >&2; exit 2")))
    model = ScriptedModel(responder=lambda messages, tools: "still done")
    out = await main_session(tmp_path, model, hooks).send("go")
    assert out.content == "still done"
    assert model.call_count == 1 + MAX_STOP_BLOCKS


async def test_session_end_runs_when_the_conversation_closes(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    hooks = Hooks.from_settings(settings(("SessionEnd", "", recorder(log))))
    session = main_session(tmp_path, ScriptedModel(["hi"]), hooks)
    await session.send("hello")
    assert seen(log) == []
    await session.close()
    [event] = seen(log)
    assert event["hook_event_name"] == "SessionEnd" and event["reason"] == "other"


# -- sub-agents: SubagentStart, SubagentStop, a role's own hooks -------------------------------


async def test_subagent_start_and_stop_with_settings_and_role_hooks(tmp_path: Path) -> None:
    log, own_log = tmp_path / "log.jsonl", tmp_path / "own.jsonl"
    start_context = answer("SubagentStart", "Reviewers cite line numbers.")
    settings_hooks = Hooks.from_settings(settings(
        ("SubagentStart", "reviewer", recorder(log, start_context)),
        ("SubagentStart", "tester", recorder(log, '{"never": "run"}')),
        ("SubagentStop", "", recorder(log)),
        ("Stop", "", recorder(log))))  # fmt: skip
    block_once = tmp_path / "block_once.py"  # the role's own Stop hook: becomes SubagentStop
    block_once.write_text(
        "import json, sys\n"
        f"e = json.load(sys.stdin); open({str(own_log)!r}, 'a').write(json.dumps(e) + '\\n')\n"
        "if not e['stop_hook_active']:\n"
        "    print('Also check the tests.', file=sys.stderr); sys.exit(2)\n"
    )
    role = Role(
        name="reviewer",
        description="Reviews code",
        prompt="You review code.",
        tools=(),
        hooks={"Stop": [{"hooks": [{"type": "command", "command": f"python3 {block_once}"}]}]},
    )
    model = ScriptedModel(["looks fine", "looks fine, tests too"])
    manager = SubAgentManager(RoleCatalog({"reviewer": role}), ToolRegistry(),
                              default_model=model)  # fmt: skip
    ctx = ToolContext("main", tmp_path, tmp_path / ".data", call_chain=("main",),
                      manager=manager, gate=gate(settings_hooks))  # fmt: skip
    out = await manager.run_subagent(ctx, "review the diff", "reviewer")
    assert out.content == "looks fine, tests too"
    assert model.calls[0].messages[0].content.endswith("\n\nReviewers cite line numbers.")
    assert "Also check the tests." in model.calls[1].messages[-1].content
    events = seen(log)  # the settings' hooks; the main agent's Stop hook is not a sub-agent's
    assert [e["hook_event_name"] for e in events] == [
        "SubagentStart", "SubagentStop", "SubagentStop"]  # fmt: skip
    assert all(e["agent_type"] == "reviewer" for e in events)
    assert [e["stop_hook_active"] for e in events[1:]] == [False, True]
    own = seen(own_log)
    assert [(e["hook_event_name"], e["stop_hook_active"]) for e in own] == [
        ("SubagentStop", False), ("SubagentStop", True)]  # fmt: skip
    assert own[0]["last_assistant_message"] == "looks fine"


# -- PreCompact, Notification ------------------------------------------------------------------


async def test_pre_compact_runs_before_a_compression(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    hooks = Hooks.from_settings(settings(("PreCompact", "manual", recorder(log))))
    ctx = ToolContext("main", tmp_path, tmp_path, gate=gate(hooks))
    messages: list[Message] = [SystemMessage("sys")]
    for i in range(12):
        messages += [UserMessage(f"question {i} " + "lorem " * 60),
                     AssistantMessage(f"answer {i} " + "ipsum " * 60)]  # fmt: skip
    keeper = AutoCompressor(context_window=100_000)
    result = await keeper.compress_now(messages, ScriptedModel(["## Task\n- go on"]), ctx)
    assert result is not None and result.removed_messages > 0
    [event] = seen(log)
    assert event["hook_event_name"] == "PreCompact" and event["trigger"] == "manual"
    assert event["custom_instructions"] == ""


@tool("Write")
def fake_write(file_path: str, content: str) -> str:
    """Write a file."""
    return f"wrote {file_path}"


async def test_notification_when_an_approval_is_requested_and_when_an_agent_asks(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log.jsonl"
    hooks = Hooks.from_settings(settings(
        ("Notification", "permission_prompt|agent_question", recorder(log))))  # fmt: skip
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> Approval:
        asked.append(request)
        assert seen(log), "the Notification hook runs before the person is asked"
        return Approval(True)

    model = ScriptedModel([
        call_tool("Write", {"file_path": "a.txt", "content": "x"}),
        call_tool("AskParent", {"question": "which branch?"}),
        "done",
    ])  # fmt: skip
    session = main_session(tmp_path, model, hooks, mode="default", approver=approve)
    session.config.tools.register(fake_write)
    out = await session.send("write it")
    assert out.asking and out.content == "which branch?"
    assert (await session.send("main")).content == "done"
    [result] = [m for m in model.calls[1].messages if isinstance(m, ToolResultMessage)]
    assert result.content == "wrote a.txt" and len(asked) == 1
    first, second = seen(log)
    assert first["notification_type"] == "permission_prompt" and "Write" in first["message"]
    assert second["notification_type"] == "agent_question"
    assert second["message"] == "main asks: which branch?"


# -- trust: project hooks stay inert until approved --------------------------------------------


def _project(ws: Path, command: str) -> None:
    (ws / ".claude").mkdir(parents=True, exist_ok=True)
    data = settings(("PreToolUse", "Bash", command))
    (ws / ".claude" / "settings.json").write_text(json.dumps(data))


async def test_a_project_hook_stays_inert_until_approved_and_again_once_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, home, user = tmp_path / "ws", tmp_path / "data", tmp_path / "user"
    ws.mkdir()
    user.mkdir()
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.setenv("RETINUE_HOME", str(home))
    marker = ws / "ran"  # in the workspace: an approved project hook runs in the sandbox
    _project(ws, f"touch {marker}")

    hooks = load_hooks(ws, home, user_home=user)
    assert not hooks and [c.name for c in hooks.untrusted] == ["PreToolUse:Bash#0"]
    [line] = hooks.report()
    assert str(ws / ".claude" / "settings.json") in line
    assert "not approved" in line and "retinue hooks approve 'PreToolUse:Bash#0'" in line
    result = await hooks.run("PreToolUse", {"tool_name": "Bash"}, matcher_value="Bash")
    assert result == HookResult() and not marker.exists()

    listed = CliRunner().invoke(app, ["hooks", "list", "-w", str(ws)])
    assert listed.exit_code == 0 and "PreToolUse:Bash#0 [not approved: inert]" in listed.output
    approved = CliRunner().invoke(app, ["hooks", "approve", "PreToolUse:Bash#0", "-w", str(ws)])
    assert approved.exit_code == 0, approved.output
    assert "Approved 1" in approved.output

    hooks = load_hooks(ws, home, user_home=user)
    assert len(hooks.commands) == 1 and not hooks.untrusted
    said = await hooks.run("PreToolUse", {"tool_name": "Bash"}, matcher_value="Bash")
    if bwrap_problem() is not None:  # no sandbox to run it in: refused, saying so
        assert not marker.exists() and "retinue doctor" in said.problems[0]
    else:
        assert marker.exists() and said.problems == ()

    _project(ws, f"touch {marker}; curl evil.example")  # changed: approval needed again
    hooks = load_hooks(ws, home, user_home=user)
    assert not hooks and len(hooks.untrusted) == 1


async def test_a_role_file_in_the_workspace_brings_inert_hooks(tmp_path: Path) -> None:
    ws, data = tmp_path / "ws", tmp_path / "data"
    (ws / ".claude" / "agents").mkdir(parents=True)
    source = ws / ".claude" / "agents" / "helper.md"
    marker = tmp_path / "ran"
    section = {"Stop": [{"hooks": [{"type": "command", "command": f"touch {marker}"}]}]}
    hooks = Hooks().for_role(section, source, workspace=ws, data_dir=data)
    assert not hooks.has("SubagentStop")
    outside = Hooks().for_role(section, tmp_path / "roles" / "helper.md", workspace=ws,
                               data_dir=data)  # fmt: skip
    assert outside.has("SubagentStop") and not outside.has("Stop")


async def test_config_toml_hooks_and_the_keys_the_user_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-from-env")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary")
    user = tmp_path / "user"
    (user / ".claude").mkdir(parents=True)
    (user / ".claude" / "settings.json").write_text(json.dumps({"env": {"TEAM": "blue"}}))
    dump = tmp_path / "env.txt"
    config = {**settings(("PreToolUse", "", f"env > {dump}"))["hooks"],
              "pass_env": ["GITHUB_TOKEN", "NOT_SET"], "env": {"LEVEL": "3"}}  # fmt: skip
    hooks = load_hooks(tmp_path, tmp_path / "data", config=config, user_home=user,
                       environ=dict(os.environ))  # fmt: skip
    assert len(hooks.commands) == 1 and hooks.problems == ()
    await hooks.run("PreToolUse", {"cwd": str(tmp_path)})
    env = dump.read_text()
    assert "GITHUB_TOKEN=ghp-from-env\n" in env and "TEAM=blue\n" in env and "LEVEL=3\n" in env
    assert "sk-canary" not in env and "NOT_SET" not in env


# -- the whole runtime: hooks from the settings files ------------------------------------------


async def test_the_runtime_runs_the_users_hooks_and_reports_the_projects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retinue.config import Settings
    from retinue.runtime import Runtime

    ws, user = tmp_path / "ws", tmp_path / "user"
    (user / ".claude").mkdir(parents=True)
    ws.mkdir()
    monkeypatch.setenv("HOME", str(user))
    guard = "grep -q 'rm -rf' && { echo 'Blocked by your guard' >&2; exit 2; }; exit 0"
    user_settings = settings(("PreToolUse", "Bash", guard),
                             ("UserPromptSubmit", "", "echo 'Team: platform'"))  # fmt: skip
    (user / ".claude" / "settings.json").write_text(json.dumps(user_settings))
    _project(ws, f"touch {tmp_path}/project-ran")
    model = ScriptedModel([call_tool("Bash", {"command": "rm -rf src"}), "refused, fine"])
    runtime = Runtime.create(Settings.load(home=tmp_path / "data", workspace=ws), model=model,
                             with_memory=False)  # fmt: skip
    assert any("PreToolUse:Bash#0" in p and "retinue hooks approve" in p
               for p in runtime.problems)  # fmt: skip
    out = await runtime.conversation().send("clean up")
    assert out.content == "refused, fine"
    assert model.calls[0].messages[1].content == "clean up\n\nTeam: platform"
    [refused] = [m for m in model.calls[1].messages if isinstance(m, ToolResultMessage)]
    assert refused.is_error and "Blocked by your guard" in refused.content
    assert not (tmp_path / "project-ran").exists()
