"""The consent layer tried as an attacker would: calls that the promises say must not run
without a person's yes, dressed up to slip past the rules, the modes and the prompt."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console
from test_gate import three_deep

from retinue.cli.approve import TerminalApprover
from retinue.engine import RunConfig, run
from retinue.messages import SystemMessage, ToolCall, ToolResultMessage, UserMessage
from retinue.policy.approvals import Approval, ApprovalBroker, ApprovalRequest, answer_fits
from retinue.policy.gate import Policy
from retinue.policy.rules import RuleSet
from retinue.subagents import subagent_tools
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry, tool
from retinue.tools.builtin import glob_tool, grep_tool, ls_tool, write_tool


def context(tmp_path: Path, policy: Policy) -> ToolContext:
    return ToolContext("main", tmp_path, tmp_path, call_chain=("main",), gate=policy)


def rules(tmp_path: Path, **by_decision: list[str]) -> RuleSet:
    out = RuleSet()
    for decision, texts in by_decision.items():
        out.add(decision, texts, tmp_path)  # type: ignore[arg-type]
    assert not out.problems, out.problems
    return out


def results(model: ScriptedModel, n: int = -1) -> list[ToolResultMessage]:
    return [m for m in model.calls[n].messages if isinstance(m, ToolResultMessage)]


# --- protected paths -------------------------------------------------------------------------


async def test_a_symlink_in_the_workspace_does_not_make_claude_settings_an_ordinary_edit(
    tmp_path: Path,
) -> None:
    """acceptEdits lets ordinary edits through, never one to ``.claude``: a link the agent made
    (its sandboxed Bash may) pointing at ``.claude`` must not turn the one into the other."""
    (tmp_path / ".claude").mkdir()
    os.symlink(".claude", tmp_path / "cfg")
    model = ScriptedModel(
        [
            call_tool("Write", {"file_path": "cfg/settings.json", "content": '{"hooks": {}}'}),
            "done",
        ]
    )
    policy = Policy(modes=("acceptEdits",))  # nobody to ask: an ask is a refusal
    registry = ToolRegistry([write_tool])
    cfg = RunConfig(model, [SystemMessage("s"), UserMessage("go")], registry,
                    context(tmp_path, policy))  # fmt: skip
    out = await run(cfg)
    assert out.stop_reason == "final"
    [result] = results(model)
    assert result.is_error and "permission denied" in result.content
    assert not (tmp_path / ".claude" / "settings.json").exists()


@pytest.mark.parametrize(
    "file_path", ["./.claude/../.claude/x", ".mcp.json", ".git/hooks/pre-commit", ".retinue/a"]
)
def test_protected_paths_ask_even_in_accept_edits(tmp_path: Path, file_path: str) -> None:
    policy = Policy(modes=("acceptEdits",))
    for name in ("Write", "Edit", "MultiEdit", "NotebookEdit"):
        key = "notebook_path" if name == "NotebookEdit" else "file_path"
        decision, _ = policy.decide(name, {key: file_path}, context(tmp_path, policy))
        assert decision == "ask", (name, file_path)
    absolute = str(tmp_path / file_path)
    assert policy.decide("Write", {"file_path": absolute}, context(tmp_path, policy))[0] == "ask"


# --- Bash rules ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "npm test; touch pwned",
        "npm test && touch pwned",
        "npm test || touch pwned",
        "npm test | sh",
        "npm test & touch pwned",
        "npm test\ntouch pwned",
        "npm test $(touch pwned)",
        "npm test `touch pwned`",
        "npm test <(touch pwned)",
        "npm test >(touch pwned)",
    ],
)
def test_an_allow_rule_does_not_cover_a_command_hidden_behind_its_prefix(
    tmp_path: Path, command: str
) -> None:
    policy = Policy(modes=("default",), rules=rules(tmp_path, allow=["Bash(npm test:*)"]))
    decision, _ = policy.decide("Bash", {"command": command}, context(tmp_path, policy))
    assert decision == "ask", command


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf build",
        "echo ok; rm -rf build",
        "echo ok && rm -rf build",
        "echo ok | rm -rf build",
        "echo ok\nrm -rf build",
        "(rm -rf build)",
        "{ rm -rf build; }",
        "FOO=1 rm -rf build",
        "if true; then rm -rf build; fi",
        "while false; do rm -rf build; done",
        "! rm -rf build",
        "\\rm -rf build",
        "/bin/rm -rf build",
        "sudo rm -rf build",
        "env rm -rf build",
        "echo build | xargs rm -rf",
        "eval rm -rf build",
    ],
)
def test_a_deny_rule_holds_for_a_command_wrapped_in_shell_syntax(
    tmp_path: Path, command: str
) -> None:
    policy = Policy(modes=("bypassPermissions",), rules=rules(tmp_path, deny=["Bash(rm:*)"]))
    decision, _ = policy.decide("Bash", {"command": command}, context(tmp_path, policy))
    assert decision == "deny", command


# --- WebFetch hosts --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com@evil.com/",
        "https://example.com:443@evil.com/",
        "https://evil.com#@example.com/",
        "https://evil.com?@example.com/",
        "https://example.com.evil.com/",
        "https://notexample.com/",
    ],
)
def test_a_domain_rule_does_not_cover_another_host(tmp_path: Path, url: str) -> None:
    policy = Policy(
        modes=("default",), rules=rules(tmp_path, allow=["WebFetch(domain:example.com)"])
    )
    assert policy.decide("WebFetch", {"url": url}, context(tmp_path, policy))[0] == "ask", url


@pytest.mark.parametrize(
    "url",
    [
        "https://EVIL.com/",
        "https://evil.com./",
        "https://a.evil.com:8/",
        "https://evil\u3002com/",  # an ideographic full stop: httpx fetches evil.com
        "https://a\uff0eevil.com/",
    ],
)
def test_a_domain_deny_rule_holds_for_case_dots_and_ports(tmp_path: Path, url: str) -> None:
    policy = Policy(
        modes=("bypassPermissions",), rules=rules(tmp_path, deny=["WebFetch(domain:evil.com)"])
    )
    assert policy.decide("WebFetch", {"url": url}, context(tmp_path, policy))[0] == "deny", url


def test_a_domain_rule_matches_the_host_in_either_spelling_of_a_name(tmp_path: Path) -> None:
    denied = ["WebFetch(domain:bücher.de)", "WebFetch(domain:xn--mnchen-3ya.de)"]
    policy = Policy(modes=("bypassPermissions",), rules=rules(tmp_path, deny=denied))
    ctx = context(tmp_path, policy)
    for url in ("https://xn--bcher-kva.de/", "https://BÜCHER.de/", "https://münchen.de/x"):
        assert policy.decide("WebFetch", {"url": url}, ctx)[0] == "deny", url


# --- modes -----------------------------------------------------------------------------------


def test_a_sub_agent_in_bypass_under_a_default_parent_still_asks(tmp_path: Path) -> None:
    top = Policy(modes=("default",))
    child = top.narrowed("bypassPermissions").narrowed("bypassPermissions")
    ctx = context(tmp_path, child)
    assert child.decide("Write", {"file_path": "a.txt"}, ctx)[0] == "ask"
    assert child.decide("WebFetch", {"url": "https://x.org"}, ctx)[0] == "ask"
    plan = Policy(modes=("plan",)).narrowed("acceptEdits")
    assert plan.decide("Write", {"file_path": "a.txt"}, context(tmp_path, plan))[0] == "deny"


async def test_a_tool_whose_arguments_are_not_an_object_runs_nothing(tmp_path: Path) -> None:
    """The gate lets a call with arguments it cannot read reach the tool, which refuses it."""
    model = ScriptedModel([call_tool("Write", '["x.txt", "data"]'), "done"])  # type: ignore[arg-type]
    policy = Policy(modes=("default",))
    cfg = RunConfig(model, [SystemMessage("s"), UserMessage("go")], ToolRegistry([write_tool]),
                    context(tmp_path, policy))  # fmt: skip
    await run(cfg)
    [result] = results(model)
    assert result.is_error
    assert not (tmp_path / "x.txt").exists()


# --- the terminal prompt ---------------------------------------------------------------------


async def test_the_terminal_prompt_shows_no_escape_sequence_from_the_request(
    tmp_path: Path,
) -> None:
    """A command the model wrote ends up in the rule shown ("always" would allow); an escape
    sequence in it could rewrite what the person reads before answering."""
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"n\n")
    out = io.StringIO()
    approver = TerminalApprover(Console(file=out, width=400), stdin=os.fdopen(read_fd))
    request = ApprovalRequest(
        "approval-x", "main", "main\x1b[2K", 0, "Bash",
        '{"command": "ls"}', "Bash needs approval\x07", "Bash(\x1b[2K\rls\x1b]52;c;cm0=\x07:*)",
    )  # fmt: skip
    try:
        answer = await approver(request)
    finally:
        os.close(write_fd)
    assert not answer.allow
    shown = out.getvalue()
    assert "\x1b" not in shown and "\r" not in shown and "\x07" not in shown, repr(shown)


# --- more path tricks ------------------------------------------------------------------------


def test_a_read_deny_rule_holds_through_a_symlink_in_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "key").write_text("k")
    os.symlink("secrets", tmp_path / "s")
    policy = Policy(modes=("default",), rules=rules(tmp_path, deny=["Read(./secrets/**)"]))
    ctx = context(tmp_path, policy)
    assert policy.decide("Read", {"file_path": "secrets/key"}, ctx)[0] == "deny"
    assert policy.decide("Read", {"file_path": "s/key"}, ctx)[0] == "deny"
    assert policy.decide("Read", {"file_path": "./x/../secrets/key"}, ctx)[0] == "deny"
    assert policy.decide("Read", {"file_path": str(tmp_path / "secrets/key")}, ctx)[0] == "deny"


def test_an_edit_allow_rule_does_not_cover_a_symlink_out_of_its_folder(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "keep").mkdir()
    os.symlink("../keep", tmp_path / "src" / "out")
    policy = Policy(modes=("default",), rules=rules(tmp_path, allow=["Edit(./src/**)"]))
    ctx = context(tmp_path, policy)
    assert policy.decide("Write", {"file_path": "src/a.py"}, ctx)[0] == "allow"
    assert policy.decide("Write", {"file_path": "src/out/a.py"}, ctx)[0] == "ask"


# --- dontAsk never asks ----------------------------------------------------------------------


def test_dont_ask_refuses_what_would_otherwise_ask_a_person(tmp_path: Path) -> None:
    """An allowed edit of ``.claude`` asks in every other mode; dontAsk has nobody to ask."""
    policy = Policy(modes=("dontAsk",), rules=rules(tmp_path, allow=["Edit"]))
    ctx = context(tmp_path, policy)
    assert policy.decide("Write", {"file_path": "a.txt"}, ctx)[0] == "allow"
    assert policy.decide("Write", {"file_path": ".claude/settings.json"}, ctx)[0] == "deny"
    child = Policy(modes=("default",), rules=rules(tmp_path, allow=["Edit"])).narrowed("dontAsk")
    assert child.decide("Write", {"file_path": ".mcp.json"}, context(tmp_path, child))[0] == "deny"


# --- "always" --------------------------------------------------------------------------------


async def test_always_for_a_command_with_a_star_allows_that_command_only(
    tmp_path: Path,
) -> None:
    """``echo a:*b`` is stored as that command: its ``*`` is a character, not a wildcard."""
    asked: list[str] = []

    def always(request: ApprovalRequest) -> Approval:
        asked.append(request.rule)
        return Approval(True, always=True)

    @tool("Bash")
    def fake_bash(command: str) -> str:
        """Run a command (records it)."""
        return f"ran {command}"

    policy = Policy(modes=("default",), approver=always)
    model = ScriptedModel(
        [
            call_tool("Bash", {"command": "echo a:*b"}),
            call_tool("Bash", {"command": "echo a:*b"}),
            call_tool("Bash", {"command": "echo a:XYZb"}),
            "done",
        ]
    )
    cfg = RunConfig(model, [SystemMessage("s"), UserMessage("go")], ToolRegistry([fake_bash]),
                    context(tmp_path, policy))  # fmt: skip
    out = await run(cfg)
    assert out.content == "done"
    assert [r.content for r in results(model)] == ["ran echo a:*b"] * 2 + ["ran echo a:XYZb"]
    assert asked == ["Bash(echo a:*b)", "Bash(echo a:XYZb)"]  # the third call was asked again


@pytest.mark.parametrize(
    ("name", "approved", "other"),
    [
        ("Write", {"file_path": "src/a.py"}, {"file_path": "src/b.py"}),
        ("Write", {"file_path": "src/a.py"}, {"file_path": "src/a.py/x"}),
        ("Edit", {"file_path": "a.py"}, {"file_path": "b.py"}),
        ("Write", {"file_path": "a*.py"}, {"file_path": "ab.py"}),
        ("Bash", {"command": "rm -rf build"}, {"command": "rm -rf ~"}),
        ("Bash", {"command": "git push origin dev"}, {"command": "git push origin main -f"}),
        ("Bash", {"command": "ls *.py"}, {"command": "ls a.py ~/.ssh/id_rsa"}),
        ("WebFetch", {"url": "https://a.example.com/x"}, {"url": "https://b.a.example.com/"}),
        ("WebFetch", {"url": "https://a.example.com/x"}, {"url": "https://example.com/"}),
        ("WebFetch", {"url": "http://com./"}, {"url": "https://evil.com/"}),
    ],
)
async def test_always_allows_nothing_broader_than_the_call(
    tmp_path: Path, name: str, approved: dict[str, object], other: dict[str, object]
) -> None:
    """A person answers "always" to one call: the same call is allowed from then on, a
    neighbouring one (another file in the folder, another command with the same first
    words, a subdomain) still asks."""
    policy = Policy(modes=("default",), approver=lambda r: Approval(True, always=True))
    ctx = context(tmp_path, policy)
    assert policy.decide(name, approved, ctx)[0] == "ask"
    await policy.execute(ToolRegistry([]), ToolCall("c1", name, json.dumps(approved)), ctx)
    assert policy.decide(name, approved, ctx)[0] == "allow"
    assert policy.decide(name, other, ctx)[0] == "ask", other


# --- Read rules and the search tools ---------------------------------------------------------


def secret_tree(ws: Path) -> None:
    """``secrets/key`` and ``.env`` hold the marker, ``src/ok.txt`` does too; a link to the
    denied file and one to the denied folder sit in the tree."""
    (ws / "secrets").mkdir()
    (ws / "secrets" / "key").write_text("TOPSECRET-123\n")
    (ws / "src").mkdir()
    (ws / "src" / "ok.txt").write_text("TOPSECRET-ok\n")
    (ws / ".env").write_text("TOPSECRET-env\n")
    os.symlink("secrets/key", ws / "src" / "key-link.txt")
    os.symlink("../secrets", ws / "src" / "alias")


async def one_call(ws: Path, policy: Policy, name: str, args: dict[str, object]) -> str:
    """The result of one ``name`` call made by a scripted model through ``policy``."""
    model = ScriptedModel([call_tool(name, args), "ok"])
    cfg = RunConfig(model, [SystemMessage("s"), UserMessage("go")],
                    ToolRegistry([grep_tool, glob_tool, ls_tool]), context(ws, policy))  # fmt: skip
    await run(cfg)
    [result] = results(model)
    return result.content


DENIED = ["Read(./secrets/**)", "Read(.env)"]


@pytest.mark.parametrize("path", [".", "src", None, "./src/.."])
async def test_a_read_deny_rule_keeps_a_search_from_the_root_out_of_the_denied_folder(
    tmp_path: Path, path: str | None
) -> None:
    """The search runs, without the denied files (and nothing through the links into them)."""
    secret_tree(tmp_path)
    policy = Policy(modes=("default",), rules=rules(tmp_path, deny=DENIED))
    args: dict[str, object] = {"pattern": "TOPSECRET", "output_mode": "content"}
    if path is not None:
        args["path"] = path
    shown = await one_call(tmp_path, policy, "Grep", args)
    assert "TOPSECRET-ok" in shown
    assert "TOPSECRET-123" not in shown and "TOPSECRET-env" not in shown, shown
    assert ("were left out" in shown) == (path != "src")


@pytest.mark.parametrize(
    "args",
    [
        {"pattern": "**/*"},
        {"pattern": "**/key*"},
        {"pattern": "*/*", "path": "."},
        {"pattern": ".env"},
        {"pattern": "**/*", "path": "src"},
    ],
)
async def test_a_read_deny_rule_keeps_the_denied_files_out_of_glob(
    tmp_path: Path, args: dict[str, object]
) -> None:
    secret_tree(tmp_path)
    policy = Policy(modes=("bypassPermissions",), rules=rules(tmp_path, deny=DENIED))
    shown = await one_call(tmp_path, policy, "Glob", args)
    assert "secrets/key" not in shown and ".env" not in shown.replace("were left", "")
    assert "key-link" not in shown and "alias" not in shown  # (links are never listed)


@pytest.mark.parametrize(("path", "gone"), [(".", 2), (None, 2), ("src", 0), ("./src/..", 2)])
async def test_a_read_deny_rule_keeps_the_denied_entries_out_of_ls(
    tmp_path: Path, path: str | None, gone: int
) -> None:
    """``LS`` names neither the denied file nor the denied folder (nor their sizes); it says
    how many entries it left out. The links are listed as links (LS never follows them)."""
    secret_tree(tmp_path)
    policy = Policy(modes=("default",), rules=rules(tmp_path, deny=DENIED))
    shown = await one_call(tmp_path, policy, "LS", {} if path is None else {"path": path})
    assert "secrets" not in shown and ".env" not in shown, shown
    if gone:
        assert "src/" in shown and f"({gone} entries that permission rules keep from LS" in shown
    else:
        assert "key-link.txt@" in shown and "alias@" in shown and "left out" not in shown


async def test_an_absolute_glob_pattern_into_the_denied_folder_lists_nothing(
    tmp_path: Path,
) -> None:
    """The gate sees ``path`` (none: the root); the pattern's own folder is filtered too."""
    secret_tree(tmp_path)
    policy = Policy(modes=("default",), rules=rules(tmp_path, deny=DENIED))
    shown = await one_call(tmp_path, policy, "Glob", {"pattern": f"{tmp_path}/secrets/*"})
    assert shown.startswith("No files found") and "1 file that permission rules" in shown


