"""``retinue mcp serve`` driven by the SDK's own client: the MCP client is the parent of
the sessions it opens, interactive ones keep their history, unloading and disconnecting
consolidate them into memory."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import sys
import time
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_kit import role
from test_mcp_cli import env_for

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.messages import Message
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(300)  # bounds a hang; a loaded machine starts servers slowly

WAIT_S = 120.0  # polled: returns once ready, so generous costs nothing on a quick machine


def memorize(*passages: str):
    return call_tool("memorize", {"block_updates": [], "new_passages": list(passages)})


def text_of(result) -> str:
    return "\n".join(getattr(b, "text", "") for b in result.content)


def said(messages: tuple[Message, ...]) -> str:
    return "\n".join(m.content for m in messages)


async def test_serve_interactive_sessions_unload_and_disconnect(
    tmp_path: Path, workspace: Path
) -> None:
    role(workspace, "helper", "memory: true", "You help with numbers.")
    model = ScriptedModel([
        "first reply",
        "second reply",
        "third reply",
        memorize("the user counts in threes"),
        "another session",
        memorize("a second session happened"),
    ])  # fmt: skip
    with LoopbackOpenAIServer(model) as server:
        env = env_for(tmp_path, server)
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "retinue", "mcp", "serve", "--model", "openai:test"],
            env=env,
            cwd=str(workspace),
        )
        async with Client(params) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {"SubAgent", "UnloadSubAgent", "SubAgentStatus"}
            params = set(tools["SubAgent"].input_schema["properties"])
            assert params == {"task", "role", "interactive", "instance"}
            roles = await client.read_resource("retinue://roles")
            listed = json.loads(roles.contents[0].text)  # type: ignore[union-attr]
            assert {"name": "helper", "description": "the helper role"} in listed

            replies, events = [], []

            async def on_progress(progress: float, total: float | None, message: str | None):
                events.append(json.loads(message or "{}"))

            for n in ("one", "two", "three"):
                args = {"task": f"count {n}", "role": "helper", "interactive": True}
                answer = await client.call_tool("SubAgent", args, progress_callback=on_progress)
                replies.append(text_of(answer))
            assert all(r for r in replies)
            assert "third reply" in replies[2]
            started = [e for e in events if e["kind"] == "run_started"]
            assert len(started) == 3
            assert started[0]["agent_id"] == "mcp-client/helper"
            assert started[0]["parent_id"] == "mcp-client"
            third_request = said(model.calls[2].messages)
            assert "count one" in third_request and "first reply" in third_request
            assert "count two" in third_request and "second reply" in third_request

            status = await client.call_tool("SubAgentStatus", {"role": "helper"})
            assert not status.is_error
            unloaded = await client.call_tool("UnloadSubAgent", {"role": "helper"})
            assert not unloaded.is_error, text_of(unloaded)
            assert "memorize" in [t.name for t in model.calls[3].tools]
            assert "count three" in said(model.calls[3].messages)
            again = await client.call_tool("UnloadSubAgent", {"role": "helper"})
            assert again.is_error

            args = {"task": "count four", "role": "helper", "interactive": True}
            assert "another session" in text_of(await client.call_tool("SubAgent", args))
        deadline = time.monotonic() + WAIT_S  # the server consolidates as the client goes away
        while model.remaining and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
    assert model.remaining == 0
    assert "count four" in said(model.calls[5].messages)


async def test_serve_over_http_needs_the_token_and_keeps_sessions(
    tmp_path: Path, workspace: Path
) -> None:
    role(workspace, "helper", "memory: true", "You help.")
    model = ScriptedModel(["first", "second", memorize("served over http")])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with LoopbackOpenAIServer(model) as server:
        env = env_for(tmp_path, server)
        cmd = [sys.executable, "-m", "retinue", "mcp", "serve", "--http", "--port", str(port),
               "--model", "openai:test"]  # fmt: skip
        proc = await asyncio.create_subprocess_exec(*cmd, env=env, cwd=workspace)
        try:
            url = f"http://127.0.0.1:{port}/mcp"
            token_file = tmp_path / "home" / "server-token"
            refused = None
            deadline = time.monotonic() + WAIT_S  # the server starting
            async with httpx.AsyncClient() as plain:
                while proc.returncode is None and time.monotonic() < deadline:
                    with contextlib.suppress(httpx.TransportError):
                        refused = await plain.post(url, json={})
                        break
                    await asyncio.sleep(0.1)
            assert refused is not None and refused.status_code == 401
            http = create_mcp_http_client(
                headers={"Authorization": f"Bearer {token_file.read_text().strip()}"}
            )
            async with Client(streamable_http_client(url, http_client=http)) as client:
                for n in ("one", "two"):
                    args = {"task": f"count {n}", "role": "helper", "interactive": True}
                    await client.call_tool("SubAgent", args)
                assert "first" in said(model.calls[1].messages)
        finally:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), WAIT_S)
    assert proc.returncode in (0, -signal.SIGTERM)  # uvicorn stops gracefully, then re-raises
    assert model.remaining == 0  # the sessions were consolidated as the server stopped
