"""``retinue sessions --ended / show ID / search TEXT``: transcripts of the sessions a real
``retinue run`` process ran (main and sub-agent) against a loopback model, read back by
another process; ``transcript_retention_days = 0`` keeps none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.test_run import memorize, retinue
from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(90)


def delegating_model() -> ScriptedModel:
    return ScriptedModel([
        call_tool("SubAgent", {"task": "where do swallows winter?", "role": "researcher"}),
        call_tool("Read", {"file_path": "birds.md"}),  # the researcher's call
        "Swallows winter in \x1b[31mAfrica\x1b[0m.",  # its answer (an escape sequence in it)
        memorize("swallows winter in Africa"),  # its consolidation
        "They winter in Africa.",  # the main agent's answer
    ])  # fmt: skip


def test_run_keeps_both_transcripts_and_the_cli_lists_shows_and_searches_them(
    tmp_path: Path,
) -> None:
    (tmp_path / "birds.md").write_text("swallow: a migratory bird\n")
    with LoopbackOpenAIServer(delegating_model()) as server:
        proc = retinue(["run", "-m", "openai:test", "where do swallows winter?"], server, tmp_path)
    assert proc.returncode == 0, proc.stderr

    listed = retinue(["sessions", "--ended", "--json"], None, tmp_path)
    assert listed.returncode == 0, listed.stderr
    kept = {s["session_id"]: s for s in json.loads(listed.stdout)}
    assert set(kept) == {"main", "main/researcher#1"}
    child = kept["main/researcher#1"]
    assert (child["role"], child["parent_id"], child["kind"]) == ("researcher", "main", "one-shot")
    assert (child["turns"], child["tool_calls"], child["outcome"]) == (1, 1, "done")
    assert child["requests"] == 2 and child["input_tokens"] > 0
    assert kept["main"]["kind"] == "main" and kept["main"]["tool_calls"] == 1

    table = retinue(["sessions", "--ended"], None, tmp_path)
    assert child["id"] in table.stdout and "researcher" in table.stdout

    shown = retinue(["sessions", "show", kept["main"]["id"]], None, tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "-> SubAgent" in shown.stdout and "They winter in Africa." in shown.stdout
    assert child["id"] in shown.stdout  # the sessions it started

    one = retinue(["sessions", "show", child["id"]], None, tmp_path)
    assert "-> Read" in one.stdout and "a migratory bird" in one.stdout
    assert "\x1b" not in one.stdout  # the model's escape sequence reached the terminal inert

    found = retinue(["sessions", "search", "migratory swallow", "--json"], None, tmp_path)
    assert [h["id"] for h in json.loads(found.stdout)] == [child["id"]]
    none = retinue(["sessions", "search", "penguins"], None, tmp_path)
    assert "no transcript" in none.stdout

    missing = retinue(["sessions", "show", "t-000000000000"], None, tmp_path)
    assert missing.returncode == 1 and "no transcript" in missing.stderr


def test_retention_zero_keeps_no_transcript(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text("transcript_retention_days = 0\n")
    with LoopbackOpenAIServer(delegating_model()) as server:
        proc = retinue(["run", "-m", "openai:test", "where do swallows winter?"], server, tmp_path)
    assert proc.returncode == 0, proc.stderr
    listed = retinue(["sessions", "--ended", "--json"], None, tmp_path)
    assert json.loads(listed.stdout) == []


def test_the_main_agent_reads_its_finished_sub_agents_transcript_with_a_tool(
    tmp_path: Path,
) -> None:
    (tmp_path / "birds.md").write_text("swallow: a migratory bird\n")
    model = ScriptedModel([
        call_tool("SubAgent", {"task": "where do swallows winter?", "role": "researcher"}),
        call_tool("Read", {"file_path": "birds.md"}),
        "Swallows winter in Africa.",
        memorize("swallows winter in Africa"),
        call_tool("ReadTranscript", {}),  # the list of its finished sub-agents
        call_tool("ReadTranscript", {"session": "main/researcher#1"}),
        call_tool("ReadTranscript", {"session": "main"}),  # itself: not a child
        "Read it.",
    ])  # fmt: skip
    with LoopbackOpenAIServer(model) as server:
        proc = retinue(["run", "-m", "openai:test", "where do swallows winter?"], server, tmp_path)
    assert proc.returncode == 0, proc.stderr
    listed, read, refused = (model.calls[i].messages[-1].content for i in (5, 6, 7))
    assert "main/researcher#1 (researcher, done, 1 turns): transcript t-" in listed
    assert "[calls Read]" in read and "a migratory bird" in read
    assert "[assistant] Swallows winter in Africa." in read
    assert "no finished sub-agent session 'main'" in refused


def test_an_interactive_session_unloaded_leaves_one_transcript_of_its_turns(
    tmp_path: Path,
) -> None:
    session = {"role": "researcher", "interactive": True}
    model = ScriptedModel([
        call_tool("SubAgent", {"task": "find the config loader", **session}),
        "It is in config.py.",
        call_tool("SubAgent", {"task": "and who calls it?", **session}),
        "cli/app.py calls it.",
        call_tool("UnloadSubAgent", {"role": "researcher"}),
        memorize("config.py holds the config loader"),
        "config.py, called from cli/app.py.",
    ])  # fmt: skip
    with LoopbackOpenAIServer(model) as server:
        proc = retinue(["run", "-m", "openai:test", "where is the config?"], server, tmp_path)
    assert proc.returncode == 0, proc.stderr
    kept = json.loads(retinue(["sessions", "--ended", "--json"], None, tmp_path).stdout)
    child = next(s for s in kept if s["session_id"] == "main/researcher")
    assert (child["kind"], child["turns"], child["outcome"]) == ("interactive", 2, "done")
    shown = json.loads(retinue(["sessions", "show", child["id"], "--json"], None, tmp_path).stdout)
    said = [e["content"] for e in shown["entries"] if e["role"] in ("user", "assistant")]
    assert said[-4:] == ["find the config loader", "It is in config.py.", "and who calls it?",
                         "cli/app.py calls it."]  # fmt: skip


LEAD = """---
name: lead
description: Leads an investigation; asks the scout, then reads what it did.
tools: [Read, Agent(scout)]
capabilities: [transcripts]
---
You lead.
"""
SCOUT = """---
name: scout
description: Looks around.
tools: [Read]
---
You look around.
"""


def test_a_nested_sub_agent_is_kept_under_its_parent_whose_role_may_read_it(
    tmp_path: Path,
) -> None:
    agents = tmp_path / ".retinue" / "agents"
    agents.mkdir(parents=True)
    (agents / "lead.md").write_text(LEAD)
    (agents / "scout.md").write_text(SCOUT)
    model = ScriptedModel([
        call_tool("SubAgent", {"task": "find the loader", "role": "lead"}),
        call_tool("SubAgent", {"task": "look for the loader", "role": "scout"}),  # the lead
        "Found it in config.py.",  # the scout
        memorize("the loader is in config.py"),  # the scout's consolidation
        call_tool("ReadTranscript", {"session": "main/lead#1/scout#2"}),  # the lead reads it
        "The scout says config.py.",
        memorize("the scout found config.py"),  # the lead's consolidation
        "config.py.",
    ])  # fmt: skip
    with LoopbackOpenAIServer(model) as server:
        proc = retinue(["run", "-m", "openai:test", "where is the loader?"], server, tmp_path)
    assert proc.returncode == 0, proc.stderr
    read = model.calls[5].messages[-1].content
    assert "of session main/lead#1/scout#2 (role scout, one-shot, outcome done" in read
    assert "[assistant] Found it in config.py." in read
    kept = {s["session_id"]: s for s in json.loads(
        retinue(["sessions", "--ended", "--json"], None, tmp_path).stdout)}  # fmt: skip
    scout, lead = kept["main/lead#1/scout#2"], kept["main/lead#1"]
    assert (scout["parent_id"], scout["depth"], lead["parent_id"], lead["depth"]) == (
        "main/lead#1", 2, "main", 1)  # fmt: skip
    shown = json.loads(retinue(["sessions", "show", lead["id"], "--json"], None, tmp_path).stdout)
    assert [c["id"] for c in shown["children"]] == [scout["id"]]