async def test_a_search_through_a_linked_workspace_still_leaves_the_denied_files_out(
    tmp_path: Path,
) -> None:
    """The workspace given as a link (``/tmp`` on macOS): the rules are spelt from it, the
    search walks its real path."""
    real = tmp_path / "real"
    real.mkdir()
    secret_tree(real)
    os.symlink(real, tmp_path / "ws")
    ws = tmp_path / "ws"
    policy = Policy(modes=("default",), rules=rules(ws, deny=["Read(./secrets/**)"]))
    shown = await one_call(ws, policy, "Grep", {"pattern": "TOPSECRET", "output_mode": "content"})
    assert "TOPSECRET-ok" in shown and "TOPSECRET-123" not in shown


async def test_an_ask_rule_keeps_its_files_out_of_a_search_nobody_was_asked_about(
    tmp_path: Path,
) -> None:
    """A search from the root was not asked about ``secrets``: it leaves them out. A search
    of ``secrets`` itself is asked about, and once approved it reads them."""
    secret_tree(tmp_path)
    asked: list[str] = []

    def yes(request: ApprovalRequest) -> bool:
        asked.append(request.arguments)
        return True

    policy = Policy(modes=("default",), rules=rules(tmp_path, ask=["Read(./secrets/**)"]),
                    approver=yes)  # fmt: skip
    grep: dict[str, object] = {"pattern": "TOPSECRET", "output_mode": "content"}
    assert "TOPSECRET-123" not in await one_call(tmp_path, policy, "Grep", grep)
    assert asked == []
    assert "TOPSECRET-123" in await one_call(tmp_path, policy, "Grep", {**grep, "path": "secrets"})
    assert len(asked) == 1


