"""``retinue a2a serve`` as a real process: a context opened by ``a2a-sdk``'s client over HTTP,
and its session consolidated into memory when the server gets SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import uuid
from pathlib import Path

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(300)  # a hang bound; servers start slowly under load


async def test_serve_runs_a_role_and_consolidates_on_sigterm(tmp_path: Path) -> None:
    agents = tmp_path / "ws" / ".retinue" / "agents"
    agents.mkdir(parents=True)
    (agents / "helper.md").write_text(
        "---\nname: helper\ndescription: helps\nmemory: true\n---\nYou help.\n"
    )
    memorize = call_tool("memorize", {"block_updates": [], "new_passages": ["served over a2a"]})
    model = ScriptedModel(["hello from the helper", memorize])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with LoopbackOpenAIServer(model) as loopback:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
        env |= {"RETINUE_HOME": str(tmp_path / "home"), "RETINUE_BLOCK_REAL_MODELS": "1",
                "OPENAI_BASE_URL": loopback.base_url, "OPENAI_API_KEY": "test-key"}  # fmt: skip
        cmd = [sys.executable, "-m", "retinue", "a2a", "serve", "--port", str(port),
               "--model", "openai:test"]  # fmt: skip
        proc = await asyncio.create_subprocess_exec(*cmd, env=env, cwd=tmp_path / "ws")
        try:
            url = f"http://127.0.0.1:{port}/"
            refused = None
            async with httpx.AsyncClient() as plain:
                for _ in range(1200):  # 120 s for the server to start (polled)
                    with contextlib.suppress(httpx.TransportError):
                        refused = await plain.post(url, json={})
                        break
                    await asyncio.sleep(0.1)
            assert refused is not None and refused.status_code == 401
            token = (tmp_path / "home" / "server-token").read_text().strip()
            http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
            client = await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(url)
            msg = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER,
                          parts=[Part(text="say hello")])  # fmt: skip
            request = SendMessageRequest(message=msg, metadata={"role": "helper"})
            states, texts = [], []
            async for event in client.send_message(request):
                if event.HasField("status_update"):
                    states.append(event.status_update.status.state)
                    texts.extend(p.text for p in event.status_update.status.message.parts)
            assert states[-1] == TaskState.TASK_STATE_COMPLETED
            assert texts[-1] == "hello from the helper"
            assert model.remaining == 1  # the context's session is still open
        finally:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 30)
    assert model.remaining == 0  # consolidated as the server stopped
    assert "say hello" in "\n".join(m.content for m in model.calls[1].messages)
