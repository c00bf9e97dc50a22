"""MCP Inspector v2 (``@modelcontextprotocol/inspector`` 2.12.0, a client this project did
not write) drives ``retinue mcp serve --http`` at protocol 2026-07-28 (Inspector's "modern"
era: ``server/discover``, no ``initialize``), through the real bearer-token authentication.

Each test lists the tools, calls ``SubAgent`` one-shot, and calls a sub-agent that asks its
parent a question (``AskParent``), answered through Inspector; the same turn goes on to its
reply. Inspector declares the Tasks extension, so the calls run as tasks: the question is a
task's ``input_required`` and the answer Inspector's ``tasks/update``.

- Its scriptable CLI, ``mcpdo`` (a daemon holds the connection): the question comes back as
  ``elicitationPending`` and ``mcpdo elicitation/respond`` answers it; the version is the
  one ``connections/show`` reports.
- Its web page (the Node backend serving it, Chromium driven by Playwright, as a user
  clicks): the server's card shows the version, the question comes up as a dialog, the
  answer is typed there.

A loopback proxy between Inspector and the server (:mod:`bearer_proxy`, adding nothing)
records each request as the server receives it: every one carries
``MCP-Protocol-Version: 2026-07-28`` and the token.

Skips without a Node >= 22.19 or without Inspector (``cd tests/mcp_both/inspector && npm
ci`` brings both from the npm registry; ``.ci/run`` does it), and the web test without
Chromium or Playwright."""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
import pytest
from bearer_proxy import Seen, bearer_proxy, free_port
from mcp_kit import painter, role
from test_mcp_cli import env_for

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.testing import ScriptedModel

HERE = Path(__file__).with_name("inspector")
PACKAGE = HERE / "node_modules" / "@modelcontextprotocol" / "inspector"
MCPDO = PACKAGE / "clients" / "mcpdo" / "build" / "mcp-bin.js"
LAUNCHER = PACKAGE / "clients" / "launcher" / "build" / "index.js"
CHROMIUM = Path("/usr/bin/chromium")
MODERN = "2026-07-28"
ERA = "modern"  # Inspector's name for the stateless protocols (2026-07-28 on)


def _node() -> Path | None:
    """A Node >= 22.19 (Inspector's engines): the folder's own, the conformance folder's, or
    the one on PATH."""
    found = [HERE / "node_modules" / "node" / "bin" / "node",
             HERE.with_name("conformance") / "node_modules" / "node" / "bin" / "node"]  # fmt: skip
    if (on_path := shutil.which("node")) is not None:
        found.append(Path(on_path))
    for node in found:
        if not node.is_file():
            continue
        try:
            said = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            continue
        found_version = re.match(r"v(\d+)\.(\d+)\.", said.stdout)
        if found_version and (int(found_version[1]), int(found_version[2])) >= (22, 19):
            return node
    return None


NODE = _node()
pytestmark = [
    pytest.mark.timeout(300),  # a hang bound; servers start slowly under load
    pytest.mark.skipif(
        NODE is None, reason="needs Node >= 22.19 (cd tests/mcp_both/inspector && npm ci)"
    ),
    pytest.mark.skipif(
        not (MCPDO.is_file() and LAUNCHER.is_file()),
        reason="needs tests/mcp_both/inspector/node_modules "
        "(cd tests/mcp_both/inspector && npm ci)",
    ),
]


answer = painter  # (mcp_kit: sum, paint/teal, hold, memorize)


@asynccontextmanager
async def mcp_http(workspace: Path, env: dict[str, str]) -> AsyncIterator[str]:
    """``retinue mcp serve --http`` on a free loopback port; yields its base URL."""
    port = free_port()
    cmd = [sys.executable, "-m", "retinue", "mcp", "serve", "--http", "--port", str(port),
           "--model", "openai:test"]  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        *cmd, env=env, cwd=workspace, stderr=asyncio.subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient() as plain:
            for _ in range(1200):  # 120 s for the server to start (polled)
                try:
                    refused = await plain.post(f"{url}/mcp", json={})
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
                    continue
                assert refused.status_code == 401  # no token, no entry
                break
            else:
                raise AssertionError("retinue mcp serve --http did not start")
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 30)