# --- a sub-agent's chain, and a withdrawn request --------------------------------------------


async def test_roles_in_bypass_three_levels_down_under_a_default_top_still_ask(
    tmp_path: Path,
) -> None:
    """Each role of the chain says ``bypassPermissions`` (a workspace role file may): the
    top's ``default`` still decides, and with nobody to ask the deepest Write is refused."""
    manager, models = three_deep(tmp_path, write=write_tool, mode="bypassPermissions")
    policy = Policy(modes=("default",))
    main = ScriptedModel([call_tool("SubAgent", {"task": "start", "role": "a"}), "all done"])
    ctx = ToolContext("main", tmp_path, tmp_path, call_chain=("main",), manager=manager,
                      gate=policy)  # fmt: skip
    cfg = RunConfig(main, [SystemMessage("s"), UserMessage("go")],
                    ToolRegistry([write_tool, *subagent_tools()]), ctx)  # fmt: skip
    async with manager.owner("main"):
        out = await run(cfg)
    assert out.content == "all done"
    [refusal] = results(models["c"])
    assert refusal.is_error and "permission denied" in refusal.content
    assert not (tmp_path / "deep.txt").exists()


async def test_an_answer_to_a_withdrawn_request_is_refused_and_reaches_no_other_call() -> None:
    broker = ApprovalBroker()

    def request(n: int, tool: str) -> ApprovalRequest:
        return ApprovalRequest(f"approval-t{n}", "main", "main", 0, tool, "{}", "why", tool, "c1")

    first = asyncio.ensure_future(broker(request(1, "Bash")))
    await asyncio.sleep(0)
    first.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await first
    second = asyncio.ensure_future(broker(request(2, "Write")))  # the same call id
    await asyncio.sleep(0)
    assert broker.answer("approval-t1", Approval(True)) is False
    assert [r.id for r in broker.pending()] == ["approval-t2"] and not second.done()
    assert broker.answer("approval-t2", Approval(False))
    assert (await second).allow is False


