"""Context editing over the HTTP service (a real uvicorn server, the model scripted): a
conversation whose reads fill the window has its old results cleared, the stream says so,
and no summary request is made."""

from __future__ import annotations

from pathlib import Path

import pytest
from serverkit import Serve, sse_events

from retinue.engine.context_edit import is_cleared
from retinue.messages import ToolResultMessage
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(60)

FILES = [f"part{i}.txt" for i in range(6)]


def test_a_conversation_clears_its_old_reads(serve: Serve, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text("context_edit_trigger = 0.05\ncontext_edit_keep = 1\n")
    for name in FILES:
        (tmp_path / name).write_text(f"{name}\n" + "a line of the log, read once\n" * 300)
    reads = [call_tool("Read", {"file_path": str(tmp_path / n)}) for n in FILES]
    model = ScriptedModel([*reads, "The log is read."])
    server = serve(model)
    with server.client() as client:
        response = client.post(
            "/v1/conversations/log/messages?stream=true", json={"content": "read the log"}
        )
    assert response.status_code == 200, response.text
    events = sse_events(response.text)
    assert events[-1][0] == "result" and events[-1][1]["content"] == "The log is read."
    edits = [d for k, d in events if k == "compressed"]
    assert edits and all(d["reason"] == "context_edit" and d["ok"] for d in edits)
    assert all(d["after_tokens"] < d["before_tokens"] for d in edits)
    results = [m for m in model.calls[-1].messages if isinstance(m, ToolResultMessage)]
    assert [is_cleared(m) for m in results][-2:] == [False, False]  # kept 1, and the unread
    assert sum(is_cleared(m) for m in results) >= 3  # in one batch: a fifth of the window
    assert all(c.tools for c in model.calls)  # no summary request
