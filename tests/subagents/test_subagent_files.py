"""SubAgent(files=[...]): a parent hands a sub-agent images and PDFs by reference.

The parent runs as a real :class:`Session` (so its history is what ``files`` names by an
attached part's name); every sub-agent runs on a scripted model that records what it was
sent, so each test reads the image or PDF in the sub-agent's own first message."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from subagent_kit import echo

from retinue import Agent
from retinue.engine import RunConfig
from retinue.engine.session import Lifecycle, Session
from retinue.errors import SubAgentError, ToolError
from retinue.llm.base import ToolSpec
from retinue.messages import (
    DocumentPart,
    ImagePart,
    MediaPart,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from retinue.policy.gate import Policy
from retinue.policy.rules import RuleSet
from retinue.subagents import Role, RoleCatalog, SubAgentManager, subagent_tools
from retinue.subagents.files import MAX_HANDED_FILES, MAX_HANDED_TEXT, handed_files
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry
from retinue.tools.builtin.fs import read_tool

pytestmark = pytest.mark.timeout(60)  # a hang bound, not a timing

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 40
PDF = b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"


class Setup:
    """Roles ``viewer`` (a model that reads images) and ``reader`` (a text-only model), and
    a main agent running as a session in the workspace ``tmp_path``."""

    def __init__(self, tmp_path: Path) -> None:
        self.workspace = tmp_path / "ws"
        self.workspace.mkdir()
        self.viewer = ScriptedModel(name="scripted:viewer")
        self.reader = ScriptedModel(name="scripted:text-reader")  # reads no images
        models = {"scripted:viewer": self.viewer, "scripted:text-reader": self.reader}
        roles = RoleCatalog.of(
            Role("viewer", "looks at things", "You are viewer.", None, "scripted:viewer"),
            Role("reader", "reads text", "You are reader.", None, "scripted:text-reader"),
        )
        self.model = ScriptedModel(name="scripted:main")
        self.manager = SubAgentManager(
            roles,
            ToolRegistry([echo]),
            default_model=self.model,
            model_for=models.__getitem__,
        )
        self.ctx = ToolContext(
            "main", self.workspace, tmp_path / "data", call_chain=("main",), manager=self.manager
        )
        tools = ToolRegistry([echo, read_tool, *subagent_tools()])  # (Read: it hands files over)
        self.main = Session("main", RunConfig(self.model, [], tools, self.ctx), Lifecycle())

    async def send(self, text: str, parts: tuple[MediaPart, ...] = ()) -> str:
        async with self.manager.owner("main"):
            return (await self.main.send(text, parts=parts)).content

    def delegate(self, **args: object) -> None:
        """The main model's next step: one SubAgent call, then it answers 'done'."""
        self.model.add(call_tool("SubAgent", {"role": "viewer", **args}, id="c1"), "done")

    def result(self) -> ToolResultMessage:
        found = [m for m in self.main.messages if isinstance(m, ToolResultMessage)]
        return found[-1]


def first_user(model: ScriptedModel, call: int = 0) -> UserMessage:
    users = [m for m in model.calls[call].messages if isinstance(m, UserMessage)]
    return users[-1]


async def test_a_workspace_image_reaches_a_one_shot_sub_agent(tmp_path: Path) -> None:
    s = Setup(tmp_path)
    (s.workspace / "shots").mkdir()
    (s.workspace / "shots" / "login.png").write_bytes(PNG)
    (s.workspace / "spec.pdf").write_bytes(PDF)
    s.viewer.add("the button is cut off")
    s.delegate(task="What is wrong here?", files=["shots/login.png", "spec.pdf"])
    assert await s.send("check the login screen") == "done"
    seen = first_user(s.viewer)
    assert seen.content.endswith("What is wrong here?")
    assert [type(p) for p in seen.parts] == [ImagePart, DocumentPart]
    assert seen.parts[0].data == PNG and seen.parts[0].name == "login.png"
    assert seen.parts[1].data == PDF and seen.parts[1].name == "spec.pdf"
    assert "the button is cut off" in s.result().content and not s.result().is_error


async def test_an_attached_image_is_handed_over_by_its_name(tmp_path: Path) -> None:
    s = Setup(tmp_path)
    photo = ImagePart("image/png", PNG + b"photo", name="photo.png")
    s.viewer.add("a cat")
    s.delegate(task="Describe it.", files=["photo.png"])
    assert await s.send("what is in my photo?", (photo,)) == "done"
    seen = first_user(s.viewer)
    assert seen.parts == (photo,)  # the parent's own part, not a file of the workspace
    assert not (s.workspace / "photo.png").exists()