async def test_an_answer_kept_for_a_call_id_fits_only_the_same_call(tmp_path: Path) -> None:
    """A stored answer (the HTTP service keeps one over a restart) is found by the model's
    call id, which models reuse (``call_0``): it may answer only a request for the same tool,
    the same full arguments, the same agent depth and role, and the same "always" rule."""
    asked: list[ApprovalRequest] = []

    def record(request: ApprovalRequest) -> bool:
        asked.append(request)
        return False

    async def request_for(name: str, args: dict[str, object], depth: int = 0) -> ApprovalRequest:
        policy = Policy(modes=("default",), approver=record)
        ctx = ToolContext("main", tmp_path, tmp_path, depth=depth, gate=policy)
        await policy.execute(ToolRegistry([]), ToolCall("call_0", name, json.dumps(args)), ctx)
        return asked[-1]

    long = "x" * 3000
    answered = await request_for("Bash", {"command": f"echo {long}"})
    assert answer_fits(answered, await request_for("Bash", {"command": f"echo {long}"}))
    padded = await request_for("Bash", {"command": f"echo {long[:-10]}; rm -rf ~"})
    assert padded.arguments == answered.arguments  # the same preview: only the digest differs
    for other in (
        padded,
        await request_for("Bash", {"command": "rm -rf ~"}),
        await request_for("Write", {"command": f"echo {long}"}),
        await request_for("Bash", {"command": f"echo {long}"}, depth=1),
    ):
        assert not answer_fits(answered, other), other
    older = replace(answered, digest="")  # stored before requests carried a digest
    assert not answer_fits(older, answered) and not answer_fits(older, older)


