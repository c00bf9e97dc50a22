"""Shared memory through the CLI: real ``retinue run`` processes against a loopback model.

Two roles declare one shared block: ``writer`` may write it, ``reader`` only reads it. Three
processes run at once, each delegating to five writer sessions in parallel; every note is
kept, the reader sees them in its system prompt, its write is refused saying why, and
``retinue memory shared`` / ``retinue memory show`` show the block and who uses it.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from cli.test_roles_view import retinue_roles
from cli.test_run import retinue
from retinue.cli.memory import memory_app
from retinue.llm.base import ToolSpec
from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.messages import AssistantMessage, Message
from retinue.testing import ScriptedModel, call_tool, call_tools

pytestmark = pytest.mark.timeout(120)

WRITER = """---
name: writer
description: Keeps the team's notes.
tools: Read
memory:
  shared: [team-notes]
---
You keep the team's notes.
"""

READER = """---
name: reader
description: Reads the team's notes.
tools: Read
memory:
  scope: project
  shared:
    - {name: team-notes, write: false}
---
You read the team's notes.
"""

WRITERS = 5  # writer sessions each main agent starts at once


def team(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> AssistantMessage:
    """Every model of the run: consolidations, the writers, the reader and the main agent."""
    system = messages[0].content if messages[0].role == "system" else ""
    last = messages[-1]
    if any(t.name == "memorize" for t in tools):
        return call_tool("memorize", {})
    if system.startswith("You keep the team's notes"):
        if last.role == "user":
            note = last.content.removeprefix("add ")
            return call_tool("core_memory_append", {"block": "team-notes", "content": note})
        return AssistantMessage("written")
    if system.startswith("You read the team's notes"):
        if last.role == "user":
            edit = {"block": "team-notes", "content": "the reader's own note"}
            return call_tool("core_memory_append", edit)
        return AssistantMessage("read")
    asked = [c for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    if not asked:
        tag = re.search(r"tag (\w+)", last.content)
        assert tag, last.content
        tasks = [{"task": f"add {tag[1]} note {i}", "role": "writer"} for i in range(WRITERS)]
        return call_tools(*(("SubAgent", t) for t in tasks))
    if not any('"reader"' in c.arguments for c in asked):
        return call_tool("SubAgent", {"task": "what do the notes say?", "role": "reader"})
    return AssistantMessage("done")


def write_roles(tmp_path: Path) -> None:
    agents = tmp_path / ".retinue" / "agents"
    agents.mkdir(parents=True)
    (agents / "writer.md").write_text(WRITER)
    (agents / "reader.md").write_text(READER)


async def run_at_once(tmp_path: Path, server: LoopbackOpenAIServer, tags: Sequence[str]) -> None:
    def one(tag: str) -> subprocess.CompletedProcess[str]:
        return retinue(["run", "-m", "openai:test", f"tag {tag}"], server, tmp_path)

    for proc in await asyncio.gather(*(asyncio.to_thread(one, t) for t in tags)):
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "done\n"


def test_roles_share_a_block_across_processes_and_a_read_only_role_is_refused(
    tmp_path: Path,
) -> None:
    write_roles(tmp_path)
    model = ScriptedModel(responder=team)
    tags = ["p0", "p1", "p2"]
    with LoopbackOpenAIServer(model) as server:
        asyncio.run(run_at_once(tmp_path, server, tags))
    notes = {f"{t} note {i}" for t in tags for i in range(WRITERS)}

    shown = retinue(["memory", "shared", "team-notes"], None, tmp_path)
    assert shown.returncode == 0, shown.stderr
    kept = set(re.findall(r"p\d note \d", shown.stdout))
    assert kept == notes, notes - kept  # 15 concurrent writes from 15 sessions, none lost
    assert "the reader's own note" not in shown.stdout
    assert "written by: writer; read only by: reader" in shown.stdout
    assert f"(shared, {sum(map(len, notes)) + len(notes) - 1}/4000 chars)" in shown.stdout

    readers = [c for c in model.calls if c.messages[0].content.startswith("You read")]
    assert len(readers) == 6  # three reader sessions, two model calls each
    for first in readers[::2]:
        prompt = first.messages[0].content
        assert '<team-notes shared="read-only" chars=' in prompt
        assert re.search(r"p\d note \d", prompt)  # what the writers wrote before it started
    refusals = [c.messages[-1].content for c in readers if c.messages[-1].role == "tool"]
    assert len(refusals) == 3
    assert all("block 'team-notes' is shared with role 'reader' read-only" in r for r in refusals)

    role = retinue(["memory", "show", "reader"], None, tmp_path)
    assert role.returncode == 0, role.stderr
    assert "team-notes (shared, read-only," in role.stdout and "p0 note 0" in role.stdout
    listed = retinue(["memory", "shared"], None, tmp_path)
    assert "team-notes (shared," in listed.stdout
    other = retinue(["memory", "shared", "--tenant", "elsewhere"], None, tmp_path)
    assert other.returncode == 0 and "p0 note" not in other.stdout  # tenants see their own


def test_edit_shared_sets_a_block_and_refuses_a_core_block_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_roles(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RETINUE_HOME", str(tmp_path / "home"))

    def cli(*args: str) -> Result:
        return CliRunner().invoke(memory_app, list(args))

    saved = cli("edit-shared", "team-notes", "--value", "Freeze on Fridays.")
    assert saved.exit_code == 0, saved.output
    assert "saved shared 'team-notes' (18/4000 chars)" in saved.output
    shown = cli("show", "writer")
    assert "team-notes (shared, writable, 18/4000 chars)" in shown.output
    assert "Freeze on Fridays." in shown.output
    bad = cli("edit-shared", "persona", "--value", "x")
    assert bad.exit_code == 1 and "'persona' cannot name a shared block" in bad.output
    missing = cli("shared", "nope")
    assert missing.exit_code == 1 and "no shared block 'nope'" in missing.output
    roles = retinue_roles(tmp_path).stdout  # `retinue roles` says what each declares
    assert "reader (memory: project, shared: team-notes read-only)" in roles
    assert "writer (memory, shared: team-notes)" in roles
