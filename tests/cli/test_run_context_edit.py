"""``retinue run`` clears old tool results before any summary: a real process against a
loopback OpenAI-compatible server that replays a scripted model, on a model with an
8,192-token window (``gpt-4``), ``config.toml`` setting the first stage."""

from __future__ import annotations

from pathlib import Path

import pytest
from runkit import retinue_run

from retinue.engine.context_edit import is_cleared
from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.messages import ToolResultMessage
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(60)


def test_a_run_clears_read_results_instead_of_summarising(tmp_path: Path) -> None:
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_text(f"# {name}\n" + "value = compute(value) + 1\n" * 200)
    reads = [call_tool("Read", {"file_path": str(tmp_path / n)}) for n in ("a.py", "b.py", "c.py")]
    model = ScriptedModel([*reads, "All three files increment a value."])
    config = "context_edit_trigger = 0.3\ncontext_edit_keep = 0\n"
    with LoopbackOpenAIServer(model) as server:
        proc = retinue_run(
            "openai:gpt-4", "read a.py, b.py and c.py", server.base_url, tmp_path, config
        )
    assert proc.returncode == 0, proc.stderr
    assert "All three files increment a value." in proc.stdout
    assert "main cleared old tool results (1): " in proc.stderr  # the progress line
    last = [m for m in model.calls[-1].messages if isinstance(m, ToolResultMessage)]
    assert [is_cleared(m) for m in last] == [True, True, False]  # the unread one stays
    assert "repeat the Read call" in last[0].content
    assert all(c.tools for c in model.calls)  # no summary request was made