# --- what the person asked is shown ----------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        '{"command"' + " " * 3000 + ': "rm -rf ~"}',  # JSON whitespace before the command
        '{"command": "echo hi' + " " * 3000 + '; rm -rf ~"}',  # the command itself padded
    ],
)
async def test_a_request_never_hides_the_end_of_a_long_call(tmp_path: Path, raw: str) -> None:
    asked: list[ApprovalRequest] = []

    def no(request: ApprovalRequest) -> bool:
        asked.append(request)
        return False

    @tool("Bash")
    def fake_bash(command: str) -> str:
        """Run a command."""
        return "ran"

    model = ScriptedModel([call_tool("Bash", raw), "done"])
    cfg = RunConfig(model, [SystemMessage("s"), UserMessage("go")], ToolRegistry([fake_bash]),
                    context(tmp_path, Policy(modes=("default",), approver=no)))  # fmt: skip
    await run(cfg)
    [request] = asked
    shown = request.arguments
    assert "rm -rf ~" in shown or "not shown" in shown, shown[-200:]


async def test_bypass_with_no_rules_or_hooks_still_asks_before_an_edit_of_claude(
    tmp_path: Path,
) -> None:
    """The README: edits to what the workspace runs ask in every mode, bypassPermissions
    included; the fast path for a policy with nothing to check must not skip that."""
    model = ScriptedModel(
        [
            call_tool("Write", {"file_path": ".claude/settings.json", "content": "{}"}),
            call_tool("Write", {"file_path": "notes.txt", "content": "x"}),
            "done",
        ]
    )
    policy = Policy(modes=("bypassPermissions",))
    cfg = RunConfig(model, [SystemMessage("s"), UserMessage("go")], ToolRegistry([write_tool]),
                    context(tmp_path, policy))  # fmt: skip
    await run(cfg)
    assert "permission denied" in results(model, 1)[0].content
    assert not (tmp_path / ".claude" / "settings.json").exists()
    assert (tmp_path / "notes.txt").read_text() == "x"


