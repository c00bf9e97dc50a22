"""Claude Code hooks with real hook scripts: the PreToolUse and PostToolUse examples of its
documentation in a real run, the JSON protocol, and what a hook that misbehaves does (and does
not do) to the turn: timeouts, bad JSON, huge output, failures; and what a hook may see."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from retinue.engine import RunConfig, run
from retinue.events import NOTICE, Event
from retinue.messages import SystemMessage, ToolResultMessage, UserMessage
from retinue.policy._hook_run import OUTPUT_LIMIT, run_hook_command
from retinue.policy.gate import Policy
from retinue.policy.hooks import Hooks, hook_input
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry
from retinue.tools.builtin.fs import file_tools
from retinue.tools.builtin.shell import shell_tools

pytestmark = pytest.mark.timeout(180)  # a hang bound


def script(directory: Path, name: str, body: str, *, python: bool = False) -> Path:
    """A hook script file, executable (bash, or python with this interpreter)."""
    path = directory / name
    shebang = f"#!{sys.executable}\n" if python else "#!/bin/bash\n"
    path.write_text(shebang + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def hooks_for(
    event: str,
    command: str,
    *,
    matcher: str = "",
    timeout: float | None = None,
    workspace: Path | None = None,
    env: dict[str, str] | None = None,
) -> Hooks:
    hook: dict[str, Any] = {"type": "command", "command": command}
    if timeout is not None:
        hook["timeout"] = timeout
    data = {"hooks": {event: [{"matcher": matcher, "hooks": [hook]}]}}
    hooks = Hooks.from_settings(data, source=None)
    return Hooks(hooks.commands, workspace=workspace, env=env, problems=hooks.problems)


def context(ws: Path, hooks: Hooks, events: list[Event] | None = None) -> ToolContext:
    policy = Policy(modes=("bypassPermissions",), hooks=hooks)
    sink = events.append if events is not None else None
    return ToolContext("main", ws, ws / ".data", call_chain=("main",), events=sink, gate=policy)


def tool_results(model: ScriptedModel) -> list[ToolResultMessage]:
    return [m for m in model.calls[-1].messages if isinstance(m, ToolResultMessage)]


async def run_main(model: ScriptedModel, ctx: ToolContext) -> str:
    registry = ToolRegistry([*file_tools(), *shell_tools()])
    config = RunConfig(model, [SystemMessage("main"), UserMessage("go")], registry, ctx)
    return (await run(config)).content


# -- Claude Code's documented examples ---------------------------------------------------------

BLOCK_RM = """
command=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["tool_input"]["command"])')
if echo "$command" | grep -q 'rm -rf'; then
  echo "Blocked: rm -rf is not allowed here" >&2
  exit 2
fi
exit 0
"""


async def test_a_pretooluse_hook_blocks_rm_rf_with_exit_2_and_other_commands_run(
    tmp_path: Path,
) -> None:
    (tmp_path / "keep").mkdir()
    guard = script(tmp_path, "guard.sh", BLOCK_RM)
    ctx = context(tmp_path, hooks_for("PreToolUse", str(guard), matcher="Bash"))
    model = ScriptedModel([
        call_tool("Bash", {"command": "rm -rf keep"}),
        call_tool("Bash", {"command": "echo fine > ok.txt"}),
        "done",
    ])  # fmt: skip
    assert await run_main(model, ctx) == "done"
    refused, ran = tool_results(model)
    assert refused.is_error and "Blocked: rm -rf is not allowed here" in refused.content
    assert (tmp_path / "keep").is_dir()  # never ran
    assert not ran.is_error and (tmp_path / "ok.txt").read_text() == "fine\n"


FORMATTER = """
import json, sys
event = json.load(sys.stdin)
path = event["tool_input"]["file_path"]
with open(path, "a") as f:
    f.write("# formatted by hook (" + event["tool_name"] + ")\\n")
