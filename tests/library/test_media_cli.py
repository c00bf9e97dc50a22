"""``retinue run --attach FILE``: a real process sends the image to a loopback server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.messages import UserMessage
from retinue.testing import ScriptedModel

pytestmark = pytest.mark.timeout(60)
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


def retinue(args: list[str], server: LoopbackOpenAIServer, tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    env |= {"RETINUE_HOME": str(tmp_path / "home"), "RETINUE_BLOCK_REAL_MODELS": "1"}
    env |= {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test-key"}
    return subprocess.run(
        [sys.executable, "-m", "retinue", "run", "--model", "openai:gpt-4o", *args],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=50,
    )  # fmt: skip


def test_run_attach_sends_the_image_with_the_task(tmp_path: Path) -> None:
    (tmp_path / "shot.png").write_bytes(PNG)
    model = ScriptedModel(["A screenshot."])
    with LoopbackOpenAIServer(model) as server:
        proc = retinue(["--attach", "shot.png", "what is this?"], server, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "A screenshot.\n"
    asked = [m for m in model.calls[0].messages if isinstance(m, UserMessage)][-1]
    assert asked.content == "what is this?" and [p.data for p in asked.parts] == [PNG]


def test_run_attach_of_another_type_is_one_line_and_nothing_is_sent(tmp_path: Path) -> None:
    (tmp_path / "notes.zip").write_bytes(b"PK\x03\x04 zipped")
    model = ScriptedModel([])
    with LoopbackOpenAIServer(model) as server:
        proc = retinue(["--attach", "notes.zip", "read it"], server, tmp_path)
        missing = retinue(["--attach", "nowhere.png", "read it"], server, tmp_path)
    assert proc.returncode == 1
    assert "unsupported media type" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert missing.returncode == 1 and "nowhere.png" in missing.stderr
    assert not model.calls


def test_chat_attach_sends_the_file_with_the_next_message_only(tmp_path: Path) -> None:
    (tmp_path / "shot.png").write_bytes(PNG)
    (tmp_path / "notes.zip").write_bytes(b"PK\x03\x04 zipped")
    model = ScriptedModel(["A screenshot.", "Nothing attached."])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    env |= {"RETINUE_HOME": str(tmp_path / "home"), "RETINUE_BLOCK_REAL_MODELS": "1"}
    env |= {"OPENAI_API_KEY": "test-key", "RETINUE_MODEL": "openai:gpt-4o"}
    lines = "/attach shot.png\n/attach notes.zip\nwhat is it?\nand now?\n/exit\n"
    with LoopbackOpenAIServer(model) as server:
        chat = subprocess.run(
            [sys.executable, "-m", "retinue", "chat"], input=lines, capture_output=True,
            text=True, timeout=50, cwd=tmp_path, env={**env, "OPENAI_BASE_URL": server.base_url},
        )  # fmt: skip
    assert chat.returncode == 0, chat.stderr
    assert "attached image shot.png" in chat.stderr
    assert "not attached: notes.zip: unsupported media type" in chat.stderr
    first, second = ([m for m in c.messages if isinstance(m, UserMessage)] for c in model.calls)
    assert [p.data for p in first[-1].parts] == [PNG]
    assert second[-1].content == "and now?" and not second[-1].parts