async def test_an_attached_name_wins_over_a_workspace_file_of_that_name(tmp_path: Path) -> None:
    s = Setup(tmp_path)
    (s.workspace / "photo.png").write_bytes(PNG)
    photo = ImagePart("image/png", PNG + b"attached", name="photo.png")
    s.viewer.add("seen")
    s.delegate(task="Describe it.", files=["photo.png"])
    await s.send("look", (photo,))
    assert first_user(s.viewer).parts[0].data == PNG + b"attached"


async def test_an_interactive_session_gets_files_on_its_first_and_next_turns(
    tmp_path: Path,
) -> None:
    s = Setup(tmp_path)
    (s.workspace / "a.png").write_bytes(PNG + b"a")
    photo = ImagePart("image/png", PNG + b"b", name="b.png")
    s.viewer.add("first", "second")
    s.model.add(
        call_tool("SubAgent", {"role": "viewer", "task": "t1", "interactive": True,
                               "files": ["a.png"]}),
        "ok",
        call_tool("SubAgent", {"role": "viewer", "task": "t2", "interactive": True,
                               "files": ["b.png"]}),
        "ok again",
    )  # fmt: skip
    async with s.manager.owner("main"):  # the session lives across both turns of main
        await s.main.send("start")
        await s.main.send("go on", parts=(photo,))
    assert first_user(s.viewer, 0).parts[0].data == PNG + b"a"
    second = s.viewer.calls[1].messages
    users = [m for m in second if isinstance(m, UserMessage)]
    assert [u.content.endswith(t) for u, t in zip(users, ("t1", "t2"), strict=True)] == [True] * 2
    assert users[0].parts[0].data == PNG + b"a" and users[1].parts == (photo,)


async def test_the_manager_carries_parts_from_python(tmp_path: Path) -> None:
    s = Setup(tmp_path)
    part = ImagePart("image/png", PNG, name="x.png")
    s.viewer.add("one-shot", "interactive")
    out = await s.manager.run_subagent(s.ctx, "look", "viewer", (part,))
    assert out.content == "one-shot" and first_user(s.viewer, 0).parts == (part,)
    out = await s.manager.interactive_subagent(s.ctx, "look", "viewer", parts=(part,))
    assert out.content == "interactive" and first_user(s.viewer, 1).parts == (part,)
    s.viewer.add("plain")
    out = await s.manager.run_subagent(s.ctx, "plain task", "viewer")
    assert out.content == "plain" and first_user(s.viewer, 2).parts == ()  # as before
    await s.manager.cleanup("main")


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("missing.png", "file does not exist"),
        ("data.bin", "binary file"),
        ("huge.png", "too large"),
        ("../outside.png", "outside"),
        ("link.png", "outside"),  # a symlink out of the workspace
        ("", "empty"),
    ],
)
async def test_a_bad_entry_is_one_tool_error_and_nothing_starts(
    tmp_path: Path, entry: str, why: str
) -> None:
    s = Setup(tmp_path)
    (s.workspace / "ok.png").write_bytes(PNG)
    (s.workspace / "notes.txt").write_text("hello\n")
    (s.workspace / "data.bin").write_bytes(b"\0\1\2" * 10)
    (s.workspace / "huge.png").write_bytes(PNG + b"\0" * (6 * 2**20))
    (tmp_path / "outside.png").write_bytes(PNG)
    os.symlink(tmp_path / "outside.png", s.workspace / "link.png")
    s.delegate(task="look", files=["ok.png", entry])
    assert await s.send("go") == "done"
    result = s.result()
    assert result.is_error and why in result.content, result.content
    assert "\n" not in result.content.strip()
    assert s.viewer.calls == [] and s.manager.sessions() == []


async def test_a_text_file_is_handed_over_as_read_shows_it_after_the_task(
    tmp_path: Path,
) -> None:
    s = Setup(tmp_path)
    (s.workspace / "settings.py").write_text('SECRET_CODE = "4817"\n')
    (s.workspace / "a.png").write_bytes(PNG)
    s.viewer.add("the code is 4817")
    s.delegate(task="What is SECRET_CODE?", files=["settings.py", "a.png"])
    assert await s.send("go") == "done"
    seen = first_user(s.viewer)
    _, _, handed = seen.content.partition("What is SECRET_CODE?")
    assert "The file settings.py, as Read shows it:" in handed
    assert '1\tSECRET_CODE = "4817"' in handed
    assert [p.name for p in seen.parts] == ["a.png"]
    assert "4817" in s.result().content and not s.result().is_error


