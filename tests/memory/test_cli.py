"""``retinue memory``: show, search, edit, retry, and one-line errors."""

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from retinue.cli.memory import memory_app
from retinue.config import Settings
from retinue.errors import ModelError
from retinue.memory import ConsolidationOptions, open_memory
from retinue.messages import AssistantMessage, Message, UserMessage
from retinue.runtime import LOCAL_DEFAULT, choose_model
from retinue.testing import ScriptedModel, call_tool

runner = CliRunner()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RETINUE_HOME", str(tmp_path))
    monkeypatch.delenv("RETINUE_MODEL", raising=False)
    monkeypatch.delenv("RETINUE_EMBEDDING_MODEL", raising=False)
    store = open_memory(tmp_path)
    asyncio.run(store.set_block("acme", "coder", "human", "Prefers Rust"))
    asyncio.run(store.insert_passage("acme", "coder", "The CI runs on self-hosted runners"))
    store.close()
    return tmp_path


def test_show_prints_blocks_and_count_for_the_tenant(home: Path) -> None:
    result = runner.invoke(memory_app, ["show", "coder", "--tenant", "acme"])
    assert result.exit_code == 0, result.output
    assert "Prefers Rust" in result.output
    assert "archival passages: 1" in result.output
    other = runner.invoke(memory_app, ["show", "coder"])  # tenant "default": nothing stored
    assert other.exit_code == 1 and "Prefers Rust" not in other.output
    assert "no role named 'coder' has memory (tenant 'default')" in other.output
    known = runner.invoke(memory_app, ["show", "researcher"])  # a role, nothing remembered
    assert known.exit_code == 0 and "researcher has no memory yet" in known.output


def test_search(home: Path) -> None:
    result = runner.invoke(memory_app, ["search", "coder", "where does CI run", "--tenant", "acme"])
    assert result.exit_code == 0
    assert "self-hosted runners" in result.output
    none = runner.invoke(memory_app, ["search", "coder", "kubernetes", "--tenant", "acme"])
    assert "no passages match" in none.output


def test_edit_with_value_and_over_limit(home: Path) -> None:
    ok = runner.invoke(
        memory_app, ["edit", "coder", "persona", "--value", "Terse.", "--tenant", "acme"]
    )
    assert ok.exit_code == 0 and "saved 'persona' (6/2000 chars)" in ok.output
    shown = runner.invoke(memory_app, ["show", "coder", "--tenant", "acme"])
    assert "Terse." in shown.output
    bad = runner.invoke(memory_app, ["edit", "coder", "persona", "--value", "x" * 3000])
    assert bad.exit_code == 1
    assert "error: block 'persona' would hold 3000 characters" in bad.output
    assert "Traceback" not in bad.output
    unknown = runner.invoke(memory_app, ["edit", "coder", "diary", "--value", "x"])
    assert unknown.exit_code == 1 and "unknown core memory block 'diary'" in unknown.output


def test_edit_in_editor(home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nprintf "Edited in editor\\n" > "$1"\n')
    editor.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(editor))
    result = runner.invoke(memory_app, ["edit", "coder", "human", "--tenant", "acme"])
    assert result.exit_code == 0, result.output
    shown = runner.invoke(memory_app, ["show", "coder", "--tenant", "acme"])
    assert "Edited in editor" in shown.output


def _kept_transcript(home: Path, session_id: str) -> None:
    """A consolidation whose model failed: its transcript waits in pending/."""
    store = open_memory(home, options=ConsolidationOptions(retry_delay=0))
    asyncio.run(
        store.consolidate(
            tenant="acme", role="coder", session_id=session_id,
            messages=[UserMessage(f"remember {session_id}")],
            model=ScriptedModel([ModelError("down")] * 3),
        )
    )  # fmt: skip
    store.close()


@pytest.mark.parametrize(
    ("env", "expected"),
    [({}, LOCAL_DEFAULT), ({"OPENAI_API_KEY": "k"}, "openai:gpt-5.6-terra")],
)
def test_retry_without_a_model_uses_chats_default_and_reports_each_transcript(
    home: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: str
) -> None:
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    _kept_transcript(home, "s1")
    _kept_transcript(home, "s2")
    asked: list[str] = []

    def memorize(messages: Sequence[Message], _tools: object) -> AssistantMessage:
        fact = "fact about s1" if "remember s1" in messages[-1].content else "fact about s2"
        return call_tool("memorize", {"new_passages": [fact]})

    def resolve(spec: str) -> ScriptedModel:
        asked.append(spec)
        return ScriptedModel(responder=memorize, name=spec)

    monkeypatch.setattr("retinue.llm.resolve.resolve_model", resolve)
    result = runner.invoke(memory_app, ["retry"])
    assert result.exit_code == 0, result.output
    assert asked == [expected] == [choose_model(Settings.load())[0]]  # what chat would use
    lines = result.output.splitlines()
    for n in (1, 2):
        begins = [ln for ln in lines if ln.startswith(f"[{n}/2] ")]
        assert len(begins) == 1 and "coder's memory" in begins[0]
        assert f"consolidating with {expected}" in begins[0]
    assert (
        sum(ln.startswith("applied s") and "(1 passage(s), 0 block(s)," in ln for ln in lines) == 2
    )
    assert not list((home / "pending").iterdir())


def test_retry_with_a_bad_model_name(home: Path) -> None:
    bad = runner.invoke(memory_app, ["retry", "--model", "nonsense"])
    assert bad.exit_code == 1 and "error:" in bad.output and "nonsense" in bad.output
    assert "Traceback" not in bad.output


def test_retry_reports_failures_with_exit_code_1(home: Path) -> None:
    # A kept transcript, retried against a provider the test guard refuses at once.
    _kept_transcript(home, "s9")
    result = runner.invoke(
        memory_app,
        ["retry", "--model", "openai:gpt-4o-mini"],
        env={"OPENAI_BASE_URL": "http://models.invalid/v1"},
    )
    assert result.exit_code == 1, result.output
    assert "failed s9" in result.output and "blocked" in result.output
    assert len(list((home / "pending").iterdir())) == 1
