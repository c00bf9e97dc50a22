"""The TypeScript MCP SDK v2 client (@modelcontextprotocol/client 2.4.0, an implementation
this project did not write), pinned to protocol 2026-07-28, drives ``retinue mcp serve`` on
stdio: the version is negotiated by ``server/discover``, the tools are listed, a one-shot
``SubAgent`` call replies, and a sub-agent's ``AskParent`` question arrives as an
``input_required`` result that the client's elicitation handler answers by retrying the call
(the SDK's own multi-round-trip driver); the answer continues the same turn to its final
reply. The test skips without node or ``tests/mcp_both/ts2/node_modules`` (``.ci/run``
installs it)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from mcp_kit import painter, role
from test_mcp_cli import env_for

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.testing import ScriptedModel

TS2 = Path(__file__).with_name("ts2")
pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.skipif(
        shutil.which("node") is None
        or not (TS2 / "node_modules" / "@modelcontextprotocol" / "client").is_dir(),
        reason="needs node and tests/mcp_both/ts2/node_modules (cd tests/mcp_both/ts2 && npm ci)",
    ),
]


answer = painter  # (mcp_kit: sum, paint/teal, hold, memorize)


async def drive(workspace: Path, env: dict[str, str]) -> dict[str, Any]:
    """Run drive.mjs against ``retinue mcp serve`` in ``workspace``: what it saw."""
    node = ["node", str(TS2 / "drive.mjs"), sys.executable, str(workspace)]
    pipe = asyncio.subprocess.PIPE
    proc = await asyncio.create_subprocess_exec(*node, cwd=TS2, env=env, stdout=pipe, stderr=pipe)
    out, err = await asyncio.wait_for(proc.communicate(), 80)
    assert proc.returncode == 0, err.decode()[-3000:]
    assert "Traceback" not in err.decode()
    return json.loads(out.decode().strip().splitlines()[-1])


async def test_the_v2_typescript_client_drives_mcp_serve_at_2026_07_28(
    tmp_path: Path, workspace: Path
) -> None:
    role(workspace, "helper", "capabilities: []", "You help.")
    role(workspace, "asker", "capabilities: [ask_parent]", "You ask when unsure.")
    model = ScriptedModel(responder=answer)
    with LoopbackOpenAIServer(model) as server:
        seen = await drive(workspace, env_for(tmp_path, server))
    assert seen["protocol"] == "2026-07-28" and seen["era"] == "modern"
    assert seen["server"] == {"name": "retinue", "version": version("retinue")}
    assert {"SubAgent", "SubAgentStatus", "UnloadSubAgent"} <= set(seen["tools"])
    assert "2026-07-28" in seen["discovered"]  # server/discover offered it
    # no 2025 handshake on the session's process: each request names its version in _meta
    assert "initialize" not in [s["method"] for s in seen["sent"]]
    assert {s["version"] for s in seen["sent"]} == {"2026-07-28"}
    assert seen["once"] == {"isError": False, "text": "the sum is 5"}  # one-shot: the reply
    painted = seen["painted"]
    assert painted["isError"] is False and "painted it" in painted["text"]
    assert len(seen["asked"]) == 1 and "Which colour?" in seen["asked"][0]
    # the question came as an input_required result, and the client retried the call with
    # its answer and the server's requestState (no server-to-client request at 2026-07-28)
    assert seen["resultTypes"].count("input_required") == 1
    calls = [s for s in seen["sent"] if s["method"] == "tools/call"]
    assert [c["retry"] for c in calls] == [False, False, True]
    answered = json.dumps(calls[2]["answered"])
    assert "teal" in answered
    # one turn, continued: the painter's next model call reads the answer as AskParent's
    # result, after its own AskParent call in the same history
    after = [c for c in model.calls if c.messages[-1].content == "teal"]
    assert len(after) == 1
    assert any("AskParent" in str(m) for m in after[0].messages[:-1])