async def test_text_files_past_the_bound_are_refused_and_nothing_starts(tmp_path: Path) -> None:
    s = Setup(tmp_path)
    line = "x" * 90 + "\n"
    for name in ("a.txt", "b.txt", "c.txt"):
        (s.workspace / name).write_text(line * 900)  # about 88,000 characters as Read shows it
    s.delegate(task="look", files=["a.txt", "b.txt", "c.txt"])
    await s.send("go")
    result = s.result()
    assert result.is_error and f"at most {MAX_HANDED_TEXT:,}" in result.content, result.content
    assert s.viewer.calls == []


async def test_too_many_files_are_refused(tmp_path: Path) -> None:
    s = Setup(tmp_path)
    s.delegate(task="look", files=["a.png"] * (MAX_HANDED_FILES + 1))
    await s.send("go")
    assert s.result().is_error and s.viewer.calls == []


async def test_a_role_whose_model_reads_no_images_is_refused_in_one_line(tmp_path: Path) -> None:
    s = Setup(tmp_path)
    (s.workspace / "a.png").write_bytes(PNG)
    s.model.add(call_tool("SubAgent", {"role": "reader", "task": "t", "files": ["a.png"]}), "done")
    await s.send("go")
    result = s.result()
    assert result.is_error
    assert "image a.png" in result.content
    assert "scripted:text-reader does not accept images or files" in result.content
    assert s.reader.calls == [] and s.manager.sessions() == []
    with pytest.raises(SubAgentError, match="does not accept images"):
        await s.manager.run_subagent(s.ctx, "t", "reader", (ImagePart("image/png", PNG),))
    assert s.reader.calls == []


async def test_files_cannot_go_with_steering(tmp_path: Path) -> None:
    s = Setup(tmp_path)
    s.delegate(task="look", interactive=True, steer=True, files=["a.png"])
    await s.send("go")
    assert s.result().is_error and "steer" in s.result().content


async def test_a_session_asking_its_parent_takes_a_text_answer_before_files(
    tmp_path: Path,
) -> None:
    s = Setup(tmp_path)
    part = ImagePart("image/png", PNG, name="x.png")
    s.viewer.add(call_tool("AskParent", {"question": "which screen?"}), "thanks", "seen")
    asked = await s.manager.interactive_subagent(s.ctx, "look", "viewer")
    assert asked.asking and asked.content == "which screen?"
    with pytest.raises(SubAgentError, match="waiting for the answer"):
        await s.manager.interactive_subagent(s.ctx, "this one", "viewer", parts=(part,))
    assert (await s.manager.interactive_subagent(s.ctx, "the login", "viewer")).content == "thanks"
    out = await s.manager.interactive_subagent(s.ctx, "and this", "viewer", parts=(part,))
    assert out.content == "seen" and first_user(s.viewer, 2).parts == (part,)
    await s.manager.cleanup("main")


async def test_a_deny_rule_keeps_a_file_from_being_handed_over(tmp_path: Path) -> None:
    s = Setup(tmp_path)
    (s.workspace / "secret.png").write_bytes(PNG)
    (s.workspace / "open.png").write_bytes(PNG)
    rules = RuleSet()
    rules.add("deny", ["Read(./secret.png)"], s.workspace)
    assert not rules.problems
    gated = ToolContext("main", s.workspace, tmp_path / "data", gate=Policy(rules=rules))
    assert [p.name for p in (await handed_files(gated, ["open.png"])).parts] == ["open.png"]
    with pytest.raises(ToolError, match=r"'secret.png'.*permission denied: rule deny"):
        await handed_files(gated, ["open.png", "secret.png"])


async def test_an_ask_rule_is_asked_before_a_file_is_handed_over(tmp_path: Path) -> None:
    """The hand-over is the parent's Read call: what would be asked is asked (and with nobody
    to answer, refused), never read around the approval."""
    s = Setup(tmp_path)
    (s.workspace / "asked.png").write_bytes(PNG)
    rules = RuleSet()
    rules.add("ask", ["Read(./asked.png)"], s.workspace)
    gated = ToolContext("main", s.workspace, tmp_path / "data", gate=Policy(rules=rules))
    with pytest.raises(ToolError, match=r"'asked\.png'"):
        await handed_files(gated, ["asked.png"])


