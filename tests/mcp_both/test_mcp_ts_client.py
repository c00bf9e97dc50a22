"""The TypeScript MCP SDK's client (@modelcontextprotocol/sdk 1.32.2, an implementation this
project did not write) drives ``retinue mcp serve`` on stdio at 2025-11-25, the newest
version that SDK speaks: the server names its version, a Retinue error arrives with its own
message, and a sub-agent's question is answered through the client's elicitation handler
within the same call (the answer continues the same turn). The test skips without node or
``tests/mcp_both/ts/node_modules`` (``.ci/run`` installs it)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from mcp_kit import role
from test_mcp_cli import env_for

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.testing import ScriptedModel, call_tool

TS = Path(__file__).with_name("ts")
pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.skipif(
        shutil.which("node") is None
        or not (TS / "node_modules" / "@modelcontextprotocol").is_dir(),
        reason="needs node and tests/mcp_both/ts/node_modules (cd tests/mcp_both/ts && npm ci)",
    ),
]


async def test_the_typescript_sdk_client_drives_mcp_serve(tmp_path: Path, workspace: Path) -> None:
    role(workspace, "asker", "capabilities: [ask_parent]", "You ask when unsure.")
    model = ScriptedModel([call_tool("AskParent", {"question": "Which colour?"}), "painted it"])
    with LoopbackOpenAIServer(model) as server:
        env = env_for(tmp_path, server)
        proc = await asyncio.create_subprocess_exec(
            "node", str(TS / "drive.mjs"), sys.executable, str(workspace), cwd=TS, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 80)
    assert proc.returncode == 0, err.decode()[-3000:]
    seen = json.loads(out.decode().strip().splitlines()[-1])
    assert seen["server"] == {"name": "retinue", "version": version("retinue")}
    assert seen["unknown"]["isError"] is True
    assert "nobody" in seen["unknown"]["text"]
    assert "Error executing tool" not in seen["unknown"]["text"]
    assert "Traceback" not in err.decode()
    painted = seen["painted"]
    assert painted["isError"] is False and "painted it" in painted["text"]
    assert painted["structured"] is None  # the reply once, as text
    assert len(seen["asked"]) == 1 and "Which colour?" in seen["asked"][0]
    # one turn, continued: its second model call reads the answer as AskParent's result
    assert model.calls[1].messages[-1].content == "teal"
