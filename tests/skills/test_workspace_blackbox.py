"""Black box (issue 27, "Done when"): a workspace with Claude Code agent files, skills,
``CLAUDE.md`` and ``AGENTS.md``, loaded by ``Runtime`` as ``retinue chat`` loads it, driven by
the scripted model. What the model is sent shows that a role without ``tools`` delegates two
levels down, that ``Skill(name)`` returns a skill's body, that a preloaded skill is in a
sub-agent's first request, and that ``CLAUDE.md`` is in the main agent's first request."""

from __future__ import annotations

from pathlib import Path

import pytest

from retinue.config import Settings
from retinue.llm.testing import ModelCall
from retinue.messages import SystemMessage, ToolResultMessage
from retinue.runtime import Runtime
from retinue.testing import ScriptedModel, call_tool


def agent(ws: Path, name: str, *front: str) -> None:
    path = ws / ".claude" / "agents" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(["---", f"name: {name}", f"description: the {name}", *front,
                               "---", f"You are {name.upper()}."]))  # fmt: skip


def skill(ws: Path, name: str, body: str) -> None:
    folder = ws / ".claude" / "skills" / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {name} steps\n---\n{body}")


def system(call: ModelCall) -> str:
    return next(m.content for m in call.messages if isinstance(m, SystemMessage))


async def test_a_claude_code_workspace_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "me"))  # no user files of the machine's
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "CLAUDE.md").write_text("Always run the linter. @docs/conventions.md")
    (ws / "docs").mkdir()
    (ws / "docs" / "conventions.md").write_text("CONVENTION: tabs")
    (ws / "AGENTS.md").write_text("AGENTS: keep commits small")
    agent(ws, "lead", "skills: [release-notes]")  # no tools: every tool, delegation too
    agent(ws, "middle")
    agent(ws, "leaf", "tools: Read")
    skill(ws, "pdf-forms", "PDF BODY: fill the form with scripts/fill.py")
    skill(ws, "release-notes", "RELEASE BODY: group changes by kind")
    model = ScriptedModel(
        [
            call_tool("Skill", {"name": "pdf-forms"}),  # main
            call_tool("SubAgent", {"task": "ship it", "role": "lead"}),  # main
            call_tool("SubAgent", {"task": "prepare", "role": "middle"}),  # lead, depth 1
            call_tool("SubAgent", {"task": "read", "role": "leaf"}),  # middle, depth 2
            "leaf read it",
            "middle prepared",
            "lead shipped",
            "all done",
        ]
    )
    settings = Settings.load(home=tmp_path / "retinue-home", workspace=ws)
    runtime = Runtime.create(settings, model=model, with_memory=False)
    assert runtime.problems == []
    conversation = runtime.conversation()
    out = await conversation.send("ship the release")
    await conversation.close()
    assert out.content == "all done"
    model.assert_done()
    main, _, lead, middle, leaf = model.calls[0], *model.calls[1:5]
    # CLAUDE.md (with its import) and AGENTS.md in the main agent's first request
    first = system(main)
    assert "Always run the linter." in first and "CONVENTION: tabs" in first
    assert "AGENTS: keep commits small" in first
    assert "- pdf-forms: pdf-forms steps" in first and "PDF BODY" not in first
    # Skill(name) returned the body
    results = [m for m in model.calls[1].messages if isinstance(m, ToolResultMessage)]
    assert "PDF BODY: fill the form" in results[-1].content
    # the preloaded skill in the sub-agent's first request, and the project instructions
    assert "You are LEAD." in system(lead) and "RELEASE BODY" in system(lead)
    assert "Always run the linter." in system(lead)
    # a role without tools delegates, and so does the role it started: two levels down
    assert "SubAgent" in lead.tool_names and "SubAgent" in middle.tool_names
    assert "You are MIDDLE." in system(middle) and "You are LEAF." in system(leaf)
    assert leaf.tool_names == ["Read"]  # tools: Read gives Read only (no delegation)
    assert leaf.messages[-1].content == "read"