async def test_a_background_session_gets_its_files(tmp_path: Path) -> None:
    s = Setup(tmp_path)
    (s.workspace / "a.png").write_bytes(PNG)
    s.viewer.add("looked")
    s.model.add(
        call_tool("SubAgent", {"role": "viewer", "task": "t", "interactive": True,
                               "background": True, "files": ["a.png"]}),
        call_tool("SubAgentStatus", {"role": "viewer", "wait": True}),
        "done",
    )  # fmt: skip
    await s.send("go")
    assert "looked" in s.result().content
    assert first_user(s.viewer).parts[0].data == PNG


async def test_a_fork_gets_its_files_after_the_parents_conversation(tmp_path: Path) -> None:
    s = Setup(tmp_path)
    (s.workspace / "a.png").write_bytes(PNG)
    s.model.add(
        call_tool("SubAgent", {"role": "viewer", "task": "t", "fork": True, "files": ["a.png"]}),
        "forked reply",  # the fork runs on its parent's model
        "done",
    )
    assert await s.send("go") == "done"
    fork_request = s.model.calls[1].messages
    assert isinstance(fork_request[-1], UserMessage) and fork_request[-1].parts[0].data == PNG
    assert s.viewer.calls == []


def test_an_agent_hands_the_image_it_was_given_to_a_sub_agent(tmp_path: Path) -> None:
    photo = ImagePart("image/png", PNG, name="photo.png")
    steps: list[object] = [
        call_tool("SubAgent", {"role": "viewer", "task": "Describe it.", "files": ["photo.png"]}),
        "a cat on a mat",  # the sub-agent runs on the same model here
        "It is a cat.",
    ]
    memorize = call_tool("memorize", {"block_updates": [], "new_passages": []})

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> object:
        return memorize if any(t.name == "memorize" for t in tools) else steps.pop(0)

    model = ScriptedModel(responder=answer, name="scripted:vision")
    roles = [Role(name="viewer", description="looks at images", prompt="You are viewer.")]
    agent = Agent(model, workspace=tmp_path, home=tmp_path / "home", roles=roles,
                  builtin_tools=False)  # fmt: skip
    with agent:
        out = agent.run_sync(["What is in my photo?", photo])
    assert out.content == "It is a cat."
    sub_request = model.calls[1].messages
    assert "You are viewer." in sub_request[0].content
    assert first_user(model, 1).content.endswith("Describe it.")
    assert first_user(model, 1).parts == (photo,)
    assert steps == []


class OldDelegator:
    """A program's own Delegator written before ``parts``: plain tasks still reach it."""

    def __init__(self) -> None:
        self.tasks: list[str] = []

    async def delegate(
        self,
        ctx: ToolContext,
        *,
        task: str,
        role: str,
        interactive: bool = False,
        instance: str | None = None,
        background: bool = False,
        fork: bool = False,
    ) -> str:
        self.tasks.append(task)
        return f"done: {task}"

    async def unload(self, ctx: ToolContext, role: str, instance: str | None = None) -> str:
        return ""

    async def poll(
        self, ctx: ToolContext, role: str, instance: str | None = None, *, wait: bool = False
    ) -> str:
        return ""

    def find_roles(self, ctx: ToolContext, query: str) -> str:
        return ""


async def test_a_delegator_without_parts_runs_plain_tasks_and_refuses_files(
    tmp_path: Path,
) -> None:
    old = OldDelegator()
    ctx = ToolContext("main", tmp_path, tmp_path, manager=cast("Any", old))  # (no parts)
    tools = ToolRegistry(subagent_tools())
    plain = await tools.execute(ToolCall("c1", "SubAgent", '{"task": "t", "role": "r"}'), ctx)
    assert plain.content == "done: t" and not plain.is_error
    (tmp_path / "a.png").write_bytes(PNG)
    args = '{"task": "u", "role": "r", "files": ["a.png"]}'
    refused = await tools.execute(ToolCall("c2", "SubAgent", args), ctx)
    assert refused.is_error and "not available" in refused.content and old.tasks == ["t"]


async def test_an_agent_without_read_hands_over_only_attached_files(tmp_path: Path) -> None:
    """Its tool list is its reach: no Read, no workspace file (an attached one still goes)."""
    s = Setup(tmp_path)
    s.main.config.tools = ToolRegistry([echo, *subagent_tools()])
    (s.workspace / "private.png").write_bytes(PNG)
    s.delegate(task="Look", files=["private.png"])
    await s.send("Have the viewer look at private.png")
    result = s.result()
    assert result.is_error and "has no Read tool" in result.content
    assert s.viewer.calls == []
    s.delegate(task="Look", files=["shot.png"])
    s.viewer.add("seen")
    await s.send("Look at this", parts=(ImagePart("image/png", PNG, name="shot.png"),))
    assert first_user(s.viewer).parts[0].name == "shot.png"