class Mcpdo:
    """Inspector's ``mcpdo`` with a private daemon and store (``home``, ``daemon_dir``)."""

    def __init__(self, node: Path, home: Path, daemon_dir: Path) -> None:
        self.node = node
        self.env = {
            "PATH": f"{node.parent}:/usr/bin:/bin",
            "HOME": str(home),
            "MCP_INSPECTOR_DAEMON_DIR": str(daemon_dir),
            "MCP_INSPECTOR_SECRET_STORE": "file",  # no OS keychain here
        }
        self.connection = ""

    async def __call__(self, *args: str) -> Any:
        """Run one command (``--format json``); its JSON output, or an AssertionError."""
        conn = ["--conn", self.connection] if self.connection else []
        proc = await asyncio.create_subprocess_exec(
            str(self.node), str(MCPDO), "--format", "json", *conn, *args, env=self.env,
            cwd=HERE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, f"mcpdo {args}: {out.decode()[-2000:]} {err.decode()[-2000:]}"
        return json.loads(out)

    async def stop(self) -> None:
        proc = await asyncio.create_subprocess_exec(
            str(self.node), str(MCPDO), "daemon", "stop", env=self.env, cwd=HERE,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        await asyncio.wait_for(proc.wait(), 30)


def requests(seen: list[Seen]) -> list[dict[str, Any]]:
    """The JSON-RPC messages the server received (a batch counts each)."""
    found: list[dict[str, Any]] = []
    for s in seen:
        if s.method == "POST" and s.body:
            body = json.loads(s.body)
            found.extend(body if isinstance(body, list) else [body])
    return found


@dataclass
class Served:
    """``retinue mcp serve --http`` behind the recording proxy: where Inspector connects
    (``url``), with which token, what the server received (``seen``) and the model."""

    url: str
    token: str
    seen: list[Seen]
    model: ScriptedModel

    def check_the_wire(self) -> list[dict[str, Any]]:
        """Every request reached the server at 2026-07-28 with the token, with no
        ``initialize``; the JSON-RPC messages received."""
        posts = [s for s in self.seen if s.method == "POST"]
        assert posts and {s.headers.get("mcp-protocol-version") for s in posts} == {MODERN}
        assert {s.headers.get("authorization") for s in self.seen} == {f"Bearer {self.token}"}
        received = requests(self.seen)
        methods = [r.get("method") for r in received]
        assert "server/discover" in methods and "initialize" not in methods
        return received

    def check_one_turn(self, received: list[dict[str, Any]]) -> None:
        """Inspector declares the Tasks extension, so each SubAgent call ran as a task: the
        question came as the task's input_required status and the answer as one tasks/update,
        which continued the painter's turn (its next model call reads the answer as
        AskParent's result, after its own AskParent call)."""
        updates = [r["params"] for r in received if r.get("method") == "tasks/update"]
        assert len(updates) == 1 and "teal" in json.dumps(updates[0]["inputResponses"])
        after = [c for c in self.model.calls if c.messages[-1].content == "teal"]
        assert len(after) == 1
        assert any("AskParent" in str(m) for m in after[0].messages[:-1])


@asynccontextmanager
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    """A workspace with a helper and an asker, its scripted model, and the server."""
    workspace = tmp_path / "ws"
    role(workspace, "helper", "capabilities: []", "You help.")
    role(workspace, "asker", "capabilities: [ask_parent]", "You ask when unsure.")
    model = ScriptedModel(responder=answer)
    seen: list[Seen] = []
    with LoopbackOpenAIServer(model) as model_server:
        async with mcp_http(workspace, env_for(tmp_path, model_server)) as upstream:
            token = (tmp_path / "home" / "server-token").read_text().strip()
            async with bearer_proxy(upstream, None, seen) as base:  # records, adds nothing
                yield Served(f"{base}/mcp", token, seen, model)


async def test_inspector_cli_drives_mcp_serve_at_2026_07_28_and_answers_a_question(
    tmp_path: Path,
) -> None:
    assert NODE is not None
    daemon_dir = Path(tempfile.mkdtemp(prefix="mcpdo-"))  # short: a socket path is bounded
    mcpdo = Mcpdo(NODE, tmp_path / "inspector-home", daemon_dir)
    try:
        async with served(tmp_path) as server:
            connected = await mcpdo(
                "connect", server.url, "--era", ERA, "--transport", "http",
                "--header", f"Authorization: Bearer {server.token}",
            )  # fmt: skip
            mcpdo.connection = connected["name"]
            shown = await mcpdo("connections/show", connected["name"])
            listed = await mcpdo("tools/list")
            once = await mcpdo("tools/call", "SubAgent", "task:=sum", "role:=helper")
            asked = await mcpdo("tools/call", "SubAgent", "task:=paint", "role:=asker")
            pending = asked["elicitationPending"]
            painted = await mcpdo("elicitation/respond", pending["elicitationId"], "answer:=teal")
    finally:
        await mcpdo.stop()
        shutil.rmtree(daemon_dir, ignore_errors=True)
    # 2026-07-28, as Inspector reports it and as the server received every request
    assert connected["protocolEra"] == "modern"
    assert shown["protocolVersion"] == MODERN and MODERN in shown["supportedVersions"]
    assert shown["serverInfo"] == {"name": "retinue", "version": version("retinue")}
    received = server.check_the_wire()
    # the tools, and a one-shot call's reply
    assert {"SubAgent", "SubAgentStatus", "UnloadSubAgent"} <= {t["name"] for t in listed["tools"]}
    assert once["isError"] is False and once["content"][0]["text"] == "the sum is 5"
    # the sub-agent's question reached Inspector as a form to answer, and the answer given
    # through Inspector went on to the painter's turn, which ended with its reply
    assert "Which colour?" in pending["message"] and pending["toolName"] == "SubAgent"
    assert "answer" in pending["requestedSchema"]["properties"]
    assert painted["isError"] is False and "painted it teal" in painted["content"][0]["text"]
    server.check_one_turn(received)


@asynccontextmanager
async def inspector_web(node: Path, home: Path, server: Served) -> AsyncIterator[str]:
    """Inspector's web UI (its Node backend, serving the page) for ``server`` at 2026-07-28,
    on free loopback ports, behind an API token of its own; yields the page's URL."""
    port, api_token = free_port(), secrets.token_hex(16)
    env = {"PATH": f"{node.parent}:/usr/bin:/bin", "HOME": str(home),
           "CLIENT_PORT": str(port), "MCP_SANDBOX_PORT": str(free_port()),
           "MCP_AUTO_OPEN_ENABLED": "false", "MCP_INSPECTOR_API_TOKEN": api_token,
           "MCP_INSPECTOR_SECRET_STORE": "memory"}  # fmt: skip
    cmd = [str(node), str(LAUNCHER), "--web", "--transport", "http", "--server-url", server.url,
           "--protocol-era", ERA, "--header", f"Authorization: Bearer {server.token}"]  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        *cmd, env=env, cwd=HERE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    drain: asyncio.Task[bytes] | None = None
    try:
        assert proc.stdout is not None
        said = b""
        while b"up and running" not in said:
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            assert line, f"Inspector's web UI did not start: {said.decode()[-2000:]}"
            said += line
        drain = asyncio.create_task(proc.stdout.read())  # (its pipe must not fill)
        yield f"http://127.0.0.1:{port}/?MCP_INSPECTOR_API_TOKEN={api_token}"
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 30)
        if drain is not None:
            await drain


@pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"{CHROMIUM} is absent (install Debian's chromium package, as .ci/run does)",
)
async def test_inspector_web_ui_drives_mcp_serve_at_2026_07_28_and_answers_a_question(
    tmp_path: Path,
) -> None:
    """Inspector's web page in Chromium, as a user works it: connect, see the version, list
    the tools, run SubAgent one-shot, then a sub-agent that asks: the question comes up as
    an elicitation dialog, the answer typed there goes on to the sub-agent's reply."""
    assert NODE is not None
    async_api = pytest.importorskip("playwright.async_api")
    async with (
        served(tmp_path) as server,
        inspector_web(NODE, tmp_path / "web", server) as page_url,
        async_api.async_playwright() as playwright,
    ):
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox"]
        )
        try:
            await work_the_page(await browser.new_page(), page_url, async_api.expect)
        finally:
            await browser.close()
    server.check_one_turn(server.check_the_wire())


