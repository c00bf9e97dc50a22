"""``retinue run -m gemini:gemini-3-pro`` against the Gemini emulator, configured as a user
would (``GEMINI_API_KEY``, ``GOOGLE_GEMINI_BASE_URL``): an answer, and a refusal in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from retinue.llm.base import ModelResponse
from retinue.llm.loopback_gemini import LoopbackGeminiServer
from retinue.messages import AssistantMessage
from retinue.testing import ScriptedModel

pytestmark = pytest.mark.timeout(60)


def retinue_run(server: LoopbackGeminiServer, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    drop = ("GEMINI_", "GOOGLE_", "RETINUE_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env |= {
        "RETINUE_HOME": str(tmp_path / "home"),
        "RETINUE_BLOCK_REAL_MODELS": "1",
        "GOOGLE_GEMINI_BASE_URL": server.base_url,
        "GEMINI_API_KEY": "test-key",
    }
    return subprocess.run(
        [sys.executable, "-m", "retinue", "run", "-m", "gemini:gemini-3-pro", "hi"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=50,
    )


def test_an_answer_comes_through_with_the_builtin_tools_declared(tmp_path: Path) -> None:
    with LoopbackGeminiServer(ScriptedModel(["Hello."])) as server:
        out = retinue_run(server, tmp_path)
        assert server.rejected == []
        (body,) = server.requests
    assert out.returncode == 0 and out.stdout.strip() == "Hello.", out.stderr
    declared = [d["name"] for t in body["tools"] for d in t["functionDeclarations"]]
    assert "Read" in declared and "Bash" in declared


def test_a_refusal_is_one_error_line_and_exit_1(tmp_path: Path) -> None:
    refusal = ModelResponse(AssistantMessage(""), finish_reason="refusal")
    with LoopbackGeminiServer(ScriptedModel([refusal])) as server:
        out = retinue_run(server, tmp_path)
    assert out.returncode == 1 and out.stdout == ""
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "refused to answer (SAFETY)" in errors[0], out.stderr
    assert "Traceback" not in out.stderr and "without an answer" not in out.stderr