"""


async def test_a_posttooluse_formatter_runs_after_every_edit_and_write_only(
    tmp_path: Path,
) -> None:
    fmt = script(tmp_path, "fmt.py", FORMATTER, python=True)
    ctx = context(tmp_path, hooks_for("PostToolUse", str(fmt), matcher="Edit|Write"))
    model = ScriptedModel([
        call_tool("Write", {"file_path": "a.py", "content": "x = 1\n"}),
        call_tool("Read", {"file_path": "a.py"}),
        call_tool("Edit", {"file_path": "a.py", "old_string": "x = 1", "new_string": "x = 2"}),
        "done",
    ])  # fmt: skip
    assert await run_main(model, ctx) == "done"
    assert (tmp_path / "a.py").read_text() == (
        "x = 2\n# formatted by hook (Write)\n# formatted by hook (Edit)\n"
    )  # Read matched no hook: no third line


# -- the JSON protocol -------------------------------------------------------------------------


async def test_permission_decision_deny_and_updated_input(tmp_path: Path) -> None:
    deny = json.dumps({"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": "no writing on Fridays"}})  # fmt: skip
    ctx = context(tmp_path, hooks_for("PreToolUse", f"echo '{deny}'", matcher="Write"))
    model = ScriptedModel([call_tool("Write", {"file_path": "f.txt", "content": "x"}), "ok"])
    await run_main(model, ctx)
    [refused] = tool_results(model)
    assert refused.is_error and "no writing on Fridays" in refused.content
    assert not (tmp_path / "f.txt").exists()

    rewrite = script(tmp_path, "rewrite.py", (
        "import json, sys\nargs = json.load(sys.stdin)['tool_input']\n"
        "args['command'] = 'echo rewritten'\n"
        "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PreToolUse',"
        " 'permissionDecision': 'allow', 'updatedInput': args}}))\n"), python=True)  # fmt: skip
    ctx = context(tmp_path, hooks_for("PreToolUse", str(rewrite), matcher="Bash"))
    model = ScriptedModel([call_tool("Bash", {"command": "echo original"}), "ok"])
    await run_main(model, ctx)
    [ran] = tool_results(model)
    assert "rewritten" in ran.content and "original" not in ran.content


async def test_hooks_run_in_parallel_and_deny_beats_ask_beats_allow(tmp_path: Path) -> None:
    def said(decision: str) -> dict[str, Any]:
        out = {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                      "permissionDecision": decision,
                                      "permissionDecisionReason": f"{decision} said"}}  # fmt: skip
        # each waits until all three have started: they can only finish if they run together
        body = f"touch {tmp_path}/{decision}; for i in $(seq 100); do " \
               f"[ -e {tmp_path}/allow ] && [ -e {tmp_path}/ask ] && [ -e {tmp_path}/deny ] " \
               f"&& break; sleep 0.05; done; echo '{json.dumps(out)}'"  # fmt: skip
        return {"type": "command", "command": body}

    data = {"hooks": {"PreToolUse": [
        {"matcher": "*", "hooks": [said("allow")]},
        {"matcher": "Bash", "hooks": [said("ask"), said("deny")]}]}}  # fmt: skip
    hooks = Hooks.from_settings(data)
    result = await hooks.run("PreToolUse", {"tool_name": "Bash"}, matcher_value="Bash")
    assert result.permission == "deny" and result.reason == "deny said"
    assert not result.problems


async def test_matchers_follow_claude_codes_rule(tmp_path: Path) -> None:
    data = {"hooks": {"PreToolUse": [
        {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "echo a"}]},
        {"matcher": "mcp__github__.*", "hooks": [{"type": "command", "command": "echo b"}]},
        {"hooks": [{"type": "command", "command": "echo c"}]}]}}  # fmt: skip
    [a, b, c] = Hooks.from_settings(data).commands
    assert a.matches("Write") and not a.matches("WriteFile") and not a.matches("Read")
    assert b.matches("mcp__github__get_issue") and not b.matches("mcp__gitlab__x")
    assert c.matches("anything") and c.name == "PreToolUse:*#2"


# -- hooks that misbehave --------------------------------------------------------------------


async def test_a_hook_that_times_out_is_killed_with_its_children_and_the_call_still_runs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tok = _token()
    slow = f"sleep {tok} & wait"
    ctx = context(tmp_path, hooks_for("PreToolUse", slow, timeout=0.5))
    model = ScriptedModel([call_tool("Bash", {"command": "echo ran"}), "done"])
    assert await run_main(model, ctx) == "done"
    [ran] = tool_results(model)
    assert not ran.is_error and "ran" in ran.content
    assert "PreToolUse hook PreToolUse:*#0 timed out after 0.5 s and was killed" in caplog.text
    assert await _gone(tok)


def _token() -> str:
    """A sleep length no other process has in its command line (a hook in a PID namespace
    knows its children by numbers the host does not use, so they are found by this)."""
    return f"600.{uuid.uuid4().int % 10**9:09d}"  # outlives any wait for it to go


def _running(tok: str) -> bool:
    """Whether a live process on the machine runs ``sleep tok``."""
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if tok.encode() in cmdline and state != "Z":
            return True
    return False


async def _gone(tok: str) -> bool:
    for _ in range(3000):  # a kill lands asynchronously: this bounds the wait, it times nothing
        if not _running(tok):
            return True
        await asyncio.sleep(0.02)
    return False


async def test_bad_json_and_a_failing_hook_are_reported_and_the_call_runs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = {"hooks": {"PreToolUse": [{"hooks": [
        {"type": "command", "command": "echo '{\"decision\": '"},
        {"type": "command", "command": "echo oops >&2; exit 1"}]}]}}  # fmt: skip
    ctx = context(tmp_path, Hooks.from_settings(data))
    model = ScriptedModel([call_tool("Bash", {"command": "echo ran"}), "done"])
    assert await run_main(model, ctx) == "done"
    [ran] = tool_results(model)
    assert not ran.is_error and "ran" in ran.content
    assert "printed invalid JSON" in caplog.text
    assert "failed (exit code 1): oops" in caplog.text
    # where the caller has an event sink, each problem is a notice there too
    events: list[Event] = []
    result = await Hooks.from_settings(data).run(
        "PreToolUse", {}, events=events.append, agent_id="main"
    )
    notices = [e.data["text"] for e in events if e.kind == NOTICE]
    assert notices == list(result.problems) and len(notices) == 2


async def test_output_is_bounded_and_the_rest_dropped_with_a_note(tmp_path: Path) -> None:
    flood = "head -c 1000000 /dev/zero | tr '\\0' x; head -c 300000 /dev/zero | tr '\\0' y >&2"
    outcome = await run_hook_command(flood, b"{}", cwd=tmp_path, env={"PATH": os.defpath},
                                     timeout=20)  # fmt: skip
    assert outcome.code == 0
    assert len(outcome.stdout) == OUTPUT_LIMIT
    assert outcome.dropped_stdout == 1_000_000 - OUTPUT_LIMIT
    assert len(outcome.stderr) == OUTPUT_LIMIT
    assert outcome.dropped_stderr == 300_000 - OUTPUT_LIMIT
    result = await hooks_for("PostToolUse", flood).run("PostToolUse", {})
    assert any("printed more than 65536 bytes" in p for p in result.problems)


async def test_a_hook_that_does_not_read_its_large_input_is_fine(tmp_path: Path) -> None:
    result = await hooks_for("PostToolUse", "exit 0").run(
        "PostToolUse", {"tool_response": {"content": "z" * 2_000_000}}
    )
    assert result.problems == () and not result.block


async def test_cancelling_the_turn_kills_the_hook(tmp_path: Path) -> None:
    tok = _token()
    hooks = hooks_for("PreToolUse", f"sleep {tok}", workspace=tmp_path)
    task = asyncio.create_task(hooks.run("PreToolUse", {}))
    for _ in range(3000):  # the hook starting: a hang bound, polled
        if _running(tok):
            break
        await asyncio.sleep(0.02)
    assert _running(tok)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _gone(tok)


# -- what a hook sees --------------------------------------------------------------------------


async def test_a_hook_never_sees_provider_keys_unless_the_users_settings_pass_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-openai")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-canary-anthropic")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-canary")
    dump = f"env > {tmp_path}/env.txt; cat > {tmp_path}/stdin.json"
    ctx = context(tmp_path, hooks_for("PreToolUse", dump, workspace=tmp_path))
    model = ScriptedModel([call_tool("Bash", {"command": "true"}), "done"])
    await run_main(model, ctx)
    seen = (tmp_path / "env.txt").read_text()
    assert "canary" not in seen and "OPENAI_API_KEY" not in seen
    assert f"CLAUDE_PROJECT_DIR={tmp_path}\n" in seen and "PATH=" in seen
    event = json.loads((tmp_path / "stdin.json").read_text())
    assert event["hook_event_name"] == "PreToolUse" and event["tool_name"] == "Bash"
    assert event["tool_input"] == {"command": "true"} and event["cwd"] == str(tmp_path)
    assert event["permission_mode"] == "bypassPermissions" and event["session_id"] == "main"

    passed = hooks_for("PreToolUse", dump, workspace=tmp_path, env={"GITHUB_TOKEN": "given"})
    await passed.run("PreToolUse", hook_input(ctx, "PreToolUse"))
    seen = (tmp_path / "env.txt").read_text()
    assert "GITHUB_TOKEN=given\n" in seen and "canary" not in seen


def test_malformed_entries_are_reported_by_file_and_the_others_stay(tmp_path: Path) -> None:
    source = tmp_path / "settings.json"
    data = {"hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "echo ok"}]},
            {"matcher": "([", "hooks": [{"type": "command", "command": "echo bad"}]},
            {"matcher": "Read", "hooks": [{"type": "prompt", "prompt": "?"},
                                          {"type": "command"},
                                          {"type": "command", "command": "x", "timeout": 9999}]},
            "not an object"],
        "BeforeEverything": [],
        "PermissionRequest": [],
        "Stop": {"hooks": []}}}  # fmt: skip
    hooks = Hooks.from_settings(data, source=source)
    assert [(c.event, c.matcher, c.command, c.timeout) for c in hooks.commands] == [
        ("PreToolUse", "Bash", "echo ok", 60.0),
        ("PreToolUse", "Read", "x", 600.0),
    ]
    problems = "\n".join(hooks.problems)
    assert all(line.startswith(str(source)) for line in hooks.problems)
    for part in (
        "not a valid pattern",
        "type 'prompt' are not supported",
        "'command' must be a non-empty string",
        "capped at 600 s",
        "must be an object with 'hooks'",
        "'BeforeEverything' is unknown",
        "'PermissionRequest' is not supported by Retinue",
        "hooks.Stop must be a list",
    ):
        assert part in problems, part  # fmt: skip


async def test_exit_2_of_an_event_that_cannot_block_is_a_notice_for_the_user(
    tmp_path: Path,
) -> None:
    events: list[Event] = []
    hooks = hooks_for("SessionStart", "echo 'index is stale' >&2; exit 2")
    result = await hooks.run("SessionStart", {}, events=events.append, agent_id="main")
    assert not result.block and result.problems == ()
    assert [e.data["text"] for e in events if e.kind == NOTICE] == [
        "SessionStart hook SessionStart:*#0: index is stale"
    ]