async def work_the_page(page: Any, url: str, expect: Any) -> None:
    """What a user does on Inspector's page (see the web test's docstring)."""
    page.set_default_timeout(30_000)
    wait = 30_000  # (ms: a loaded machine)
    await page.goto(url)
    connect = page.get_by_role("switch", name=re.compile("Connect or disconnect"))
    await connect.check(force=True)  # (Mantine draws its own track over the checkbox)
    await expect(page.get_by_text(f"MCP {MODERN}", exact=True)).to_be_visible(timeout=wait)
    await page.get_by_text("Tools", exact=True).first.click()
    for name in ("SubAgent", "SubAgentStatus", "UnloadSubAgent"):
        await expect(page.get_by_role("button", name=name, exact=True)).to_be_visible(timeout=wait)
    await page.get_by_role("button", name="SubAgent", exact=True).click()

    async def execute(task: str, role_name: str) -> None:
        await page.get_by_role("textbox", name="Task").fill(task)
        await page.get_by_role("textbox", name="Role").fill(role_name)
        await page.get_by_role("button", name="Execute Tool").click()

    await execute("sum", "helper")
    await expect(page.get_by_text("the sum is 5", exact=True)).to_be_visible(timeout=wait)
    await page.get_by_role("button", name="Close results").click()  # (back to the form)
    await execute("paint", "asker")
    dialog = page.get_by_role("dialog")
    await expect(dialog).to_contain_text("Which colour?", timeout=wait)
    await dialog.get_by_role("textbox", name="Answer").fill("teal")
    await dialog.get_by_role("button", name="Submit").click()
    reply = page.get_by_text(re.compile("^painted it teal"))  # (not the task's JSON)
    await expect(reply).to_be_visible(timeout=wait)
    await expect(dialog).to_have_count(0, timeout=wait)
