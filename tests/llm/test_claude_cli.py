"""``retinue run`` on an emulated Claude Fable 5.2: a refusal is one line and exit code 1."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from retinue.llm.base import ModelResponse
from retinue.llm.loopback_anthropic import LoopbackAnthropicServer
from retinue.messages import AssistantMessage
from retinue.testing import ScriptedModel

pytestmark = pytest.mark.timeout(60)


def retinue_run(
    server: LoopbackAnthropicServer, tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "RETINUE_"))}
    env |= {
        "RETINUE_HOME": str(tmp_path / "home"),
        "RETINUE_BLOCK_REAL_MODELS": "1",
        "ANTHROPIC_BASE_URL": server.base_url,
        "ANTHROPIC_API_KEY": "test-key",
    }
    return subprocess.run(
        [sys.executable, "-m", "retinue", "run", "-m", "anthropic:claude-fable-5-2", "hi"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=50,
    )


def test_a_refusal_is_one_error_line_and_exit_1(tmp_path: Path) -> None:
    refusal = ModelResponse(AssistantMessage(""), finish_reason="refusal")
    with LoopbackAnthropicServer(ScriptedModel([refusal])) as server:
        out = retinue_run(server, tmp_path)
    assert out.returncode == 1 and out.stdout == ""
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "declined to answer" in errors[0], out.stderr
    assert "Traceback" not in out.stderr and "without an answer" not in out.stderr


def test_an_answer_comes_through_with_thinking_on(tmp_path: Path) -> None:
    with LoopbackAnthropicServer(ScriptedModel(["Hello."])) as server:
        out = retinue_run(server, tmp_path)
        assert server.rejected == []
        assert server.requests[0]["thinking"] == {"type": "adaptive"}
    assert out.returncode == 0 and out.stdout.strip() == "Hello.", out.stderr