async def test_a_runtime_in_bypass_mode_still_asks_before_an_edit_of_mcp_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``retinue run --permission-mode bypassPermissions`` (or the library without an
    approver) keeps the gate for the workspace's own files, as the README promises."""
    from retinue.config import Settings
    from retinue.runtime import Runtime

    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    model = ScriptedModel(
        [
            call_tool("Write", {"file_path": ".mcp.json", "content": '{"mcpServers": {}}'}),
            call_tool("Write", {"file_path": "notes.txt", "content": "x"}),
            "done",
        ]
    )
    runtime = Runtime.create(Settings.load(home=tmp_path / "data", workspace=ws), model=model,
                             with_memory=False, permission_mode="bypassPermissions")  # fmt: skip
    out = await runtime.conversation().send("go")
    assert out.content == "done"
    assert "permission denied" in results(model, 1)[0].content
    assert not (ws / ".mcp.json").exists() and (ws / "notes.txt").read_text() == "x"


async def test_a_path_with_a_nul_is_an_error_result_not_a_crash(tmp_path: Path) -> None:
    policy = Policy(modes=("acceptEdits",), rules=rules(tmp_path, deny=["Edit(./secrets/**)"]))
    model = ScriptedModel(
        [call_tool("Write", {"file_path": ".claude/x\x00.json", "content": "x"}), "done"]
    )
    cfg = RunConfig(model, [SystemMessage("s"), UserMessage("go")], ToolRegistry([write_tool]),
                    context(tmp_path, policy))  # fmt: skip
    out = await run(cfg)
    assert out.content == "done"
    assert results(model)[0].is_error
    assert not (tmp_path / ".claude").exists()
